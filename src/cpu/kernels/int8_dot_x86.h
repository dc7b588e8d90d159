// The byte dot products of the quantized-weight kernels (vec_dot.cpp, vec_dot_rows.cpp) and the one
// order in which every path turns them into floats.
//
// Integer part: a block's 32 weight codes times its 32 activation codes, summed in groups of four
// into 8 int32 lanes (lane j holds elements 4j..4j+3). Two ways to compute the same lanes:
// - DotAvx2: vpmaddubsw (u8 x s8, adjacent pairs summed into int16, saturating) then vpmaddwd with
//   ones (adjacent int16 pairs into int32).
// - DotVnni: AVX512-VNNI's vpdpbusd, one instruction that multiplies and adds the four products to
//   an int32 accumulator without saturation.
// - DotAvxVnni: the same instruction in AVX-VNNI's VEX form, for CPUs that have it without AVX-512
//   (Alder Lake and later client cores; Sapphire Rapids has both).
// Both are exact here, so they give the same lanes: activation codes lie in [-127, 127] (the
// quantizer clamps, NaN blocks included), and the unsigned operand is at most 31 (4- and 5-bit
// codes, and the zero points 8 and 16) or 128 (|q8_0 code|, with the code's sign moved onto the
// activation). A vpmaddubsw pair is then at most 2 * 128 * 127 = 32512 <= 32767, so it never
// saturates; a lane is at most 4 * 128 * 127 = 65024, far inside int32 and exact as a float.
//
// Float part, one order for the portable, AVX2 and VNNI paths and for the one-row and four-row
// kernels alike, so their results are bit-identical (tests/test_cpu_isa_bits.py):
//   per weight row and token, 8 float lanes, and for each block i in order
//     acc[j] = fma(float(lane_i[j]), float(d_i) * D_i, acc[j])      (d: weight scale, D: activation's)
//   then ((acc0 + acc1) + (acc2 + acc3)) + ((acc4 + acc5) + (acc6 + acc7)),
//   plus, for q4_1 and q5_1, off = fma(m_i, S_i, off) summed over blocks in the same order.
// (The many-token int8 GEMM for q8_0 weights, gemm_q8_0.h, has an order of its own: one integer sum
// per block.)
// q4_0's and q5_0's zero points (8 and 16) are taken off in the integer lanes (lane of (c - z) * q =
// lane of c * q - lane of z * q), so they add no float term. Every multiply-add is an explicit fused
// one, so no compiler contraction choice can make two paths differ.
//
// Why the VNNI instruction is inline assembly rather than its intrinsic: the kernels are templates
// over DotAvx2/DotVnni/DotAvxVnni compiled for the AVX2 target, so all share one body (hence one float
// order). An intrinsic needs its function compiled for the AVX-512 (or avxvnni) target, which would
// either split the body or let the compiler use those instructions in the AVX2 instantiation. Plain
// `vpdpbusd` assembles to EVEX (the AVX512-VNNI form, with AVX512VL for ymm registers); with the {vex}
// pseudo-prefix (written %{vex%} in inline assembly, where braces are special) it assembles to the
// AVX-VNNI form. Callers use DotVnni only where cpu_has_avx512_vnni() holds and DotAvxVnni only where
// cpu_has_avx_vnni() does. DotVnni's operands may be any of the 32 vector registers ("v") where its
// caller is compiled for AVX-512 (vec_dot_k_avx2.cpp's AVX512-VNNI tiles are), else xmm0..15 as "x".
#pragma once

#include <cstdint>

#include "cpu/kernels/simd.h"

#if defined(MB_SIMD_X86)

namespace mb {

struct DotAvx2 {
    // init + the 8 lanes of u (unsigned bytes) times s (signed bytes).
    MB_TARGET_AVX2 static __m256i lanes(__m256i init, __m256i u, __m256i s) {
        return _mm256_add_epi32(init, dot_u8_i8(u, s));
    }
    // acc + the 8 int32 sums of adjacent int16 products of a and b (the k-quant kernels' scaling,
    // vec_dot_k_avx2.cpp): vpmaddwd then vpaddd. VNNI's vpdpwssd does both in one instruction, with the
    // same wrap-around int32 arithmetic (no saturation), so every form gives the same lanes.
    MB_TARGET_AVX2 static __m256i pairs(__m256i acc, __m256i a, __m256i b) {
        return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
    }
};

struct DotVnni {
    MB_TARGET_AVX2 static __m256i lanes(__m256i init, __m256i u, __m256i s) {
        // AT&T order: vpdpbusd signed, unsigned, accumulator.
        __asm__("vpdpbusd %2, %1, %0" : "+v"(init) : "v"(u), "v"(s));
        return init;
    }
    MB_TARGET_AVX2 static __m256i pairs(__m256i acc, __m256i a, __m256i b) {
        __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
        return acc;
    }
};

struct DotAvxVnni {
    MB_TARGET_AVX2 static __m256i lanes(__m256i init, __m256i u, __m256i s) {
        __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(init) : "x"(u), "x"(s));
        return init;
    }
    MB_TARGET_AVX2 static __m256i pairs(__m256i acc, __m256i a, __m256i b) {
        __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
        return acc;
    }
};

// The lanes of -z * s: the zero point z (8 or 16) of q4_0 / q5_0 against an activation block s,
// the starting value of that block's lanes for every weight row.
template <typename Dot, int kZero>
MB_TARGET_AVX2 inline __m256i zero_point_lanes(__m256i s) {
    if (kZero == 0) return _mm256_setzero_si256();
    return _mm256_sub_epi32(_mm256_setzero_si256(), Dot::lanes(_mm256_setzero_si256(), _mm256_set1_epi8(kZero), s));
}

// acc = fma(float(lanes), scale, acc), lane by lane.
MB_TARGET_AVX2 inline __m256 scale_add(__m256i lanes, float scale, __m256 acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(scale), acc);
}

// fma(a, b, c) in one rounding (the scalar offset sums): one vfmadd in a function with the FMA target.
MB_TARGET_AVX2 inline float fma1(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

// ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)) for each of a0..a3: the canonical lane sum of four
// accumulators at once.
MB_TARGET_AVX2 inline __m128 lane_sums4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// The same sum for one accumulator.
MB_TARGET_AVX2 inline float lane_sum(__m256 a) {
    const __m256 t = _mm256_hadd_ps(a, a);
    const __m256 u = _mm256_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

}  // namespace mb

#endif  // MB_SIMD_X86
