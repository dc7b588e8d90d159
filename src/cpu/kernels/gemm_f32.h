// The f32 matrix-multiply engine behind MUL_MAT for many tokens: C[i][j] (+)= sum_k B[i][k] * W[j][k]
// with W (weights) packed into panels of kGemmNR rows laid out k-major, so a register tile of
// kGemmMR tokens x kGemmNR weight rows is updated with kGemmNR/8 vector loads and kGemmMR broadcasts
// per k. Token rows are read in place (broadcasts need no packing). Callers block k so a panel
// (kc x kGemmNR floats) stays in L1 while the token rows of a block stream from L2.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mb {

constexpr int kGemmMR = 6;   // tokens per register tile
constexpr int kGemmNR = 16;  // weight rows per register tile and per panel

// Writes panel[k * kGemmNR + r] = rows[r][k] for k < kc, r < nr (nr <= kGemmNR), and zeros for the
// rows r >= nr, so edge panels can run through the full-width kernel.
void gemm_pack_panel(const float* const* rows, int nr, int64_t kc, float* panel);

// For i < m, j < n: c[i*ldc + j] = (accumulate ? c[i*ldc + j] : 0) + sum_{k<kc} b[i*ldb + k] * W[j][k],
// with W packed as ceil(n / kGemmNR) consecutive panels of kc * kGemmNR floats (gemm_pack_panel).
// Only the m x n block of c is written.
void gemm_f32_block(int64_t kc, const float* panels, int64_t n, const float* b, int64_t ldb, int64_t m, float* c,
                    int64_t ldc, bool accumulate);

}  // namespace mb
