// The two products of FLASH_ATTN_EXT's row path (flash_attn_ext.cpp's attend_row: a decoder step,
// one query row per sequence and head): the query's dot with each of n key rows, and the sum of n
// value rows weighed by the softmax. The rows are read as stored (f32 or f16, any row stride: a
// head's rows inside a cache whose rows hold every head), so nothing is converted or transposed.
//
// Four keys per step share the query's loads and end in one transposing sum; the weighed value
// rows are summed into registers (64 floats at a time), not into memory row after row. Both passes
// prefetch the rows kRowsAhead keys ahead, and the key pass hints the value rows into L2 as well:
// in Whisper's decoder the cache of 20 sequences of 224 positions is 28 MB per step (more than the
// last-level cache together with the weights), a head's rows lie 768 bytes apart, and without the
// prefetches each key's two lines were a memory latency of their own (3.5 GMAC/s at 2 threads).
// AVX-512 or AVX2 (within the ISA cap); f32 sums, in a fixed order per row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace mb {

// Whether these kernels take rows of k and v (f32 or f16 with contiguous elements, an AVX2 host
// within the cap); otherwise attend_row keeps its element-by-element loops.
bool flash_attn_row_applies(const Tensor& k, const Tensor& v);

// s[j] = dot(q, key row j) for j < n; key row j at k + j * k_stride, d elements of k_type. Value row
// j (v + j * v_stride, v_bytes long) is hinted into L2 for attn_row_values.
void attn_row_scores(const float* q, int64_t d, const uint8_t* k, size_t k_stride, Type k_type, int64_t n,
                     const uint8_t* v, size_t v_stride, size_t v_bytes, float* s);

// o[c] = sum over j < n of w[j] * (value row j)[c] for c < dv; rows whose weight is 0 are skipped
// (masked keys: their values are never read).
void attn_row_values(const float* w, int64_t n, const uint8_t* v, size_t v_stride, Type v_type, int64_t dv,
                     float* o);

}  // namespace mb
