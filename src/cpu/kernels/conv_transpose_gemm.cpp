#include "cpu/kernels/conv_transpose_gemm.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/gemm_f32.h"
#include "cpu/kernels/checked_scratch.h"

namespace mb {

namespace {

constexpr int64_t kPB = 96;        // data positions per GEMM block (16 token groups of kGemmMR)
constexpr int64_t kKC = 256;       // input channels per GEMM k block
constexpr int64_t kColumns = 256;  // kernel columns per column block, at most (unless one channel has more)
static_assert(kPB % kGemmMR == 0, "position blocks are whole token groups");

// The column blocks of one thread: `per` channels each (the last fewer), each block's packed kernel
// `width` columns wide at most (whole panels of kGemmNR, or whole token groups of kGemmMR).
struct Columns {
    int64_t per, width;
};

Columns columns(int64_t taps) {
    const int64_t per = std::max<int64_t>(1, kColumns / taps);
    return {per, round_up(per * taps, 3 * kGemmNR)};
}
static_assert((3 * kGemmNR) % kGemmMR == 0, "a block's width is whole panels and whole token groups");
static_assert(kPB % kGemmNR == 0, "position blocks are whole panels too");

// Floats of one thread's scratch for up to `noc` output channels: every k block of its panels, one
// position block's tokens (every k block), one column block's cols.
struct Scratch {
    int64_t panels, tokens, cols;
};

Scratch scratch_floats(int64_t taps, int64_t IC, int64_t noc) {
    const Columns c = columns(taps);
    const int64_t blocks = (noc + c.per - 1) / c.per;
    return {blocks * c.width * IC, kPB * IC, kPB * std::min(noc, c.per) * taps};
}

size_t thread_bytes(int64_t taps, int64_t OC, int64_t IC, int nth) {
    const Scratch s = scratch_floats(taps, IC, (OC + nth - 1) / nth);
    return size_t(round_up(s.panels + s.tokens + s.cols, 16)) * sizeof(float);
}

// The kernel columns j = (oc - first) * taps + t of channels first .. last - 1 over input channels
// kb0 .. kb0 + kc, packed k-major in groups of L columns: blk[(j / L) * kc * L + ic * L + j % L]
// (the rest of blk zero already). An f32 kernel whose taps and channels are packed has a whole input
// channel's columns consecutive: copied L at a time.
template <int64_t L>
void pack_columns(const ConvTransposeGemm& g, int64_t kb0, int64_t kc, int64_t first, int64_t last, float* blk) {
    const int64_t taps = int64_t(g.tap_bytes.size()), nj = (last - first) * taps;
    bool packed = g.kernel->type == Type::F32 && g.kernel_nb_oc == size_t(taps) * sizeof(float);
    for (int64_t t = 0; packed && t < taps; ++t) packed = g.tap_bytes[size_t(t)] == size_t(t) * sizeof(float);
    const uint8_t* kbase = host_data(*g.kernel);
    // Input channel outer: the kernel is read along its rows, not a channel's stride apart.
    for (int64_t ic = 0; ic < kc; ++ic) {
        const uint8_t* kic = kbase + size_t(kb0 + ic) * g.kernel_nb_ic;
        if (packed) {
            const uint8_t* src = kic + size_t(first) * g.kernel_nb_oc;
            int64_t j = 0;
            for (; j + L <= nj; j += L) {
                std::memcpy(blk + (j / L) * kc * L + ic * L, src + size_t(j) * sizeof(float), L * sizeof(float));
            }
            if (j < nj) {
                std::memcpy(blk + (j / L) * kc * L + ic * L, src + size_t(j) * sizeof(float),
                            size_t(nj - j) * sizeof(float));
            }
            continue;
        }
        int64_t j = 0;
        for (int64_t oc = first; oc < last; ++oc) {
            const uint8_t* koc = kic + size_t(oc) * g.kernel_nb_oc;
            for (int64_t t = 0; t < taps; ++t, ++j) {
                blk[(j / L) * kc * L + ic * L + j % L] = load_f32_or_f16(g.kernel->type, koc + g.tap_bytes[size_t(t)]);
            }
        }
    }
}

}  // namespace

size_t conv_transpose_gemm_work_size(int64_t taps, int64_t OC, int64_t IC, int nth) {
    return scratch_bytes_aligned(size_t(nth) * thread_bytes(taps, OC, IC, nth));
}

void conv_transpose_gemm(const ComputeParams& p, const ConvTransposeGemm& g) {
    const int64_t taps = int64_t(g.tap_bytes.size()), IC = g.IC, P = g.P;
    int64_t o0, o1;
    split_range(g.OC, p.ith, p.nth, &o0, &o1);
    if (o1 <= o0) return;
    const size_t per_thread = thread_bytes(taps, g.OC, IC, p.nth);
    float* panels = checked_scratch(p, size_t(p.nth) * per_thread, g.who) + size_t(p.ith) * per_thread / sizeof(float);
    const Scratch sz = scratch_floats(taps, IC, (g.OC + p.nth - 1) / p.nth);
    float* tokens = panels + sz.panels;
    float* cols = tokens + sz.tokens;
    const Columns cb = columns(taps);
    const int64_t blocks = (o1 - o0 + cb.per - 1) / cb.per;

    // Column block b (channels o0 + b*per ..) of the k block at kb0 (of kc): its packed columns at
    // panels + kb0 * blocks * width + b * width * kc, columns j = (oc - first)*taps + t: as panels of
    // kGemmNR columns (k-major), or with by_tap as token groups of kGemmMR.
    const auto block_panels = [&](int64_t b, int64_t kb0, int64_t kc) {
        return panels + kb0 * blocks * cb.width + b * cb.width * kc;
    };
    for (int64_t kb0 = 0; kb0 < IC; kb0 += kKC) {
        const int64_t kc = std::min(kKC, IC - kb0);
        std::memset(block_panels(0, kb0, kc), 0, size_t(blocks * cb.width * kc) * sizeof(float));
        for (int64_t b = 0; b < blocks; ++b) {
            const int64_t first = o0 + b * cb.per, last = std::min(o1, first + cb.per);
            if (g.by_tap) {
                pack_columns<kGemmMR>(g, kb0, kc, first, last, block_panels(b, kb0, kc));
            } else {
                pack_columns<kGemmNR>(g, kb0, kc, first, last, block_panels(b, kb0, kc));
            }
        }
    }

    const uint8_t* xbase = host_data(*g.data);
    size_t offs[kPB];
    for (int64_t n = 0; n < g.N; ++n) {
        g.zero(n, o0, o1);
        if (IC == 0) continue;  // no terms: the output stays zero
        for (int64_t p0 = 0; p0 < P; p0 += kPB) {
            const int64_t m = std::min(kPB, P - p0);
            const int64_t groups = (m + kGemmMR - 1) / kGemmMR;
            for (int64_t l = 0; l < m; ++l) offs[l] = g.position_bytes(p0 + l);
            if (g.by_tap) {
                // Per k block kb0: tokens + kb0 * panels * NR holds pi*kc*NR + ic*NR + r = data[n][kb0 + ic][p0 +
                // pi*NR + r], zeros past m; a panel of 16 consecutive positions 4 bytes apart is one copy.
                const int64_t n_panels = (m + kGemmNR - 1) / kGemmNR;
                for (int64_t kb0 = 0; kb0 < IC; kb0 += kKC) {
                    const int64_t kc = std::min(kKC, IC - kb0);
                    float* tk = tokens + kb0 * n_panels * kGemmNR;
                    for (int64_t pi = 0; pi < n_panels; ++pi) {
                        const int64_t l0 = pi * kGemmNR, nl = std::min<int64_t>(kGemmNR, m - l0);
                        bool run = nl == kGemmNR;
                        for (int64_t r = 1; run && r < kGemmNR; ++r) {
                            run = offs[l0 + r] == offs[l0] + size_t(r) * sizeof(float);
                        }
                        for (int64_t ic = 0; ic < kc; ++ic) {
                            const uint8_t* plane = xbase + size_t(kb0 + ic) * g.data_nb_ic + size_t(n) * g.data_nb_n;
                            float* dp = tk + pi * kc * kGemmNR + ic * kGemmNR;
                            if (run) {
                                std::memcpy(dp, plane + offs[l0], kGemmNR * sizeof(float));
                                continue;
                            }
                            for (int64_t r = 0; r < kGemmNR; ++r) {
                                if (r < nl) {
                                    std::memcpy(&dp[r], plane + offs[l0 + r], sizeof(float));
                                } else {
                                    dp[r] = 0.0f;
                                }
                            }
                        }
                    }
                }
                for (int64_t b = 0; b < blocks; ++b) {
                    const int64_t first = o0 + b * cb.per, nch = std::min(o1, first + cb.per) - first;
                    for (int64_t kb0 = 0; kb0 < IC; kb0 += kKC) {
                        const int64_t kc = std::min(kKC, IC - kb0);
                        gemm_f32_block(kc, tokens + kb0 * n_panels * kGemmNR, m, block_panels(b, kb0, kc), nch * taps,
                                       cols, kPB, kb0 > 0);
                    }
                    g.scatter({n, p0, m, first, nch, kPB, cols});
                }
                continue;
            }
            // Per k block kb0: tokens + kb0 * groups * MR holds gi*kc*MR + ic*MR + r = data[n][kb0 + ic][p0 +
            // gi*MR + r], zeros past m.
            for (int64_t kb0 = 0; kb0 < IC; kb0 += kKC) {
                const int64_t kc = std::min(kKC, IC - kb0);
                float* tk = tokens + kb0 * groups * kGemmMR;
                for (int64_t ic = 0; ic < kc; ++ic) {
                    const uint8_t* plane = xbase + size_t(kb0 + ic) * g.data_nb_ic + size_t(n) * g.data_nb_n;
                    for (int64_t gi = 0; gi < groups; ++gi) {
                        float* dp = tk + gi * kc * kGemmMR + ic * kGemmMR;
                        for (int64_t r = 0; r < kGemmMR; ++r) {
                            const int64_t l = gi * kGemmMR + r;
                            if (l < m) {
                                std::memcpy(&dp[r], plane + offs[l], sizeof(float));
                            } else {
                                dp[r] = 0.0f;
                            }
                        }
                    }
                }
            }
            for (int64_t b = 0; b < blocks; ++b) {
                const int64_t first = o0 + b * cb.per, nch = std::min(o1, first + cb.per) - first;
                const int64_t nj = nch * taps;
                for (int64_t kb0 = 0; kb0 < IC; kb0 += kKC) {
                    const int64_t kc = std::min(kKC, IC - kb0);
                    gemm_f32_block(kc, block_panels(b, kb0, kc), nj, tokens + kb0 * groups * kGemmMR, m, cols, nj,
                                   kb0 > 0);
                }
                g.scatter({n, p0, m, first, nch, nj, cols});
            }
        }
    }
}

}  // namespace mb
