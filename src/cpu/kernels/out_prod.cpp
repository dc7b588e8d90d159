// OUT_PROD (ggml_out_prod): dst[i2, i3] (ne10 x ne00, f32) = b[i2, i3]^T a[j2, j3] summed over the shared
// dim 1: dst[n][m] = sum_k a[k][m] * b[k][n], a's matrices broadcast over b's (j2 = i2 / (ne12 / ne02)).
//
// It is the f32 GEMM of MUL_MAT (gemm_f32.h: C[i][j] = sum_k B[i][k] W[j][k]) with the tokens B = b's
// columns and the weights W = a's columns. Both operands are k-major already (a row of a or b holds one
// k for every column), so a panel's k step is kGemmNR consecutive floats of one row of a, a token
// group's kGemmMR of one row of b: with unit column strides packing is a fixed-size copy per row.
// Per matrix and k block of kKc rows, the threads pack every panel of a and every token group of b
// once, into one of two shared buffers (so the next block's packing never waits for this block's
// GEMM: one barrier per block), then split the output into tiles of kRows x kCols. Each thread packs a
// range of the block's rows of every strip, so all copy the same number of floats before the barrier
// (split by strips, the thread with a's 16-wide panels copied twice what the others did). While it
// computes a block, each thread prefetches into L2 the rows of a and b it packs for the next one
// (gemm_f32_block's GemmPrefetch), so that packing reads L2 rather than L3.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/gemm_f32.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/checked_scratch.h"

namespace mb {

namespace {

// k block. 128, not 256: both blocks' packed operands (2 x 393 KB at 384 x 384) then stay in a 1 MB
// L2 beside the raw rows prefetched for the next block; on the 2-core Zen 5 host, 1500x384 1500x384
// at 1 thread, thread CPU time, 3 x 40 calls alternating: medians 2.89-2.92 ms -> 2.61-2.75 ms.
constexpr int64_t kKc = 128;
constexpr int64_t kRows = 16 * kGemmMR;  // output rows (b's columns) per tile
constexpr int64_t kCols = 8 * kGemmNR;   // output columns (a's columns) per tile

// Floats of one k block's packed operands: a's panels for every column, then b's token groups.
size_t block_floats(const Tensor& dst) {
    return size_t(kKc * (round_up(dst.ne[0], kGemmNR) + round_up(dst.ne[1], kGemmMR)));
}

// Two k blocks' buffers.
size_t scratch_bytes(const Tensor& dst) { return 2 * block_floats(dst) * sizeof(float); }

// Rows r0 .. r1 (of kc from k0) of every strip of R columns of x (a or b at base; strip s: columns
// [s * R, s * R + R)), strip s at out + s * kc * R holding out[k * R + r] = x[k0 + k][s * R + r], zeros
// for columns at or past n. This is both the panel (R = kGemmNR) and the token group (R = kGemmMR)
// layout of gemm_f32.h. Row by row: each row's span is read once, in order.
template <int R>
void pack_strips(const Tensor& x, const uint8_t* base, int64_t k0, int64_t kc, int64_t r0, int64_t r1, int64_t n,
                 float* out) {
    const int64_t strips = (n + R - 1) / R;
    const int64_t full = x.nb[0] == sizeof(float) ? n / R : 0;  // strips before this one are whole
    for (int64_t k = r0; k < r1; ++k) {
        const uint8_t* row = base + size_t(k0 + k) * x.nb[1];
        int64_t s = 0;
        for (; s < full; ++s) {
            std::memcpy(out + (s * kc + k) * R, row + size_t(s * R) * sizeof(float), R * sizeof(float));
        }
        for (; s < strips; ++s) {
            float* o = out + (s * kc + k) * R;
            const int64_t w = std::min<int64_t>(R, n - s * R);
            for (int64_t r = 0; r < w; ++r) std::memcpy(o + r, row + size_t(s * R + r) * x.nb[0], sizeof(float));
            for (int64_t r = w; r < R; ++r) o[r] = 0.0f;
        }
    }
}

// Whole cache lines covering rows r0 .. r1 of x's matrix at base, when those rows are one contiguous
// span of floats (else none): what pack_strips will read of it.
void row_lines(const Tensor& x, const uint8_t* base, int64_t r0, int64_t r1, const char** at, int64_t* lines) {
    *at = nullptr;
    *lines = 0;
    if (r1 <= r0 || x.nb[0] != sizeof(float) || x.nb[1] != size_t(x.ne[0]) * sizeof(float)) return;
    const uintptr_t first = reinterpret_cast<uintptr_t>(base + size_t(r0) * x.nb[1]) & ~uintptr_t(63);
    const uintptr_t end = reinterpret_cast<uintptr_t>(base + size_t(r1) * x.nb[1]);
    *at = reinterpret_cast<const char*>(first);
    *lines = int64_t((end - first + 63) / 64);
}

// Share t of shares (t < shares) of the lines of both ranges of all, in order.
GemmPrefetch prefetch_share(const GemmPrefetch& all, int64_t t, int64_t shares) {
    const int64_t total = all.lines[0] + all.lines[1];
    int64_t l0 = total * t / shares, l1 = total * (t + 1) / shares;  // lines l0 .. l1 of the concatenation
    GemmPrefetch out;
    int slot = 0;
    for (int i = 0; i < 2 && l0 < l1; ++i) {
        if (l0 < all.lines[i]) {
            const int64_t n = std::min(l1, all.lines[i]) - l0;
            out.at[slot] = all.at[i] + l0 * 64;
            out.lines[slot++] = n;
            l0 += n;
        }
        l0 -= all.lines[i];
        l1 -= all.lines[i];
    }
    return out;
}

}  // namespace

bool out_prod_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    const Tensor* b = dst.src[1];
    if (dst.op != Op::OUT_PROD || !a || !b || a->type != Type::F32 || b->type != Type::F32 || dst.type != Type::F32) {
        return false;
    }
    return a->ne[1] == b->ne[1] && a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 &&
           b->ne[3] % a->ne[3] == 0 && dst.ne[0] == a->ne[0] && dst.ne[1] == b->ne[0] && dst.ne[2] == b->ne[2] &&
           dst.ne[3] == b->ne[3] && dst.nb[0] == sizeof(float);
}

