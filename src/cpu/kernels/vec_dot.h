// Dot products of one weight row with one activation row, for matrix-vector products (few tokens).
// Activations are first brought into the form that pairs best with the weight type (VecType): the
// weights are the large, streamed operand, so each pairing reads them in their own format and does
// the arithmetic in the cheapest exact-enough way: float FMA for the float types, integer byte dot
// products for the 4/5/8-bit types.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/types.h"

namespace mb {

// Activations quantized to 8 bits for the quantized weight types: 32 codes, a float scale (finer
// than ggml's half, at no cost here) and s = d * sum(qs). s folds each weight block's offset into
// one product: q4_0's -8 and q5_0's -16 codes, and the m of q4_1 and q5_1, all multiply sum(b).
struct BlockQ8Act {
    float d;
    float s;
    int8_t qs[32];
};

enum class VecType {
    F32,  // f32, f16 (with f32 activations) and bf16 weights: activations stay f32
    F16,  // f16 weights with f16 activations (conv_1d after an f16 im2col)
    Q8,   // q4_0 q4_1 q5_0 q5_1 q8_0 iq4_nl mxfp4 weights: activations as BlockQ8Act
    Q8K,  // k-quant (q2_K .. q6_K) and iq4_xs weights: activations as q8_K blocks (vec_dot_k.h)
};

// The activation form for weights of type a and activations of type b (f32, or f16 with f16 a).
VecType vec_type_for(Type a, Type b);

// Bytes of one prepared row of k elements (k a multiple of 32 for Q8, of 256 for Q8K).
size_t vec_row_bytes(VecType vt, int64_t k);

// Converts one activation row of k elements, element i at x + i*stride, into vt. src is F32, or F16
// when vt is F16 or F32.
void vec_prepare_row(VecType vt, Type src, const uint8_t* x, size_t stride, int64_t k, void* out);

// Reads k elements of type src (F32 or F16), element i at x + i*stride, as floats.
void load_row_f32(Type src, const uint8_t* x, size_t stride, int64_t k, float* out);

// sum_i a[i] * b[i] over k elements: a is a contiguous weight row of type a, b a row prepared as
// vec_type_for(a, ...).
using VecDotFn = float (*)(int64_t k, const void* a, const void* b);
VecDotFn vec_dot_fn(Type a, VecType vt);

// Dots of kVecDotRows weight rows, row r at a + r * a_stride, with nt (1 .. kVecDotTokens) prepared
// activation rows b[0 .. nt-1]: out[t * kVecDotRows + r] = the dot product vec_dot_fn gives for row r
// and token t (bit for bit for the quantized weights, whose kernels share one order: int8_dot_x86.h;
// summed in another order for the float ones). nullptr where this build or CPU has no multi-row
// kernel for the pairing; callers then use vec_dot_fn per row and token.
constexpr int kVecDotRows = 4;
constexpr int kVecDotTokens = 2;
using VecDotRowsFn = void (*)(int64_t k, const uint8_t* a, size_t a_stride, const void* const* b, int nt, float* out);
VecDotRowsFn vec_dot_rows_fn(Type a, VecType vt);

// How the x86 tiles of vec_dot_rows_fn (one and two tokens) for the float weights and q4_0 .. q8_0
// read their four rows: side by side (Interleaved: a vector of each row in turn, every row ahead of
// its loads prefetched by software, tile_prefetch.h) or one row after the other (Rows: the tile's
// bytes in address order where the rows are contiguous, one stream, prefetched 4 KiB ahead in it).
// The same multiply-adds per row in the same order either way, so the results are bit for bit equal;
// only the speed differs, and by host. Weights streamed from memory, one token, best of alternating
// calls (benchmarks/matvec_threads.cpp): on a Zen 4 EPYC side by side reads 8.7-12.6 GB/s per core
// and one after the other 15-21; on a Xeon (Emerald Rapids) side by side is at or above the other
// (up to 1.8x on q8_0 rows in its L3). In Whisper base's decoder step (1 token, 2 threads, Zen 4)
// Rows took every product from 1.7-1.9x the time to 1 (benchmarks/profile_whisper_decoder.py). Where
// the weights stay in L2 between calls side by side is faster (more independent chains in flight;
// benchmarks/tile_order.py's small shapes), and so it is for the wide tiles of 4 and 6 tokens, which
// always read side by side. So Rows on AMD CPUs, Interleaved elsewhere; MB_VEC_TILE_ORDER=rows or
// interleaved picks one (read once, at the first product). The CPU device's prop "vec_tile_order"
// names the order in use.
enum class VecTileOrder { Interleaved, Rows };
VecTileOrder vec_tile_order();
const char* vec_tile_order_name(VecTileOrder order);

// Wider tiles for the float pairings where the CPU has AVX-512F: kVecDotRows rows x nt of 2 ..
// kVecDotTokensWide tokens, each weight vector loaded once for all of them. Every result is bit for
// bit what vec_dot_rows_fn's two-token tile gives for that row and token (not its one-token tile,
// which sums k in two chains), except the last token of an odd nt (3 or 5), which gets the one-token
// tile's bits: the pairs and that token as the tiles they replace would compute them. nullptr elsewhere.
constexpr int kVecDotTokensWide = 6;
VecDotRowsFn vec_dot_rows_wide_fn(Type a, VecType vt);

}  // namespace mb
