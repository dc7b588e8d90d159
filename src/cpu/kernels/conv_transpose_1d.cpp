// CONV_TRANSPOSE_1D: kernel [K, OC, IC] (f32 or f16), data f32 [L, IC, N] -> f32 [OL, OC, N] with
// out[n][oc][l*s0 + k*d0 - p0] += data[n][ic][l] * kernel[ic][oc][k]. params i[0..2] = s0, p0, d0.
//
// As a GEMM then a scatter (col2im): cols[l][j] = sum_ic data[n][ic][l] * kernel[ic][j] for the
// OC*K columns j = oc*K + k, through the register-tiled f32 engine (gemm_f32.h), then each cols[l][j]
// is added at out[n][oc][l*s0 + k*d0 - p0]. Threads take whole output channels (their columns), so
// the scatters of two threads never meet; each packs its own columns of the kernel once, and the
// data tokens (every input channel) per block of kLB positions. The columns go kJB at a time, so a
// block's cols (kLB x kJB) stay in L2 and are scattered in the order they were written: by position,
// then column, each output channel's K taps landing on consecutive outputs.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/errors.h"
#include "core/fp16.h"
#include "cpu/kernels/gemm_f32.h"
#include "cpu/kernels/kernels.h"

namespace mb {

namespace {

constexpr int64_t kLB = 96;   // data positions per GEMM block (16 token groups of kGemmMR)
constexpr int64_t kKC = 256;  // input channels per GEMM k block
constexpr int64_t kJB = 256;  // kernel columns per GEMM column block (a multiple of kGemmNR)
static_assert(kJB % kGemmNR == 0, "column blocks are whole panels");

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Output channels of thread ith.
void channel_range(int64_t oc, int ith, int nth, int64_t* o0, int64_t* o1) { split_range(oc, ith, nth, o0, o1); }

// Floats of one thread's scratch for up to `noc` output channels.
struct Scratch {
    int64_t panels, tokens, cols;
};

Scratch scratch_floats(const Tensor& dst, int64_t noc) {
    const Tensor& kern = *dst.src[0];
    const int64_t K = kern.ne[0], IC = kern.ne[2];
    const int64_t nj = noc * K;
    Scratch s{};
    s.panels = round_up(nj, kGemmNR) * IC;                 // every k block's panels, consecutive
    s.tokens = round_up(kLB, kGemmMR) * IC;  // every k block of packed tokens of one position block
    s.cols = kLB * std::min(nj, kJB);
    return s;
}

int64_t max_channels(const Tensor& dst, int nth) { return (dst.src[0]->ne[1] + nth - 1) / nth; }

size_t thread_bytes(const Tensor& dst, int nth) {
    const Scratch s = scratch_floats(dst, max_channels(dst, nth));
    return size_t(round_up(s.panels + s.tokens + s.cols, 16)) * sizeof(float);
}

float load_kernel(const Tensor& kern, const uint8_t* p) {
    if (kern.type == Type::F16) return fp16_to_fp32(*reinterpret_cast<const uint16_t*>(p));
    return *reinterpret_cast<const float*>(p);
}

}  // namespace

bool conv_transpose_1d_supported(const Tensor& dst) {
    const Tensor* k = dst.src[0];
    const Tensor* x = dst.src[1];
    return dst.op == Op::CONV_TRANSPOSE_1D && k && x && (k->type == Type::F32 || k->type == Type::F16) &&
           x->type == Type::F32 && dst.type == Type::F32;
}

size_t conv_transpose_1d_work_size(const Tensor& dst, int nth) {
    return size_t(nth) * thread_bytes(dst, nth) + 64;
}

void compute_conv_transpose_1d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& kern = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const int64_t s0 = dst.op_params[0], p0 = dst.op_params[1], d0 = dst.op_params[2];
    const int64_t K = kern.ne[0], OC = kern.ne[1], IC = kern.ne[2], L = x.ne[0], OL = dst.ne[0], N = dst.ne[2];
    int64_t o0, o1;
    channel_range(OC, p.ith, p.nth, &o0, &o1);
    if (o1 <= o0) return;
    const size_t per_thread = thread_bytes(dst, p.nth);
    if (!p.wdata || p.wsize < size_t(p.nth) * per_thread) {
        fail<InvalidArgumentError>("CONV_TRANSPOSE_1D", "scratch of ", p.wsize, " bytes is smaller than the ",
                                   size_t(p.nth) * per_thread, " it needs");
    }
    uint8_t* base = p.wdata + (64 - reinterpret_cast<uintptr_t>(p.wdata) % 64) % 64;
    float* panels = reinterpret_cast<float*>(base + size_t(p.ith) * per_thread);
    const Scratch sz = scratch_floats(dst, max_channels(dst, p.nth));
    float* tokens = panels + sz.panels;
    float* cols = tokens + sz.tokens;
    const int64_t nj = (o1 - o0) * K;
    const int64_t n_panels = (nj + kGemmNR - 1) / kGemmNR;

