// The f32 matrix-multiply engine behind MUL_MAT for many tokens: C[i][j] (+)= sum_k B[i][k] * W[j][k].
// Both operands are packed k-major: weights (W) in panels of kGemmNR rows, tokens (B) in groups of
// kGemmMR rows, so a register tile of kGemmMR tokens x kGemmNR weight rows is updated from one
// contiguous stream each. Callers block k so that a weight panel (kc x kGemmNR floats) stays in L1
// while the packed tokens of a block (up to ~100 x kc floats) stay in L2.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mb {

constexpr int kGemmMR = 6;   // tokens per register tile
constexpr int kGemmNR = 16;  // weight rows per register tile and per panel

// Writes panel[k * kGemmNR + r] = rows[r][k] for k < kc, r < nr (nr <= kGemmNR), and zeros for the
// rows r >= nr, so edge panels can run through the full-width kernel.
void gemm_pack_panel(const float* const* rows, int nr, int64_t kc, float* panel);

// Packs m token rows (row i at b + i*ldb) over kc into ceil(m / kGemmMR) groups of kc * kGemmMR
// floats, out[g*kc*kGemmMR + k*kGemmMR + r] = b[(g*kGemmMR + r)*ldb + k], zeros past row m.
void gemm_pack_tokens(const float* b, int64_t ldb, int64_t m, int64_t kc, float* out);

// Memory a caller reads next (its next k block's operands, before packing them), for gemm_f32_block to
// prefetch into L2 while it computes: up to two ranges of whole cache lines, [at[i], at[i] + 64 *
// lines[i]), taken in order.
struct GemmPrefetch {
    const char* at[2] = {nullptr, nullptr};
    int64_t lines[2] = {0, 0};
};

// For i < m, j < n: c[i*ldc + j] = (accumulate ? c[i*ldc + j] : 0) + sum_{k<kc} B[i][k] * W[j][k],
// with W packed as ceil(n / kGemmNR) consecutive panels (gemm_pack_panel) and B as ceil(m / kGemmMR)
// groups (gemm_pack_tokens). Only the m x n block of c is written. With prefetch, its lines are
// fetched into L2 at one line per k step of the kernel calls that fetch no panel of their own, spread
// over the first half of the calls; the results do not depend on it.
void gemm_f32_block(int64_t kc, const float* panels, int64_t n, const float* tokens, int64_t m, float* c,
                    int64_t ldc, bool accumulate, GemmPrefetch prefetch = {});

}  // namespace mb
