// CONV_2D (ggml_conv_2d_direct) and CONV_2D_DW (ggml_conv_2d_dw_direct), no im2col tensor.
// kernel [KW, KH, IC, OC] (DW: [KW, KH, 1, C]) f32 or f16, data f32 [W, H, IC, N] with any strides,
// dst f32 [OW, OH, OC, N] contiguous. params i[0..5] = s0, s1, p0, p1, d0, d1.
//
// CONV_2D is the f32 GEMM of MUL_MAT (gemm_f32.h: C[i][j] = sum_k B[i][k] W[j][k]) with i = output
// channel (the kernel's rows, k = (ic, ky, kx)) and j = output pixel, whose "weight rows" are the
// input patches, packed straight from the data into panels (implicit im2col: a block of kPix pixels
// at a time, never the whole im2col matrix). A work item is (image, block of pixels); the kernel
// rows are packed per item and k block (1 / kPix of the item's work).
//
// CONV_2D_DW: each channel's plane convolved with its own KH x KW filter, an output row at a time:
// for each tap, the row's valid span accumulates w * the input row at the tap's offset.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "cpu/kernels/gemm_f32.h"
#include "cpu/kernels/kernels.h"

namespace mb {

namespace {

constexpr int64_t kKc = 256;               // k block
constexpr int64_t kPix = 8 * kGemmNR;      // output pixels per work item (panels packed together)
constexpr int64_t kOcRows = 16 * kGemmMR;  // output channels per GEMM call (tokens packed together)
// panels, tokens, then the kPix pixels' (row, column) origins as int64 pairs (4 floats each)
constexpr size_t kThreadFloats = size_t(kKc * kPix + kKc * kOcRows) + size_t(4 * kPix);

struct Geometry {
    int64_t s0, s1, p0, p1, d0, d1;
};

Geometry geometry(const Tensor& dst) {
    return {dst.op_params[0], dst.op_params[1], dst.op_params[2], dst.op_params[3], dst.op_params[4],
            dst.op_params[5]};
}

inline float kernel_at(const Tensor& w, int64_t kx, int64_t ky, int64_t ic, int64_t oc) {
    const uint8_t* p = host_data(w) + size_t(kx) * w.nb[0] + size_t(ky) * w.nb[1] + size_t(ic) * w.nb[2] +
                       size_t(oc) * w.nb[3];
    if (w.type == Type::F16) {
        uint16_t h;
        std::memcpy(&h, p, sizeof h);
        return fp16_to_fp32(h);
    }
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

bool shapes_ok(const Tensor& dst) {
    const Tensor* w = dst.src[0];
    const Tensor* x = dst.src[1];
    if (!w || !x || (w->type != Type::F32 && w->type != Type::F16) || x->type != Type::F32 || dst.type != Type::F32) {
        return false;
    }
    if (!dst.is_contiguous()) return false;
    const Geometry g = geometry(dst);
    if (g.s0 <= 0 || g.s1 <= 0 || g.d0 <= 0 || g.d1 <= 0 || g.p0 < 0 || g.p1 < 0) return false;
    const int64_t ow = (x->ne[0] + 2 * g.p0 - g.d0 * (w->ne[0] - 1) - 1) / g.s0 + 1;
    const int64_t oh = (x->ne[1] + 2 * g.p1 - g.d1 * (w->ne[1] - 1) - 1) / g.s1 + 1;
    if (dst.ne[0] != ow || dst.ne[1] != oh || dst.ne[3] != x->ne[3]) return false;
    if (dst.op == Op::CONV_2D) return w->ne[2] == x->ne[2] && dst.ne[2] == w->ne[3];
    return w->ne[2] == 1 && w->ne[3] == x->ne[2] && dst.ne[2] == x->ne[2];
}

void conv_2d_gemm(const ComputeParams& p, Tensor& dst) {
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const Geometry g = geometry(dst);
    const int64_t KW = w.ne[0], KH = w.ne[1], IC = w.ne[2], OC = w.ne[3];
    const int64_t OW = dst.ne[0], OH = dst.ne[1], P = OW * OH, K = IC * KH * KW;
    float* panels = reinterpret_cast<float*>(p.wdata) + size_t(p.ith) * kThreadFloats;
    float* tokens = panels + kKc * kPix;
    int64_t* base = reinterpret_cast<int64_t*>(tokens + kKc * kOcRows);  // by[r], bx[r]: kPix pairs
    static_assert(sizeof(int64_t) == 2 * sizeof(float), "two floats of scratch per int64");
    const bool w_packed = w.type == Type::F32 && w.is_contiguous();
    const int64_t blocks = (P + kPix - 1) / kPix;
    const int64_t items = blocks * dst.ne[3];
    for (int64_t it = p.ith; it < items; it += p.nth) {
        const int64_t n = it / blocks, px0 = (it % blocks) * kPix, npx = std::min(kPix, P - px0);
        float* c = reinterpret_cast<float*>(host_data(dst) + size_t(n) * dst.nb[3]);
        if (K == 0) {
            for (int64_t oc = 0; oc < OC; ++oc) std::fill(c + oc * P + px0, c + oc * P + px0 + npx, 0.0f);
            continue;
        }
        for (int64_t r = 0; r < npx; ++r) {
            const int64_t px = px0 + r;
            base[2 * r] = (px / OW) * g.s1 - g.p1;
            base[2 * r + 1] = (px % OW) * g.s0 - g.p0;
        }
        const uint8_t* xn = host_data(x) + size_t(n) * x.nb[3];
        for (int64_t k0 = 0; k0 < K; k0 += kKc) {
            const int64_t kc = std::min(kKc, K - k0);
            // Panels: panel[k * NR + r] = patch value of pixel px0 + 16 * panel + r at k0 + k.
            const int64_t groups = (npx + kGemmNR - 1) / kGemmNR;
            int64_t kx = k0 % KW, ky = (k0 / KW) % KH, ic = k0 / (KW * KH);
            for (int64_t k = 0; k < kc; ++k) {
                const uint8_t* plane = xn + size_t(ic) * x.nb[2];
                for (int64_t gi = 0; gi < groups; ++gi) {
                    float* dstk = panels + gi * kc * kGemmNR + k * kGemmNR;
                    for (int64_t r = 0; r < kGemmNR; ++r) {
                        const int64_t q = gi * kGemmNR + r;
                        float v = 0.0f;
                        if (q < npx) {
                            const int64_t iy = base[2 * q] + ky * g.d1, ix = base[2 * q + 1] + kx * g.d0;
                            if (iy >= 0 && iy < x.ne[1] && ix >= 0 && ix < x.ne[0]) {
                                std::memcpy(&v, plane + size_t(iy) * x.nb[1] + size_t(ix) * x.nb[0], sizeof v);
                            }
                        }
                        dstk[r] = v;
                    }
                }
                if (++kx == KW) {
                    kx = 0;
                    if (++ky == KH) {
                        ky = 0;
                        ++ic;
                    }
                }
            }
            for (int64_t oc0 = 0; oc0 < OC; oc0 += kOcRows) {
                const int64_t m = std::min(kOcRows, OC - oc0);
                if (w_packed) {
                    gemm_pack_tokens(reinterpret_cast<const float*>(host_data(w)) + oc0 * K + k0, K, m, kc, tokens);
                } else {
                    const int64_t tg = (m + kGemmMR - 1) / kGemmMR;
                    for (int64_t gi = 0; gi < tg; ++gi) {
                        for (int64_t k = 0; k < kc; ++k) {
                            const int64_t kk = k0 + k;
                            for (int64_t r = 0; r < kGemmMR; ++r) {
                                const int64_t oc = oc0 + gi * kGemmMR + r;
                                tokens[gi * kc * kGemmMR + k * kGemmMR + r] =
                                    oc < oc0 + m ? kernel_at(w, kk % KW, (kk / KW) % KH, kk / (KW * KH), oc) : 0.0f;
                            }
                        }
                    }
                }
                gemm_f32_block(kc, panels, npx, tokens, m, c + oc0 * P + px0, P, k0 > 0);
            }
        }
    }
}

void conv_2d_dw(const ComputeParams& p, Tensor& dst) {
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const Geometry g = geometry(dst);
    const int64_t KW = w.ne[0], KH = w.ne[1], OW = dst.ne[0], OH = dst.ne[1], C = dst.ne[2];
    const int64_t IW = x.ne[0], IH = x.ne[1];
    std::vector<float> taps(size_t(KW * KH));
    int64_t r0, r1;
    split_range(OH * C * dst.ne[3], p.ith, p.nth, &r0, &r1);
    int64_t loaded = -1;  // the channel whose taps are in `taps`
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t oy = r % OH, ch = (r / OH) % C, n = r / (OH * C);
        if (ch != loaded) {
            for (int64_t ky = 0; ky < KH; ++ky) {
                for (int64_t kx = 0; kx < KW; ++kx) taps[size_t(ky * KW + kx)] = kernel_at(w, kx, ky, 0, ch);
            }
            loaded = ch;
        }
        float* y = reinterpret_cast<float*>(host_data(dst) + size_t(oy) * dst.nb[1] + size_t(ch) * dst.nb[2] +
                                            size_t(n) * dst.nb[3]);
        std::fill(y, y + OW, 0.0f);
        const uint8_t* plane = host_data(x) + size_t(ch) * x.nb[2] + size_t(n) * x.nb[3];
        for (int64_t ky = 0; ky < KH; ++ky) {
            const int64_t iy = oy * g.s1 - g.p1 + ky * g.d1;
            if (iy < 0 || iy >= IH) continue;
            const uint8_t* row = plane + size_t(iy) * x.nb[1];
            for (int64_t kx = 0; kx < KW; ++kx) {
                const float t = taps[size_t(ky * KW + kx)];
                const int64_t off = kx * g.d0 - g.p0;  // ix = ox * s0 + off
                // ox with 0 <= ox * s0 + off < IW
                const int64_t lo = off >= 0 ? 0 : (-off + g.s0 - 1) / g.s0;
                const int64_t hi = IW - 1 - off < 0 ? -1 : std::min<int64_t>(OW - 1, (IW - 1 - off) / g.s0);
                if (x.nb[0] == sizeof(float) && g.s0 == 1) {
                    const float* xr = reinterpret_cast<const float*>(row);
                    for (int64_t ox = lo; ox <= hi; ++ox) y[ox] += t * xr[ox + off];
                } else {
                    for (int64_t ox = lo; ox <= hi; ++ox) {
                        float v;
                        std::memcpy(&v, row + size_t(ox * g.s0 + off) * x.nb[0], sizeof v);
                        y[ox] += t * v;
                    }
                }
            }
        }
    }
}

}  // namespace

bool conv_2d_supported(const Tensor& dst) {
    return (dst.op == Op::CONV_2D || dst.op == Op::CONV_2D_DW) && shapes_ok(dst);
}

size_t conv_2d_work_size(const Tensor& dst, int nth) {
    return dst.op == Op::CONV_2D ? size_t(nth) * kThreadFloats * sizeof(float) : 0;
}

void compute_conv_2d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    if (dst.op == Op::CONV_2D) {
        conv_2d_gemm(p, dst);
    } else {
        conv_2d_dw(p, dst);
    }
}

}  // namespace mb
