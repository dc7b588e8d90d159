// CONV_TRANSPOSE_2D (ggml_conv_transpose_2d_p0): kernel [KW, KH, OC, IC] f32 or f16, data f32
// [W, H, IC, N] with any strides -> f32 [(W - 1) s + KW, (H - 1) s + KH, OC, N] contiguous:
// dst[n][oc][iy*s + ky][ix*s + kx] += kernel[ic][oc][ky][kx] * data[n][ic][iy][ix]. params i[0] = s.
//
// As a GEMM then a scatter (col2im): cols[p][j] = sum_ic data[n][ic][p] * kernel[ic][j] for the input
// positions p = iy*W + ix and the OC*KH*KW columns j = (oc*KH + ky)*KW + kx, through the register-tiled
// f32 engine (gemm_f32.h); then each cols[p][j] is added at dst[n][oc][iy*s + ky][ix*s + kx]. Threads
// take whole output channels (their columns), so the scatters of two threads never meet; each packs
// its own columns of the kernel once (f16 converted there), and the data tokens (every input channel)
// per block of kPB positions. The columns go kJB at a time, so a block's cols (kPB x kJB) stay in L2
// and are scattered in the order they were written: by position, then column, each (oc, ky) row's KW
// taps landing on consecutive outputs (plain nested loops when the block holds whole channels).
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

constexpr int64_t kPB = 96;   // data positions per GEMM block (16 token groups of kGemmMR)
constexpr int64_t kKC = 256;  // input channels per GEMM k block
constexpr int64_t kJB = 256;  // kernel columns per GEMM column block (a multiple of kGemmNR)
static_assert(kJB % kGemmNR == 0, "column blocks are whole panels");
static_assert(kPB % kGemmMR == 0, "position blocks are whole token groups");

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Floats of one thread's scratch for up to `noc` output channels.
struct Scratch {
    int64_t panels, tokens, cols;
};

Scratch scratch_floats(const Tensor& dst, int64_t noc) {
    const Tensor& kern = *dst.src[0];
    const int64_t taps = kern.ne[0] * kern.ne[1], IC = kern.ne[3];
    const int64_t nj = noc * taps;
    Scratch s{};
    s.panels = round_up(nj, kGemmNR) * IC;  // every k block's panels, consecutive
    s.tokens = kPB * IC;                    // every k block of packed tokens of one position block
    s.cols = kPB * std::min(nj, kJB);
    return s;
}

int64_t max_channels(const Tensor& dst, int nth) { return (dst.src[0]->ne[2] + nth - 1) / nth; }

// Bytes of one thread's scratch, a multiple of 64 so that every thread's part stays 64-byte aligned.
size_t thread_bytes(const Tensor& dst, int nth) {
    const Scratch s = scratch_floats(dst, max_channels(dst, nth));
    return size_t(round_up(s.panels + s.tokens + s.cols, 16)) * sizeof(float);
}

float load_kernel(const Tensor& kern, const uint8_t* p) {
    if (kern.type == Type::F16) {
        uint16_t h;
        std::memcpy(&h, p, sizeof h);
        return fp16_to_fp32(h);
    }
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

}  // namespace

bool conv_transpose_2d_supported(const Tensor& dst) {
    const Tensor* w = dst.src[0];
    const Tensor* x = dst.src[1];
    if (dst.op != Op::CONV_TRANSPOSE_2D || !w || !x || (w->type != Type::F32 && w->type != Type::F16) ||
        x->type != Type::F32 || dst.type != Type::F32 || !dst.is_contiguous()) {
        return false;
    }
    const int64_t s = dst.op_params[0];
    return s > 0 && w->ne[3] == x->ne[2] && dst.ne[2] == w->ne[2] && dst.ne[3] == x->ne[3] && x->ne[0] > 0 &&
           x->ne[1] > 0 && dst.ne[0] == (x->ne[0] - 1) * s + w->ne[0] && dst.ne[1] == (x->ne[1] - 1) * s + w->ne[1];
}

// nth threads' parts (thread_bytes each) plus 64 bytes to align the first one.
size_t conv_transpose_2d_work_size(const Tensor& dst, int nth) { return size_t(nth) * thread_bytes(dst, nth) + 64; }

