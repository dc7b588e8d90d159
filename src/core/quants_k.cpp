// ggml's k-quant quantizers, step for step: every product, sum and division is a separately rounded
// f32 operation in the reference's order (contraction is off for this file, before any include), so
// the codes and scales come out as ggml's bytes. The algorithm is ggml's (ggml-quants.c): per
// sub-block a scale (and minimum) is fitted by trying a range of candidate scales and keeping the
// one with the smallest weighted error; the sub-block scales are then quantized against the
// super-block's largest one, and the values requantized with the stored scales.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "core/quants_k.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"

namespace mb {

namespace {

constexpr int kQK = MB_QK_K;

// Below this largest magnitude a group counts as all zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int: adding 1.5 * 2^23 leaves round-to-nearest-even of v in the low mantissa bits.
// Reproduced bit for bit for every input, including those (|v| > 2^22, infinities, NaN) where the
// result is not the nearest integer: ggml's bytes come from the same trick.
inline int nearest(float v) {
    const float t = v + 12582912.0f;
    uint32_t u;
    std::memcpy(&u, &t, sizeof u);
    return int(u & 0x007FFFFFu) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

inline float half_value(uint16_t h) { return fp16_to_fp32(h); }

// A scale and a minimum for n values x with codes 0..nmax: value ~ scale * code - the_min. Starts
// from the plain min/max fit, then tries nstep + 1 candidate scales (rmin + rdelta * is + nmax over
// the range), solving weighted least squares for scale and minimum at each and keeping the one with
// the smallest weighted error (absolute when use_mad, else squared). The minimum is never above 0.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min, uint8_t* Laux,
                    float rmin, float rdelta, int nstep, bool use_mad) {
    float lo = x[0];
    float hi = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        const float wi = w[i];
        sum_w += wi;
        sum_x += wi * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -lo;
        return 0.0f;
    }
    float iscale = float(nmax) / (hi - lo);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = uint8_t(clamp_int(nearest(iscale * (x[i] - lo)), 0, nmax));
        float diff = scale * float(L[i]) + lo - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * float(is) + float(nmax)) / (hi - lo);
        float sum_l = 0;
        float sum_l2 = 0;
        float sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(nearest(iscale * (x[i] - lo)), 0, nmax);
            Laux[i] = uint8_t(l);
            const float wi = w[i];
            sum_l += wi * float(l);
            sum_l2 += wi * float(l) * float(l);
            sum_xl += wi * float(l) * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * float(Laux[i]) + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                error += w[i] * diff;
            }
            if (error < best_error) {
                std::memcpy(L, Laux, size_t(n));
                best_error = error;
                scale = this_scale;
                lo = this_min;
            }
        }
    }
    *the_min = -lo;
    return scale;
}

// The largest-magnitude value of n (the first on ties) and its magnitude.
inline float signed_absmax(int n, const float* x, float* amax_out) {
    float vmax = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float a = std::fabs(x[i]);
        if (a > amax) {
            amax = a;
            vmax = x[i];
        }
    }
    *amax_out = amax;
    return vmax;
}

// A symmetric scale for n values with codes -nmax..nmax-1 (stored + nmax), weighted by x^2: the
// plain amax fit, then 18 nearby candidate scales (nmax +- 0.1 * is), each kept when its weighted
// least-squares fit is better (q6_K's fit: ggml's make_qx_quants with rmse_type 1).
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
    float amax;
    const float vmax = signed_absmax(n, x, &amax);
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    float iscale = float(-nmax) / vmax;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = int8_t(l + nmax);
        const float wi = x[i] * x[i];
        sumlx += wi * x[i] * float(l);
        suml2 += wi * float(l) * float(l);
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(float(nmax) + 0.1f * float(is)) / vmax;
        sumlx = 0;
        suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(nearest(iscale * x[i]), -nmax, nmax - 1);
            const float wi = x[i] * x[i];
            sumlx += wi * x[i] * float(l);
            suml2 += wi * float(l) * float(l);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                L[i] = int8_t(nmax + clamp_int(nearest(iscale * x[i]), -nmax, nmax - 1));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// q3_K's symmetric fit (codes -nmax..nmax-1, stored + nmax), weighted by x^2: from the amax fit, up
