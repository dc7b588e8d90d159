// CONV_2D (ggml_conv_2d_direct) and CONV_2D_DW (ggml_conv_2d_dw_direct), no im2col tensor.
// kernel [KW, KH, IC, OC] (DW: [KW, KH, 1, C]) f32 or f16, data f32 [W, H, IC, N] with any strides,
// dst f32 [OW, OH, OC, N] contiguous. params i[0..5] = s0, s1, p0, p1, d0, d1.
//
// CONV_2D is the f32 GEMM of MUL_MAT (gemm_f32.h: C[i][j] = sum_k B[i][k] W[j][k]) with i = output
// channel (the kernel's rows, k = (ic, ky, kx)) and j = output pixel, whose "weight rows" are the
// input patches, packed straight from the data into panels (implicit im2col: a block of kPix pixels
// at a time, never the whole im2col matrix). A panel's k step is 16 consecutive output pixels; split
// at output-row ends into runs ("segments", worked out once per block), each run reads one input row
// at consecutive columns (stride 1: one copy, zeros where it hangs over the padding). The kernel rows
// are packed once per node by all threads together (a barrier), then a work item is (image, block of
// pixels).
//
// Unit strides on AVX2 / AVX-512 (conv_2d_implicit_fits): conv_2d_implicit.cpp, an implicit GEMM over
// a zero-padded copy of each image, no panels. CONV_2D_DW: conv_2d_dw.cpp.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/kernels/conv_2d_dw.h"
#include "cpu/kernels/conv_2d_implicit.h"
#include "cpu/kernels/gemm_f32.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/checked_scratch.h"