void compute_conv_transpose_2d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& kern = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const int64_t s = dst.op_params[0];
    const int64_t KW = kern.ne[0], KH = kern.ne[1], OC = kern.ne[2], IC = kern.ne[3];
    const int64_t IW = x.ne[0], IH = x.ne[1], N = dst.ne[3];
    const int64_t taps = KW * KH, P = IW * IH;
    int64_t o0, o1;
    split_range(OC, p.ith, p.nth, &o0, &o1);
    if (o1 <= o0) return;
    const size_t per_thread = thread_bytes(dst, p.nth);
    const size_t need = size_t(p.nth) * per_thread + 64;
    if (!p.wdata || p.wsize < need) {
        fail<InvalidArgumentError>("CONV_TRANSPOSE_2D", "scratch of ", p.wsize, " bytes is smaller than the ", need,
                                   " it needs");
    }
    uint8_t* base = p.wdata + (64 - reinterpret_cast<uintptr_t>(p.wdata) % 64) % 64;
    float* panels = reinterpret_cast<float*>(base + size_t(p.ith) * per_thread);
    const Scratch sz = scratch_floats(dst, max_channels(dst, p.nth));
    float* tokens = panels + sz.panels;
    float* cols = tokens + sz.tokens;
    const int64_t nj = (o1 - o0) * taps;
    const int64_t n_panels = (nj + kGemmNR - 1) / kGemmNR;

    // This thread's kernel columns j = ((oc - o0)*KH + ky)*KW + kx over ic, packed per k block: block
    // kb0 holds n_panels panels of kc x kGemmNR at panels + kb0 * n_panels * kGemmNR.
    for (int64_t kb0 = 0; kb0 < IC; kb0 += kKC) {
        const int64_t kc = std::min(kKC, IC - kb0);
        float* blk = panels + kb0 * n_panels * kGemmNR;
        std::memset(blk, 0, size_t(n_panels * kGemmNR * kc) * sizeof(float));
        for (int64_t ic = 0; ic < kc; ++ic) {
            int64_t j = 0;
            for (int64_t oc = o0; oc < o1; ++oc) {
                for (int64_t ky = 0; ky < KH; ++ky) {
                    for (int64_t kx = 0; kx < KW; ++kx, ++j) {
                        blk[(j / kGemmNR) * kc * kGemmNR + ic * kGemmNR + j % kGemmNR] =
                            load_kernel(kern, at(kern, kx, ky, oc, kb0 + ic));
                    }
                }
            }
        }
    }

    const size_t plane = size_t(dst.ne[0] * dst.ne[1]);  // floats of one output channel (dst is contiguous)
    const int64_t orow = dst.ne[0];
    for (int64_t n = 0; n < N; ++n) {
        float* out_n = reinterpret_cast<float*>(at(dst, 0, 0, 0, n));
        std::memset(out_n + size_t(o0) * plane, 0, size_t(o1 - o0) * plane * sizeof(float));
        for (int64_t p0 = 0; p0 < P; p0 += kPB) {
            const int64_t m = std::min(kPB, P - p0);
            const int64_t groups = (m + kGemmMR - 1) / kGemmMR;
            // Per k block kb0: tokens + kb0 * groups * MR holds g*kc*MR + ic*MR + r = data[n][kb0 + ic][p0 +
            // g*MR + r], zeros past m.
            for (int64_t kb0 = 0; kb0 < IC; kb0 += kKC) {
                const int64_t kc = std::min(kKC, IC - kb0);
                float* tk = tokens + kb0 * groups * kGemmMR;
                for (int64_t ic = 0; ic < kc; ++ic) {
                    const uint8_t* plane_x = at(x, 0, 0, kb0 + ic, n);
                    int64_t iy = p0 / IW, ix = p0 % IW;
                    for (int64_t g = 0; g < groups; ++g) {
                        float* dp = tk + g * kc * kGemmMR + ic * kGemmMR;
                        for (int64_t r = 0; r < kGemmMR; ++r) {
                            if (g * kGemmMR + r < m) {
                                std::memcpy(&dp[r], plane_x + size_t(iy) * x.nb[1] + size_t(ix) * x.nb[0],
                                            sizeof(float));
                                if (++ix == IW) {
                                    ix = 0;
                                    ++iy;
                                }
                            } else {
                                dp[r] = 0.0f;
                            }
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
                // Scatter: cols[l][j - jb0] -> out[n][o0 + j / taps][iy*s + ky][ix*s + kx], in runs of one
                // (oc, ky) row's consecutive kx; the block's first (oc, ky, kx) is divided out once.
                const int64_t j_end = jb0 + njb;
                const int64_t oc_b = o0 + jb0 / taps, ky_b = (jb0 % taps) / KW, kx_b = jb0 % KW;
                const size_t next_channel = plane - size_t(KH - 1) * size_t(orow);
                const bool whole_channels = jb0 % taps == 0 && njb % taps == 0;
                int64_t iy = p0 / IW, ix = p0 % IW;
                for (int64_t l = 0; l < m; ++l) {
                    const float* c = cols + l * njb;
                    float* row = out_n + size_t(oc_b) * plane + size_t(iy * s + ky_b) * size_t(orow) + size_t(ix * s);
                    if (whole_channels) {
                        // The block holds whole channels: plain nested loops, no run bookkeeping.
                        for (int64_t q = 0; q < njb; q += taps, row += plane) {
                            float* r = row;
                            for (int64_t ky = 0; ky < KH; ++ky, r += orow, c += KW) {
                                for (int64_t kx = 0; kx < KW; ++kx) r[kx] += c[kx];
                            }
                        }
                        if (++ix == IW) {
                            ix = 0;
                            ++iy;
                        }
                        continue;
                    }
                    int64_t ky = ky_b, kx = kx_b;
                    for (int64_t j = jb0; j < j_end;) {
                        const int64_t run = std::min(KW - kx, j_end - j);
                        float* o = row + kx;
                        for (int64_t t = 0; t < run; ++t) o[t] += c[t];
                        c += run;
                        j += run;
                        kx = 0;
                        if (++ky == KH) {
                            ky = 0;
                            row += next_channel;
                        } else {
                            row += orow;
                        }
                    }
                    if (++ix == IW) {
                        ix = 0;
                        ++iy;
                    }
                }
            }
        }
    }
}

}  // namespace mb