    // This thread's kernel columns j = (oc - o0)*K + k over ic, packed per k block: block kb holds
    // n_panels panels of kc x kGemmNR at panels + kb0 * n_panels * kGemmNR.
    for (int64_t kb0 = 0; kb0 < IC; kb0 += kKC) {
        const int64_t kc = std::min(kKC, IC - kb0);
        float* blk = panels + kb0 * n_panels * kGemmNR;
        std::memset(blk, 0, size_t(n_panels * kGemmNR * kc) * sizeof(float));
        // Input channel outer: the kernel is read along its rows (k, then oc), not 4*OC*K bytes apart.
        for (int64_t ic = 0; ic < kc; ++ic) {
            int64_t j = 0;
            for (int64_t oc = o0; oc < o1; ++oc) {
                for (int64_t k = 0; k < K; ++k, ++j) {
                    blk[(j / kGemmNR) * kc * kGemmNR + ic * kGemmNR + j % kGemmNR] =
                        load_kernel(kern, at(kern, k, oc, kb0 + ic));
                }
            }
        }
    }

    for (int64_t n = 0; n < N; ++n) {
        for (int64_t oc = o0; oc < o1; ++oc) {
            float* out = reinterpret_cast<float*>(at(dst, 0, oc, n));
            for (int64_t ol = 0; ol < OL; ++ol) out[ol * int64_t(dst.nb[0] / sizeof(float))] = 0.0f;
        }
        for (int64_t l0 = 0; l0 < L; l0 += kLB) {
            const int64_t m = std::min(kLB, L - l0);
            const int64_t groups = (m + kGemmMR - 1) / kGemmMR;
            // Per k block kb0: tokens + kb0 * groups * MR holds g*kc*MR + ic*MR + r = data[n][kb0 + ic][l0 +
            // g*MR + r], zeros past m.
            for (int64_t kb0 = 0; kb0 < IC; kb0 += kKC) {
                const int64_t kc = std::min(kKC, IC - kb0);
                float* tk = tokens + kb0 * groups * kGemmMR;
                for (int64_t ic = 0; ic < kc; ++ic) {
                    const uint8_t* xr = at(x, 0, kb0 + ic, n);
                    for (int64_t g = 0; g < groups; ++g) {
                        float* dstp = tk + g * kc * kGemmMR + ic * kGemmMR;
                        for (int64_t r = 0; r < kGemmMR; ++r) {
                            const int64_t l = g * kGemmMR + r;
                            dstp[r] = l < m ? *reinterpret_cast<const float*>(xr + (l0 + l) * x.nb[0]) : 0.0f;
                        }
                    }
                }
            }
            for (int64_t jb0 = 0; jb0 < nj; jb0 += kJB) {
                const int64_t njb = std::min(kJB, nj - jb0);
                for (int64_t kb0 = 0; kb0 < IC; kb0 += kKC) {
                    const int64_t kc = std::min(kKC, IC - kb0);
                    const float* pan = panels + kb0 * n_panels * kGemmNR + (jb0 / kGemmNR) * kc * kGemmNR;
                    gemm_f32_block(kc, pan, njb, tokens + kb0 * groups * kGemmMR, m, cols, njb, kb0 > 0);
                }
                // Scatter: cols[l][j - jb0] -> out[n][o0 + j / K][(l0 + l)*s0 + (j % K)*d0 - p0].
                const int64_t step = int64_t(dst.nb[0] / sizeof(float));
                for (int64_t l = 0; l < m; ++l) {
                    const float* cl = cols + l * njb;
                    const int64_t base_ol = (l0 + l) * s0 - p0;
                    int64_t oc = o0 + jb0 / K, k = jb0 % K;
                    for (int64_t jj = 0; jj < njb;) {
                        float* out = reinterpret_cast<float*>(at(dst, 0, oc, n));
                        const int64_t taps = std::min(K - k, njb - jj);
                        for (int64_t t = 0; t < taps; ++t) {
                            const int64_t ol = base_ol + (k + t) * d0;
                            if (ol >= 0 && ol < OL) out[ol * step] += cl[jj + t];
                        }
                        jj += taps;
                        k = 0;
                        ++oc;
                    }
                }
            }
        }
    }
}

}  // namespace mb
