// AVX2 accessors of ggml's quantized weight blocks, shared by the one-row and the multi-row dot
// products (vec_dot.cpp, vec_dot_rows.cpp): a block's codes as 32 unsigned bytes in element order,
// and the m that the _1 types add to d * c.
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

// What multiplies the activation block's sum in the _1 types: m (their values are d * c + m). The
// _0 types' zero points are taken off in integers instead (int8_dot_x86.h).
MB_TARGET_AVX2 inline float block_m(const BlockQ4_1& x) { return _cvtsh_ss(x.m); }
MB_TARGET_AVX2 inline float block_m(const BlockQ5_1& x) { return _cvtsh_ss(x.m); }

}  // namespace mb

#endif  // MB_SIMD_X86