// to five passes that move single codes to where they improve the weighted least-squares fit.
float fit_symmetric_refined(int n, int nmax, const float* x, int8_t* L) {
    float amax;
    const float vmax = signed_absmax(n, x, &amax);
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    const float iscale = float(-nmax) / vmax;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = int8_t(l);
        const float wi = x[i] * x[i];
        sumlx += wi * x[i] * float(l);
        suml2 += wi * float(l) * float(l);
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float wi = x[i] * x[i];
            float slx = sumlx - wi * x[i] * float(L[i]);
            if (slx > 0) {
                float sl2 = suml2 - wi * float(L[i]) * float(L[i]);
                const int nl = clamp_int(nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += wi * x[i] * float(nl);
                    sl2 += wi * float(nl) * float(nl);
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = int8_t(nl);
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (changed == 0) break;
    }
    for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Packs 2-bit codes: element 128*h + 32*c + l goes to bits 2c of qs[32*h + l].
void pack_2bit(const uint8_t* L, uint8_t* qs) {
    for (int h = 0; h < kQK / 128; ++h) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t* p = L + 128 * h + l;
            qs[32 * h + l] = uint8_t(p[0] | (p[32] << 2) | (p[64] << 4) | (p[96] << 6));
        }
    }
}

// The scales/minimums of q4_K and q5_K: sub-block fits against the super-block's largest scale and
// minimum (6 bits each), then every value requantized with the stored scale and minimum into L.
template <class Block>
void quantize_k4_scales(const float* x, Block& y, int nmax, float rmin, float rdelta, int nstep, uint8_t* L) {
    float scales[kQK / 32];
    float mins[kQK / 32];
    float weights[32];
    uint8_t Laux[32];
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < kQK / 32; ++j) {
        const float* xb = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += xb[l] * xb[l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xb[l]);
        scales[j] = fit_scale_min(32, nmax, xb, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < kQK / 32; ++j) {
        uint8_t ls = uint8_t(nearest(inv_scale * scales[j]));
        uint8_t lm = uint8_t(nearest(inv_min * mins[j]));
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            y.scales[j] = ls;
            y.scales[j + 4] = lm;
        } else {
            y.scales[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
            y.scales[j - 4] = uint8_t(y.scales[j - 4] | ((ls >> 4) << 6));
            y.scales[j] = uint8_t(y.scales[j] | ((lm >> 4) << 6));
        }
    }
    y.d = fp32_to_fp16(max_scale / 63.0f);
    y.dmin = fp32_to_fp16(max_min / 63.0f);
    for (int j = 0; j < kQK / 32; ++j) {
        uint8_t sc;
        uint8_t mn;
        mb_qb_k4_scale_min(j, y.scales, &sc, &mn);
        const float d = half_value(y.d) * float(sc);
        if (!(d != 0)) continue;
        const float dm = half_value(y.dmin) * float(mn);
        for (int i = 0; i < 32; ++i) {
            L[32 * j + i] = uint8_t(clamp_int(nearest((x[32 * j + i] + dm) / d), 0, nmax));
        }
    }
}

}  // namespace

void quantize_q2_K(const float* x, block_q2_K* y, int64_t nb) {
    constexpr float q4scale = 15.0f;
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        uint8_t L[kQK];
        uint8_t Laux[16];
        float weights[16];
        float mins[kQK / 16];
        float scales[kQK / 16];
        float max_scale = 0;
        float max_min = 0;
        for (int j = 0; j < kQK / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        block_q2_K& b = y[i];
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < kQK / 16; ++j) b.scales[j] = uint8_t(nearest(iscale * scales[j]));
            b.d = fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < kQK / 16; ++j) b.scales[j] = 0;
            b.d = fp32_to_fp16(0.0f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < kQK / 16; ++j) {
                b.scales[j] = uint8_t(b.scales[j] | (nearest(iscale * mins[j]) << 4));
            }
            b.dmin = fp32_to_fp16(max_min / q4scale);
        } else {
            b.dmin = fp32_to_fp16(0.0f);
        }
        for (int j = 0; j < kQK / 16; ++j) {
            const float d = half_value(b.d) * float(b.scales[j] & 0xF);
            if (!(d != 0)) continue;
            const float dm = half_value(b.dmin) * float(b.scales[j] >> 4);
            for (int l = 0; l < 16; ++l) {
                L[16 * j + l] = uint8_t(clamp_int(nearest((x[16 * j + l] + dm) / d), 0, 3));
            }
        }
        pack_2bit(L, b.qs);
    }
}

