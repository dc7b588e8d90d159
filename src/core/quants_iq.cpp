// ggml's iq4_nl / iq4_xs / mxfp4 quantizers, step for step (every f32 operation separately rounded,
// in the reference's order; contraction off before any include). iq4_nl and iq4_xs fit, per 32
// values, the scale that best maps them onto the 16 table values in weighted least squares (weights
// x^2), trying 15 candidate scales around the largest value; iq4_xs then stores 6-bit sub-block scales
// against one half super-block scale and requantizes with them. mxfp4 takes a power-of-two scale from
// the largest magnitude and the nearest table value per element.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "core/quants_iq.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"

namespace mb {

namespace {

constexpr float kGroupMaxEps = 1e-15f;
constexpr int kTries = 7;  // ggml_quantize_chunk's search width for both iq4 types

// ggml's nearest_int (see quants_k.cpp): bit for bit for every input.
inline int nearest(float v) {
    const float t = v + 12582912.0f;
    uint32_t u;
    std::memcpy(&u, &t, sizeof u);
    return int(u & 0x007FFFFFu) - 0x00400000;
}

// The table index for x: the ends below/above the table, else the nearer neighbour by bisection
// (the upper one on a tie; a NaN ends at the top).
inline int nearest_value(const int8_t* val, float x) {
    if (x <= float(val[0])) return 0;
    if (x >= float(val[15])) return 15;
    int lo = 0;
    int hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < float(val[mid])) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return x - float(val[hi - 1]) < float(val[hi]) - x ? hi - 1 : hi;
}

// The fitted scale of 32 values (0 for an all-zero group; L is then left as it was) and their codes.
float fit_iq4(const float* x, uint8_t* L) {
    const int8_t* values = mb_kvalues_iq4nl;
    float weight[32];
    for (int j = 0; j < 32; ++j) weight[j] = x[j] * x[j];
    float amax = 0;
    float vmax = 0;
    for (int j = 0; j < 32; ++j) {
        const float a = std::fabs(x[j]);
        if (a > amax) {
            amax = a;
            vmax = x[j];
        }
    }
    if (amax < kGroupMaxEps) return 0.0f;
    float d = -vmax / float(values[0]);
    float id = 1 / d;
    float sumqx = 0;
    float sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        const int l = nearest_value(values, id * x[j]);
        L[j] = uint8_t(l);
        const float q = float(values[l]);
        sumqx += weight[j] * q * x[j];
        sumq2 += weight[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int t = -kTries; t <= kTries; ++t) {
        id = float(t + values[0]) / vmax;
        sumqx = 0;
        sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            const float q = float(values[nearest_value(values, id * x[j])]);
            sumqx += weight[j] * q * x[j];
            sumq2 += weight[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

void pack_nibbles(const uint8_t* L, uint8_t* qs) {
    for (int j = 0; j < 16; ++j) qs[j] = uint8_t(L[j] | (L[j + 16] << 4));
}

}  // namespace

void quantize_iq4_nl(const float* x, block_iq4_nl* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += MB_QK) {
        uint8_t L[32] = {};
        const float d = fit_iq4(x, L);
        y[i].d = fp32_to_fp16(d);
        const float id = d != 0 ? 1 / d : 0;
        for (int j = 0; j < 32; ++j) L[j] = uint8_t(nearest_value(mb_kvalues_iq4nl, id * x[j]));
        pack_nibbles(L, y[i].qs);
    }
}

void quantize_iq4_xs(const float* x, block_iq4_xs* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += MB_QK_K) {
        uint8_t L[MB_QK_K] = {};
        float scales[MB_QK_K / 32];
        float max_scale = 0;
        float amax_scale = 0;
        for (int b = 0; b < MB_QK_K / 32; ++b) {
            scales[b] = fit_iq4(x + 32 * b, L + 32 * b);
            const float a = std::fabs(scales[b]);
            if (a > amax_scale) {
                amax_scale = a;
                max_scale = scales[b];
            }
        }
        block_iq4_xs& blk = y[i];
        const float d = -max_scale / 32;
        blk.d = fp32_to_fp16(d);
        blk.scales_h = 0;
        const float id = d != 0 ? 1 / d : 0.0f;
        for (int b = 0; b < MB_QK_K / 32; ++b) {
            int l = nearest(id * scales[b]);
            l = l < -32 ? -32 : (l > 31 ? 31 : l);
            const float dl = d * float(l);
            const float idl = dl != 0 ? 1 / dl : 0.0f;
            for (int j = 0; j < 32; ++j) L[32 * b + j] = uint8_t(nearest_value(mb_kvalues_iq4nl, idl * x[32 * b + j]));
            l += 32;
            if (b % 2 == 0) {
                blk.scales_l[b / 2] = uint8_t(l & 0xF);
            } else {
                blk.scales_l[b / 2] = uint8_t(blk.scales_l[b / 2] | ((l & 0xF) << 4));
            }
            blk.scales_h = uint16_t(blk.scales_h | ((l >> 4) << (2 * b)));
        }
        for (int b = 0; b < MB_QK_K / 32; ++b) pack_nibbles(L + 32 * b, blk.qs + 16 * b);
    }
}

void quantize_mxfp4(const float* x, block_mxfp4* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += MB_QK) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) {
            if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
        }
        uint8_t e = 0;
        if (amax > 0) {
            // ggml converts this float to uint8_t directly; x86 goes through a 32-bit conversion
            // (INT_MIN when out of range, as for an infinite amax) and keeps the low byte.
            const float v = std::floor(std::log2(amax)) - 2 + 127;
            const int32_t w = (v > -2147483648.0f && v < 2147483648.0f) ? int32_t(v) : INT32_MIN;
            e = uint8_t(uint32_t(w));
        }
        y[i].e = e;
        const float d = mb_qb_e8m0_half(e);
        for (int j = 0; j < 16; ++j) {
            uint8_t q[2];
            for (int h = 0; h < 2; ++h) {
                const float v = x[j + 16 * h];
                int best = 0;
                float best_err = std::fabs(float(mb_kvalues_mxfp4[0]) * d - v);
                for (int c = 1; c < 16; ++c) {
                    const float err = std::fabs(float(mb_kvalues_mxfp4[c]) * d - v);
                    if (err < best_err) {
                        best = c;
                        best_err = err;
                    }
                }
                q[h] = uint8_t(best);
            }
            y[i].qs[j] = uint8_t(q[0] | (q[1] << 4));
        }
    }
}