namespace mb {

namespace {

constexpr int64_t kKc = 256;               // k block
constexpr int64_t kPix = 8 * kGemmNR;      // output pixels per work item (panels packed together)
constexpr int64_t kOcRows = 16 * kGemmMR;  // output channels per GEMM call
static_assert(kOcRows % kGemmMR == 0, "channel blocks are whole token groups");

// One run of a panel's pixels on one output row: panel entries [r0, r0 + len) are output pixels
// (oy, ox .. ox + len - 1). A run with oy = kNoRow is past the last pixel (zeros).
struct Segment {
    int64_t panel, r0, len, oy, ox;
};
constexpr int64_t kNoRow = INT64_MIN / 4;
constexpr int64_t kMaxSegments = kPix + kPix / kGemmNR;  // a run per pixel at worst, plus the tail

// The k block for K: at most kKc, the blocks of one size (a multiple of 8) but the last, so that no
// short last block (576 = 256 + 256 + 64) pays a block's output traffic for a fraction of its work.
int64_t k_block(int64_t K) {
    const int64_t n = (K + kKc - 1) / kKc;
    return std::min(kKc, round_up((K + n - 1) / n, 8));
}

// One thread's part: the panels of a k block, then the segments of its current block.
constexpr size_t kThreadBytes =
    size_t(kKc * kPix) * sizeof(float) + size_t(round_up(int64_t(kMaxSegments * sizeof(Segment)), 64));

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
    return load_f32_or_f16(w.type, p);
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

// The packed kernel rows: for the k block at k0 (of kc), ceil(OC / MR) token groups of kc * MR floats
// at k0 * groups * MR.
size_t packed_kernel_floats(const Tensor& dst) {
    const Tensor& w = *dst.src[0];
    return size_t(round_up(w.ne[3], kGemmMR) * w.ne[0] * w.ne[1] * w.ne[2]);
}

size_t gemm_scratch_bytes(const Tensor& dst, int nth) {
    return round_up(int64_t(packed_kernel_floats(dst) * sizeof(float)), 64) + size_t(nth) * kThreadBytes;
}

// Token groups u0 .. u1 of the packed kernel (u = k block index * groups + group), k blocks of kb.
void pack_kernel(const Tensor& w, int64_t K, int64_t kb, int64_t u0, int64_t u1, float* packed) {
    const int64_t KW = w.ne[0], KH = w.ne[1], OC = w.ne[3];
    const int64_t groups = (OC + kGemmMR - 1) / kGemmMR;
    const bool rows = w.type == Type::F32 && w.is_contiguous();
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t k0 = (u / groups) * kb, kc = std::min(kb, K - k0), oc0 = (u % groups) * kGemmMR;
        const int64_t m = std::min<int64_t>(kGemmMR, OC - oc0);
        float* out = packed + k0 * groups * kGemmMR + (u % groups) * kc * kGemmMR;
        if (rows) {
            gemm_pack_tokens(reinterpret_cast<const float*>(host_data(w)) + oc0 * K + k0, K, m, kc, out);
            continue;
        }
        for (int64_t k = 0; k < kc; ++k) {
            const int64_t kk = k0 + k;
            for (int64_t r = 0; r < kGemmMR; ++r) {
                out[k * kGemmMR + r] = r < m ? kernel_at(w, kk % KW, (kk / KW) % KH, kk / (KW * KH), oc0 + r) : 0.0f;
            }
        }
    }
}

// The runs of pixels px0 .. px0 + npx (then the last panel's tail) into seg; returns their count.
int64_t segments(int64_t px0, int64_t npx, int64_t OW, Segment* seg) {
    int64_t n = 0;
    for (int64_t q = 0; q < npx;) {
        const int64_t px = px0 + q, oy = px / OW, ox = px % OW;
        const int64_t r0 = q % kGemmNR;
        const int64_t len = std::min({OW - ox, kGemmNR - r0, npx - q});
        seg[n++] = {q / kGemmNR, r0, len, oy, ox};
        q += len;
    }
    if (npx % kGemmNR != 0) seg[n++] = {npx / kGemmNR, npx % kGemmNR, kGemmNR - npx % kGemmNR, kNoRow, 0};
    return n;
}

// Panel rows k0 .. k0 + kc of the block's segments: panel[k * NR + r] = the input under output pixel
// (segment) at k = (ic, ky, kx), zeros in the padding. The k steps go in runs of one (ic, ky), whose
// taps kx read one input row per segment.
void pack_patches(const Tensor& x, const uint8_t* xn, const Geometry& g, int64_t KW, int64_t KH, int64_t k0,
                  int64_t kc, const Segment* seg, int64_t n_seg, float* panels) {
    const int64_t IW = x.ne[0], IH = x.ne[1];
    const bool unit = g.s0 == 1 && x.nb[0] == sizeof(float);
    const int64_t panel_stride = kc * kGemmNR;
    // the bytes a copy may read (x's own), for a run over the padding read whole and then zeroed
    const uintptr_t x_lo = reinterpret_cast<uintptr_t>(host_data(x)), x_hi = x_lo + x.nbytes();
    for (int64_t k = 0; k < kc;) {
        const int64_t kk = k0 + k, kx0 = kk % KW, ky = (kk / KW) % KH, ic = kk / (KW * KH);
        const int64_t run = std::min(KW - kx0, kc - k);  // k steps k .. k + run: taps kx0 .. kx0 + run
        const uint8_t* plane = xn + size_t(ic) * x.nb[2];
        for (int64_t s = 0; s < n_seg; ++s) {
            const Segment& sg = seg[s];
            float* out = panels + sg.panel * panel_stride + k * kGemmNR + sg.r0;
            const int64_t iy = sg.oy == kNoRow ? -1 : sg.oy * g.s1 - g.p1 + ky * g.d1;
            if (iy < 0 || iy >= IH) {
                for (int64_t t = 0; t < run; ++t) std::memset(out + t * kGemmNR, 0, size_t(sg.len) * sizeof(float));
                continue;
            }
            const uint8_t* row = plane + size_t(iy) * x.nb[1];
            const int64_t ixb = sg.ox * g.s0 - g.p0;  // input column of the run's first pixel at kx = 0
            // A whole panel row for every tap of the run inside the input row: one fixed-size copy each.
            const int64_t ix_first = ixb + kx0 * g.d0, ix_last = ixb + (kx0 + run - 1) * g.d0;
            if (unit && sg.len == kGemmNR && ix_first >= 0 && ix_last + kGemmNR <= IW) {
                const float* in = reinterpret_cast<const float*>(row) + ix_first;
                for (int64_t t = 0; t < run; ++t) {
                    std::memcpy(out + t * kGemmNR, in + t * g.d0, kGemmNR * sizeof(float));
                }
                continue;
            }
            for (int64_t t = 0; t < run; ++t, out += kGemmNR) {
                const int64_t ix0 = ixb + (kx0 + t) * g.d0;
                if (unit) {
                    const float* in = reinterpret_cast<const float*>(row);
                    const int64_t lo = std::min(sg.len, std::max<int64_t>(0, -ix0));
                    const int64_t hi = std::max(lo, std::min(sg.len, IW - ix0));
                    if (sg.len == kGemmNR) {
                        if (lo == 0 && hi == kGemmNR) {
                            std::memcpy(out, in + ix0, kGemmNR * sizeof(float));
                            continue;
                        }
                        // A whole panel row hanging over the padding: one copy from inside the
                        // tensor's bytes, then zeros over the lanes outside the row.
                        const uintptr_t src = reinterpret_cast<uintptr_t>(row) + uintptr_t(ix0) * sizeof(float);
                        if (src >= x_lo && src + kGemmNR * sizeof(float) <= x_hi) {
                            std::memcpy(out, reinterpret_cast<const void*>(src), kGemmNR * sizeof(float));
                            for (int64_t r = 0; r < lo; ++r) out[r] = 0.0f;
                            for (int64_t r = hi; r < kGemmNR; ++r) out[r] = 0.0f;
                            continue;
                        }
                    }
                    for (int64_t r = 0; r < lo; ++r) out[r] = 0.0f;
                    for (int64_t r = lo; r < hi; ++r) out[r] = in[ix0 + r];
                    for (int64_t r = hi; r < sg.len; ++r) out[r] = 0.0f;
                    continue;
                }
                for (int64_t r = 0; r < sg.len; ++r) {
                    const int64_t ix = ix0 + r * g.s0;
                    float v = 0.0f;
                    if (ix >= 0 && ix < IW) std::memcpy(&v, row + size_t(ix) * x.nb[0], sizeof v);
                    out[r] = v;
                }
            }
        }
        k += run;
    }
}

void conv_2d_gemm(const ComputeParams& p, Tensor& dst) {
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const Geometry g = geometry(dst);
    const int64_t KW = w.ne[0], KH = w.ne[1], IC = w.ne[2], OC = w.ne[3];
    const int64_t OW = dst.ne[0], OH = dst.ne[1], P = OW * OH, K = IC * KH * KW;
    const int64_t blocks = (P + kPix - 1) / kPix;
    const int64_t items = blocks * dst.ne[3];
    if (K == 0) {
        for (int64_t it = p.ith; it < items; it += p.nth) {
            const int64_t n = it / blocks, px0 = (it % blocks) * kPix, npx = std::min(kPix, P - px0);
            float* c = reinterpret_cast<float*>(host_data(dst) + size_t(n) * dst.nb[3]);
            for (int64_t oc = 0; oc < OC; ++oc) std::fill(c + oc * P + px0, c + oc * P + px0 + npx, 0.0f);
        }
        return;
    }
    float* packed = checked_scratch(p, gemm_scratch_bytes(dst, p.nth), "CONV_2D");
    const size_t kernel_bytes = size_t(round_up(int64_t(packed_kernel_floats(dst) * sizeof(float)), 64));
    uint8_t* mine = reinterpret_cast<uint8_t*>(packed) + kernel_bytes + size_t(p.ith) * kThreadBytes;
    float* panels = reinterpret_cast<float*>(mine);
    Segment* seg = reinterpret_cast<Segment*>(mine + size_t(kKc * kPix) * sizeof(float));
    const int64_t groups = (OC + kGemmMR - 1) / kGemmMR;
    int64_t u0, u1;
    const int64_t kb = k_block(K);
    split_range(groups * ((K + kb - 1) / kb), p.ith, p.nth, &u0, &u1);
    pack_kernel(w, K, kb, u0, u1, packed);
    p.barrier();  // the packed kernel is complete
    for (int64_t it = p.ith; it < items; it += p.nth) {
        const int64_t n = it / blocks, px0 = (it % blocks) * kPix, npx = std::min(kPix, P - px0);
        float* c = reinterpret_cast<float*>(host_data(dst) + size_t(n) * dst.nb[3]);
        const int64_t n_seg = segments(px0, npx, OW, seg);
        const uint8_t* xn = host_data(x) + size_t(n) * x.nb[3];
        for (int64_t k0 = 0; k0 < K; k0 += kb) {
            const int64_t kc = std::min(kb, K - k0);
            pack_patches(x, xn, g, KW, KH, k0, kc, seg, n_seg, panels);
            const float* tokens = packed + k0 * groups * kGemmMR;
            for (int64_t oc0 = 0; oc0 < OC; oc0 += kOcRows) {
                const int64_t m = std::min(kOcRows, OC - oc0);
                gemm_f32_block(kc, panels, npx, tokens + (oc0 / kGemmMR) * kc * kGemmMR, m, c + oc0 * P + px0, P,
                               k0 > 0);
            }
        }
    }
}

}  // namespace

bool conv_2d_supported(const Tensor& dst) {
    return (dst.op == Op::CONV_2D || dst.op == Op::CONV_2D_DW) && shapes_ok(dst);
}

// The larger of the two paths' needs: which one runs is chosen at compute time, under the
// instruction-set cap then in force.
size_t conv_2d_work_size(const Tensor& dst, int nth) {
    if (dst.op != Op::CONV_2D) return 0;
    const size_t implicit = conv_2d_implicit_fits(dst) ? conv_2d_implicit_scratch_bytes(dst, nth) : 0;
    return scratch_bytes_aligned(std::max(gemm_scratch_bytes(dst, nth), implicit));
}

void compute_conv_2d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    if (dst.op == Op::CONV_2D && conv_2d_implicit_fits(dst) && conv_2d_implicit_available()) {
        conv_2d_implicit(p, dst);
    } else if (dst.op == Op::CONV_2D) {
        conv_2d_gemm(p, dst);
    } else {
        conv_2d_dw(p, dst);
    }
}

}  // namespace mb