void quantize_q3_K(const float* x, block_q3_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        int8_t L[kQK];
        float scales[kQK / 16];
        float max_scale = 0;
        float amax = 0;
        for (int j = 0; j < kQK / 16; ++j) {
            scales[j] = fit_symmetric_refined(16, 4, x + 16 * j, L + 16 * j);
            const float a = std::fabs(scales[j]);
            if (a > amax) {
                amax = a;
                max_scale = scales[j];
            }
        }
        block_q3_K& b = y[i];
        std::memset(b.scales, 0, sizeof b.scales);
        if (max_scale != 0) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < kQK / 16; ++j) {
                const int8_t r = int8_t(nearest(iscale * scales[j]));
                const int l = clamp_int(r, -32, 31) + 32;
                if (j < 8) {
                    b.scales[j] = uint8_t(l & 0xF);
                } else {
                    b.scales[j - 8] = uint8_t(b.scales[j - 8] | ((l & 0xF) << 4));
                }
                b.scales[j % 4 + 8] = uint8_t(b.scales[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
            }
            b.d = fp32_to_fp16(1 / iscale);
        } else {
            b.d = fp32_to_fp16(0.0f);
        }
        for (int j = 0; j < kQK / 16; ++j) {
            const float d = half_value(b.d) * float(mb_qb_k3_scale(j, b.scales) - 32);
            if (!(d != 0)) continue;
            for (int l = 0; l < 16; ++l) {
                L[16 * j + l] = int8_t(clamp_int(nearest(x[16 * j + l] / d), -4, 3) + 4);
            }
        }
        // The third bit of element j goes to bit j / 32 of hmask[j % 32].
        std::memset(b.hmask, 0, sizeof b.hmask);
        uint8_t codes[kQK];
        for (int j = 0; j < kQK; ++j) {
            int l = L[j];
            if (l > 3) {
                b.hmask[j % 32] = uint8_t(b.hmask[j % 32] | (1u << (j / 32)));
                l -= 4;
            }
            codes[j] = uint8_t(l);
        }
        pack_2bit(codes, b.qs);
    }
}

void quantize_q4_K(const float* x, block_q4_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        uint8_t L[kQK];
        quantize_k4_scales(x, y[i], 15, -1.0f, 0.1f, 20, L);
        for (int p = 0; p < kQK / 64; ++p) {
            for (int l = 0; l < 32; ++l) {
                y[i].qs[32 * p + l] = uint8_t(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
            }
        }
    }
}

void quantize_q5_K(const float* x, block_q5_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        uint8_t L[kQK];
        quantize_k4_scales(x, y[i], 31, -0.5f, 0.1f, 15, L);
        std::memset(y[i].qh, 0, sizeof y[i].qh);
        for (int p = 0; p < kQK / 64; ++p) {
            for (int l = 0; l < 32; ++l) {
                const int lo = L[64 * p + l];
                const int hi = L[64 * p + 32 + l];
                y[i].qh[l] = uint8_t(y[i].qh[l] | ((lo >> 4) << (2 * p)) | ((hi >> 4) << (2 * p + 1)));
                y[i].qs[32 * p + l] = uint8_t((lo & 0xF) | ((hi & 0xF) << 4));
            }
        }
    }
}

void quantize_q6_K(const float* x, block_q6_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        int8_t L[kQK];
        float scales[kQK / 16];
        float max_scale = 0;
        float max_abs = 0;
        for (int s = 0; s < kQK / 16; ++s) {
            scales[s] = fit_symmetric(16, 32, x + 16 * s, L + 16 * s);
            const float a = std::fabs(scales[s]);
            if (a > max_abs) {
                max_abs = a;
                max_scale = scales[s];
            }
        }
        block_q6_K& b = y[i];
        if (max_abs < kGroupMaxEps) {
            std::memset(&b, 0, sizeof b);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        b.d = fp32_to_fp16(1 / iscale);
        for (int s = 0; s < kQK / 16; ++s) {
            const int r = nearest(iscale * scales[s]);
            b.scales[s] = int8_t(r < 127 ? r : 127);
        }
        for (int s = 0; s < kQK / 16; ++s) {
            const float d = half_value(b.d) * float(b.scales[s]);
            if (!(d != 0)) continue;
            for (int l = 0; l < 16; ++l) {
                L[16 * s + l] = int8_t(clamp_int(nearest(x[16 * s + l] / d), -32, 31) + 32);
            }
        }
        for (int h = 0; h < kQK / 128; ++h) {
            const int8_t* p = L + 128 * h;
            for (int l = 0; l < 32; ++l) {
                const int c0 = p[l], c1 = p[l + 32], c2 = p[l + 64], c3 = p[l + 96];
                b.ql[64 * h + l] = uint8_t((c0 & 0xF) | ((c2 & 0xF) << 4));
                b.ql[64 * h + l + 32] = uint8_t((c1 & 0xF) | ((c3 & 0xF) << 4));
                b.qh[32 * h + l] = uint8_t((c0 >> 4) | ((c1 >> 4) << 2) | ((c2 >> 4) << 4) | ((c3 >> 4) << 6));
            }
        }
    }
}