void dequantize_iq4_nl(const block_iq4_nl* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += MB_QK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < 16; ++j) {
            y[j] = d * float(mb_kvalues_iq4nl[x[i].qs[j] & 0xF]);
            y[j + 16] = d * float(mb_kvalues_iq4nl[x[i].qs[j] >> 4]);
        }
    }
}

void dequantize_iq4_xs(const block_iq4_xs* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int b = 0; b < MB_QK_K / 32; ++b, y += 32) {
            const float dl = d * float(mb_qb_iq4xs_scale(b, x[i].scales_h, x[i].scales_l) - 32);
            const uint8_t* qs = x[i].qs + 16 * b;
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * float(mb_kvalues_iq4nl[qs[j] & 0xF]);
                y[j + 16] = dl * float(mb_kvalues_iq4nl[qs[j] >> 4]);
            }
        }
    }
}

void dequantize_mxfp4(const block_mxfp4* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += MB_QK) {
        const float d = mb_qb_e8m0_half(x[i].e);
        for (int j = 0; j < 16; ++j) {
            y[j] = float(mb_kvalues_mxfp4[x[i].qs[j] & 0xF]) * d;
            y[j + 16] = float(mb_kvalues_mxfp4[x[i].qs[j] >> 4]) * d;
        }
    }
}

}  // namespace mb
