// SIMD plumbing shared by the CPU kernels. The module is compiled for baseline x86-64 / arm64, so the
// AVX2 code lives in functions compiled with a target attribute and is chosen at run time with
// cpu_has_avx2_fma_f16c(); every such kernel has a portable twin. Define MB_NO_SIMD to build only
// the portable code (the native tests do, to check both paths against the same references).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/isa.h"

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__)) && !defined(MB_NO_SIMD)
#define MB_SIMD_X86 1
#include <immintrin.h>
// Functions using AVX2, FMA or F16C instructions carry this; call them only when
// cpu_has_avx2_fma_f16c() is true.
#define MB_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define MB_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#endif

#if defined(__ARM_NEON) && !defined(MB_NO_SIMD)
#define MB_SIMD_NEON 1
#include <arm_neon.h>
#endif

namespace mb {

// What the hardware offers, whatever the cap.
inline CpuIsa cpu_isa_hardware() {
#if defined(MB_SIMD_X86)
    static const CpuIsa isa = [] {
        if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))) {
            return CpuIsa::Portable;
        }
        return __builtin_cpu_supports("avx512f") ? CpuIsa::Avx512 : CpuIsa::Avx2;
    }();
    return isa;
#else
    return CpuIsa::Portable;
#endif
}

// What the kernels use now: the hardware's set within the process-wide cap of core/isa.h (the CPU
// device's prop "max_isa", or MB_CPU_MAX_ISA).
inline CpuIsa cpu_isa_in_use() { return std::min(cpu_isa_hardware(), cpu_isa_cap()); }

// Whether the CPU has AVX512-VNNI with 256-bit forms (AVX512VL): vpdpbusd, the one-instruction byte
// dot product of the quantized-weight kernels (int8_dot_x86.h). It belongs to the Avx512 level, so
// the cap of 1 (avx2) runs the same kernels through AVX2's two-instruction form. Like avx512f above,
// __builtin_cpu_supports reports AVX-512 features only where the OS saves the AVX-512 register state
// (libgcc and compiler-rt check XCR0 through xgetbv), so a kernel never faults on a CPU whose OS
// leaves the state off.
inline bool cpu_hardware_has_avx512_vnni() {
#if defined(MB_SIMD_X86)
    static const bool has = cpu_isa_hardware() == CpuIsa::Avx512 && __builtin_cpu_supports("avx512vnni") &&
                            __builtin_cpu_supports("avx512vl");
    return has;
#else
    return false;
#endif
}

// Whether the CPU has AVX-VNNI: vpdpbusd on ymm registers in a VEX encoding, without AVX-512 (or
// beside it). An extension of the AVX2 level: the cap of 1 (avx2) keeps it, and the cap of 0 drops it.
inline bool cpu_hardware_has_avx_vnni() {
#if defined(MB_SIMD_X86)
    static const bool has = cpu_isa_hardware() >= CpuIsa::Avx2 && __builtin_cpu_supports("avxvnni");
    return has;
#else
    return false;
#endif
}

// Whether the CPU has AVX512_BF16: vdpbf16ps, the dot product of bf16 pairs into f32 lanes (the
// bf16 products of gemm_bf16.h). It belongs to the Avx512 level, like AVX512-VNNI above.
inline bool cpu_hardware_has_avx512_bf16() {
#if defined(MB_SIMD_X86)
    static const bool has = cpu_isa_hardware() == CpuIsa::Avx512 && __builtin_cpu_supports("avx512bf16");
    return has;
#else
    return false;
#endif
}

// AVX2 with FMA and F16C, for kernels marked MB_TARGET_AVX2.
inline bool cpu_has_avx2_fma_f16c() { return cpu_isa_in_use() >= CpuIsa::Avx2; }

// AVX-512 Foundation (with AVX2, FMA and F16C), for kernels marked MB_TARGET_AVX512.
inline bool cpu_has_avx512f() { return cpu_isa_in_use() >= CpuIsa::Avx512; }

// AVX512-VNNI and AVX512VL, within the cap, for the kernels instantiated with DotVnni.
inline bool cpu_has_avx512_vnni() { return cpu_has_avx512f() && cpu_hardware_has_avx512_vnni(); }

// AVX512_BF16 within the cap, for the kernels of gemm_bf16.h.
inline bool cpu_has_avx512_bf16() { return cpu_has_avx512f() && cpu_hardware_has_avx512_bf16(); }

// AVX-VNNI within the cap, for the kernels instantiated with DotAvxVnni. Where AVX512-VNNI is also in
// use, the kernels take that one (the same instruction; a choice, not a difference in results).
inline bool cpu_has_avx_vnni() { return cpu_has_avx2_fma_f16c() && cpu_hardware_has_avx_vnni(); }

// The byte dot product the quantized-weight kernels use now (int8_dot_x86.h), the one place that
// orders the forms: AVX512-VNNI where it is in use, else AVX-VNNI, else AVX2's two-instruction form.
// (Meaningful where cpu_has_avx2_fma_f16c() holds; below that the portable kernels run.)
enum class ByteDot { Avx2, AvxVnni, Avx512Vnni };

inline ByteDot byte_dot_in_use() {
    if (cpu_has_avx512_vnni()) return ByteDot::Avx512Vnni;
    return cpu_has_avx_vnni() ? ByteDot::AvxVnni : ByteDot::Avx2;
}

// The one of three (kernels, names) that goes with byte_dot_in_use().
template <typename T>
T by_byte_dot(T avx2, T avx_vnni, T avx512_vnni) {
    switch (byte_dot_in_use()) {
        case ByteDot::Avx512Vnni: return avx512_vnni;
        case ByteDot::AvxVnni: return avx_vnni;
        case ByteDot::Avx2: break;
    }
    return avx2;
}

#if defined(MB_SIMD_X86)

MB_TARGET_AVX2 inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// 8 halves (IEEE binary16 bit patterns) at p -> 8 floats.
MB_TARGET_AVX2 inline __m256 load_f16x8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 8 bfloat16 values at p -> 8 floats (a bf16 is the top half of an f32).
MB_TARGET_AVX2 inline __m256 load_bf16x8(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// Products of unsigned bytes u with signed bytes s, summed in groups of four into 8 int32 lanes.
// vpmaddubsw saturates its 16-bit pair sums; the callers keep |u*s| pairs below 2^15 (u <= 128,
// |s| <= 127).
MB_TARGET_AVX2 inline __m256i dot_u8_i8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// The 32 nibbles of a 4-bit block as bytes in element order: low nibbles of qs[0..15] are elements
// 0..15, high nibbles elements 16..31.
MB_TARGET_AVX2 inline __m256i unpack_nibbles32(const uint8_t* qs) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Bit j of qh becomes 0x10 in byte j (the fifth bit of a 5-bit code), 0 elsewhere.
MB_TARGET_AVX2 inline __m256i fifth_bits32(uint32_t qh) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i select = _mm256_set1_epi64x(0x8040201008040201LL);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(int(qh)), spread);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, select), select);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

#endif  // MB_SIMD_X86

}  // namespace mb
