// Small row-major products of bf16 operands with f32 results, for kernels whose operands already sit
// in cache (FLASH_ATTN_EXT's score and value tiles): C[i][j] (+)= sum_p dot2(A[i][p], B[p][j]), where
// each element of A and B is a *pair* of bf16 values packed in a uint32 (the first of the pair in the
// low half) and dot2 multiplies the pairs element by element and adds both products (exact in f32)
// to the f32 sum. On AVX512_BF16 hosts this is vdpbf16ps (one instruction per 16 lanes and two
// products each); elsewhere a portable loop with the same products. Sums are f32 in either case; the
// two differ only in the order of the additions, vdpbf16ps also flushing subnormal inputs to zero.
#pragma once

#include <cstdint>

namespace mb {

// Whether gemm_bf16_pairs runs on vdpbf16ps now (AVX512_BF16 within the ISA cap).
bool gemm_bf16_native();

// rows x cols of C (ldc floats apart, cols a multiple of 16) over kp pairs: A rows lda pairs apart,
// B rows (one per pair index p) ldb pairs apart. accumulate: C += A.B; otherwise C = A.B (C's old
// contents are not read). C's columns past cols are left as they are.
void gemm_bf16_pairs(int64_t rows, int64_t cols, int64_t kp, const uint32_t* a, int64_t lda, const uint32_t* b,
                     int64_t ldb, float* c, int64_t ldc, bool accumulate);

// n floats (n a multiple of 16) as n/2 bf16 pairs, rounded to nearest even, written over the start of
// the same buffer (pair p = values 2p, 2p + 1). Returns the pairs (the buffer, reinterpreted).
uint32_t* pack_bf16_pairs_in_place(float* x, int64_t n);

}  // namespace mb