size_t out_prod_work_size(const Tensor& dst, int) { return scratch_bytes_aligned(scratch_bytes(dst)); }

void compute_out_prod(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const int64_t M = dst.ne[0], N = dst.ne[1], K = a.ne[1];
    const int64_t r2 = b.ne[2] / a.ne[2], r3 = b.ne[3] / a.ne[3];
    const int64_t ldc = int64_t(dst.nb[1] / sizeof(float));
    const int64_t n_panels = (M + kGemmNR - 1) / kGemmNR;
    const int64_t tiles_n = (N + kRows - 1) / kRows, tiles = tiles_n * ((M + kCols - 1) / kCols);
    int64_t t0, t1;
    split_range(tiles, p.ith, p.nth, &t0, &t1);
    if (K == 0) {
        for (int64_t mat = 0; mat < dst.ne[2] * dst.ne[3]; ++mat) {
            uint8_t* c = host_data(dst) + size_t(mat % dst.ne[2]) * dst.nb[2] + size_t(mat / dst.ne[2]) * dst.nb[3];
            int64_t n0, n1;
            split_range(N, p.ith, p.nth, &n0, &n1);
            for (int64_t n = n0; n < n1; ++n) {
                float* row = reinterpret_cast<float*>(c + size_t(n) * dst.nb[1]);
                std::fill(row, row + M, 0.0f);
            }
        }
        return;
    }
    float* scratch = checked_scratch(p, scratch_bytes(dst), "OUT_PROD");
    const size_t per_block = block_floats(dst);
    const int64_t mats = dst.ne[2] * dst.ne[3];
    auto a_base = [&](int64_t mat) {
        return host_data(a) + size_t(mat % dst.ne[2] / r2) * a.nb[2] + size_t(mat / dst.ne[2] / r3) * a.nb[3];
    };
    auto b_base = [&](int64_t mat) {
        return host_data(b) + size_t(mat % dst.ne[2]) * b.nb[2] + size_t(mat / dst.ne[2]) * b.nb[3];
    };
    // What this thread packs of the block after (mat, k0), to prefetch while it computes this one: the
    // rows of a and b it packs there read in place (a single thread's pack of them from L3 stood
    // between the blocks' GEMMs).
    auto next_rows = [&](int64_t mat, int64_t k0) {
        GemmPrefetch out;
        if (k0 + kKc >= K) {
            if (++mat == mats) return out;
            k0 = 0;
        } else {
            k0 += kKc;
        }
        int64_t r0, r1;
        split_range(std::min(kKc, K - k0), p.ith, p.nth, &r0, &r1);
        row_lines(a, a_base(mat), k0 + r0, k0 + r1, &out.at[0], &out.lines[0]);
        row_lines(b, b_base(mat), k0 + r0, k0 + r1, &out.at[1], &out.lines[1]);
        return out;
    };
    int64_t block = 0;  // k blocks so far over all matrices: the buffer is block % 2
    for (int64_t mat = 0; mat < mats; ++mat) {
        const int64_t i2 = mat % dst.ne[2], i3 = mat / dst.ne[2];
        const uint8_t* abase = a_base(mat);
        const uint8_t* bbase = b_base(mat);
        float* c = reinterpret_cast<float*>(host_data(dst) + size_t(i2) * dst.nb[2] + size_t(i3) * dst.nb[3]);
        for (int64_t k0 = 0; k0 < K; k0 += kKc, ++block) {
            const int64_t kc = std::min(kKc, K - k0);
            float* panels = scratch + size_t(block % 2) * per_block;
            float* tokens = panels + n_panels * kc * kGemmNR;
            // Packing, shared: each thread packs its range of the block's rows, of every strip of both.
            int64_t r0, r1;
            split_range(kc, p.ith, p.nth, &r0, &r1);
            pack_strips<kGemmNR>(a, abase, k0, kc, r0, r1, M, panels);
            pack_strips<kGemmMR>(b, bbase, k0, kc, r0, r1, N, tokens);
            // Every strip of this block is packed; every thread is done with the GEMM of the block
            // before last, whose buffer the next block packs into.
            p.barrier();
            const GemmPrefetch next = next_rows(mat, k0);
            for (int64_t t = t0; t < t1; ++t) {
                const int64_t n0 = (t % tiles_n) * kRows, m0 = (t / tiles_n) * kCols;
                const int64_t nn = std::min(kRows, N - n0), mm = std::min(kCols, M - m0);
                gemm_f32_block(kc, panels + (m0 / kGemmNR) * kc * kGemmNR, mm, tokens + (n0 / kGemmMR) * kc * kGemmMR,
                               nn, c + n0 * ldc + m0, ldc, k0 > 0, prefetch_share(next, t - t0, t1 - t0));
            }
        }
    }
}

}  // namespace mb
