// AVX2 accessors of ggml's quantized weight blocks, shared by the one-row and the multi-row dot
// products (vec_dot.cpp, vec_dot_rows.cpp): a block's codes as 32 unsigned bytes in element order,
// and the per-block offset that turns codes into values (d * (c - zero), d * c + m; quant_blocks.h).
#pragma once

#include <cstdint>

#include "core/types.h"
#include "cpu/kernels/simd.h"

#if defined(MB_SIMD_X86)

namespace mb {

MB_TARGET_AVX2 inline __m256i load_codes32(const int8_t* qs) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
}

MB_TARGET_AVX2 inline __m256i block_codes(const BlockQ4_0& x) { return unpack_nibbles32(x.qs); }
MB_TARGET_AVX2 inline __m256i block_codes(const BlockQ4_1& x) { return unpack_nibbles32(x.qs); }
MB_TARGET_AVX2 inline __m256i block_codes(const BlockQ5_0& x) {
    return _mm256_or_si256(unpack_nibbles32(x.qs), fifth_bits32(load_qh(x.qh)));
}
MB_TARGET_AVX2 inline __m256i block_codes(const BlockQ5_1& x) {
    return _mm256_or_si256(unpack_nibbles32(x.qs), fifth_bits32(load_qh(x.qh)));
}

// What multiplies the activation block's sum: -8 d, -16 d, or m (d is the block's scale as float).
MB_TARGET_AVX2 inline float block_offset(const BlockQ4_0&, float d) { return -float(MB_QB_ZERO_Q4_0) * d; }
MB_TARGET_AVX2 inline float block_offset(const BlockQ5_0&, float d) { return -float(MB_QB_ZERO_Q5_0) * d; }
MB_TARGET_AVX2 inline float block_offset(const BlockQ4_1& x, float) { return _cvtsh_ss(x.m); }
MB_TARGET_AVX2 inline float block_offset(const BlockQ5_1& x, float) { return _cvtsh_ss(x.m); }

}  // namespace mb

#endif  // MB_SIMD_X86