void quantize_q8_K(const float* x, block_q8_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        float amax;
        const float vmax = signed_absmax(kQK, x, &amax);
        block_q8_K& b = y[i];
        if (!(amax != 0)) {
            std::memset(&b, 0, sizeof b);
            continue;
        }
        const float iscale = -127.0f / vmax;
        for (int j = 0; j < kQK; ++j) {
            const int v = nearest(iscale * x[j]);
            b.qs[j] = int8_t(v < 127 ? v : 127);
        }
        for (int s = 0; s < kQK / 16; ++s) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += b.qs[16 * s + l];
            b.bsums[s] = int16_t(sum);
        }
        b.d = 1 / iscale;
    }
}

// ---- dequantizing (ggml's expressions: the scale products first, then times the code)

void dequantize_q2_K(const block_q2_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = half_value(x[i].d);
        const float dmin = half_value(x[i].dmin);
        for (int e = 0; e < kQK; ++e) {
            const int h = e / 128, c = (e / 32) % 4, l = e % 32;
            const uint8_t sc = x[i].scales[e / 16];
            const int q = (x[i].qs[32 * h + l] >> (2 * c)) & 3;
            *y++ = d * float(sc & 0xF) * float(q) - dmin * float(sc >> 4);
        }
    }
}

void dequantize_q3_K(const block_q3_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = half_value(x[i].d);
        float dl[kQK / 16];
        for (int s = 0; s < kQK / 16; ++s) dl[s] = d * float(mb_qb_k3_scale(s, x[i].scales) - 32);
        for (int e = 0; e < kQK; ++e) {
            const int h = e / 128, c = (e / 32) % 4, l = e % 32;
            const int q = (x[i].qs[32 * h + l] >> (2 * c)) & 3;
            const int high = (x[i].hmask[l] >> (4 * h + c)) & 1;
            *y++ = dl[e / 16] * float(q - (high ? 0 : 4));
        }
    }
}

template <class Block, bool kFifth>
void dequantize_k4(const Block* x, float* y, int64_t nb, const uint8_t* (*qh_of)(const Block&)) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = half_value(x[i].d);
        const float dmin = half_value(x[i].dmin);
        const uint8_t* qh = kFifth ? qh_of(x[i]) : nullptr;
        for (int j = 0; j < kQK / 32; ++j) {
            uint8_t sc;
            uint8_t mn;
            mb_qb_k4_scale_min(j, x[i].scales, &sc, &mn);
            const float d1 = d * float(sc);
            const float m1 = dmin * float(mn);
            const int p = j / 2;
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; ++l) {
                int q = (x[i].qs[32 * p + l] >> shift) & 0xF;
                if (kFifth) q |= ((qh[l] >> j) & 1) << 4;
                *y++ = d1 * float(q) - m1;
            }
        }
    }
}

const uint8_t* q5_K_qh(const block_q5_K& b) { return b.qh; }

void dequantize_q4_K(const block_q4_K* x, float* y, int64_t nb) { dequantize_k4<block_q4_K, false>(x, y, nb, nullptr); }

void dequantize_q5_K(const block_q5_K* x, float* y, int64_t nb) { dequantize_k4<block_q5_K, true>(x, y, nb, q5_K_qh); }

void dequantize_q6_K(const block_q6_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = half_value(x[i].d);
        for (int e = 0; e < kQK; ++e) {
            const int h = e / 128, c = (e / 32) % 4, l = e % 32;
            const uint8_t lo = x[i].ql[64 * h + l + 32 * (c & 1)];
            const int low4 = c < 2 ? (lo & 0xF) : (lo >> 4);
            const int q = low4 | (((x[i].qh[32 * h + l] >> (2 * c)) & 3) << 4);
            *y++ = d * float(x[i].scales[e / 16]) * float(q - 32);
        }
    }
}

void dequantize_q8_K(const block_q8_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        for (int j = 0; j < kQK; ++j) *y++ = x[i].d * float(x[i].qs[j]);
    }
}

}  // namespace mb
