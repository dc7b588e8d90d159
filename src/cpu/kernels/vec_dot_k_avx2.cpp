// AVX2 k-quant dot products (vec_dot_k_avx2.h). Per super-block, 8 groups of 32 elements: the codes
// (unsigned, at most 63) as 32 bytes, times the activation codes (|y| <= 127) in vpmaddubsw (pairs of
// at most 2 * 63 * 127 < 2^15: no saturation), then vpmaddwd by the group's two 16-element sub-block
// scales into 8 int32 lanes, added to the accumulator: in the four-row tiles through the byte-dot form
// in use (int8_dot_x86.h's Dot::pairs: vpmaddwd and vpaddd on AVX2, one vpdpwssd with AVX-VNNI or
// AVX512-VNNI, which saves Intel cores, whose three vector ports bound these kernels, one instruction
// in four). The zero point (q3_K 4, q6_K 32) comes off lane by lane as z times vpmaddwd(bsums,
// scales), and the minimums' sum is vpmaddwd(bsums, mins). Lanes stay far inside int32, so the lane
// totals are the portable kernel's integers exactly, whatever the order or the form; the two totals
// then go through k_block_add as there.
#include "cpu/kernels/vec_dot_k_avx2.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/int8_dot_x86.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/tile_prefetch.h"
#include "cpu/kernels/vec_dot.h"
#include "quant_blocks.h"

namespace mb {

#if defined(MB_SIMD_X86)

// GCC 12's avx512fintrin.h fills the unused lanes of _mm512_broadcast_i64x4, _mm512_inserti64x4 and
// _mm512_extracti64x4_epi64 from a self-initialised variable (`__m512i __Y = __Y;`), which
// -Wmaybe-uninitialized reports once those are inlined here (GCC PR 105593, fixed in GCC 13); the lanes
// are undefined by design. Silenced for this file only, so the CI build's -Werror passes on GCC 12.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

constexpr int kQK = MB_QK_K;

// Every helper of the tiles is inlined into its caller, so it is compiled for the caller's target:
// AVX2 for the AVX2 and AVX-VNNI forms, AVX-512 (BW, VL, VNNI) for the AVX512-VNNI form, where the
// compiler then has 32 vector registers and merges an and-mask with an or into one vpternlog (the
// same integer results; the float part is the same explicit instructions).
#define MB_K_INLINE MB_TARGET_AVX2 inline __attribute__((always_inline))
#define MB_TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define MB_KZ_INLINE MB_TARGET_AVX512_VNNI inline __attribute__((always_inline))

MB_K_INLINE __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// The 16 sub-block scales (signed bytes) as int16 in the layout group_scales reads: the even
// sub-blocks' in the low 128-bit half, the odd ones' in the high half.
MB_K_INLINE __m256i scales16(__m128i sc8) {
    const __m128i even_then_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, even_then_odd));
}

// Group g's scales: sub-block 2g's in the low half (elements 0..15 of the group), 2g + 1's in the
// high half, each as 8 int16 (one vpshufb of scales16's int16 g in both halves).
MB_K_INLINE __m256i group_scales(__m256i sc16, int g) {
    alignas(32) static const uint8_t kShuffle[8][32] = {
#define MB_G(g)                                                                                               \
    {2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, \
     2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, \
     2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1}
        MB_G(0), MB_G(1), MB_G(2), MB_G(3), MB_G(4), MB_G(5), MB_G(6), MB_G(7),
#undef MB_G
    };
    return _mm256_shuffle_epi8(sc16, _mm256_load_si256(reinterpret_cast<const __m256i*>(kShuffle[g])));
}

// v as it is, through an empty asm: the compiler may not reassociate the integer additions across it.
// Without it gcc turns each row's two accumulator chains into a tree over all of a super-block's
// products, computed first and summed last, which for four rows spills most of them to the stack.
MB_K_INLINE __m256i keep(__m256i v) {
    __asm__("" : "+v"(v));
    return v;
}

// acc + the lanes of group g: codes u against activation codes at y, the pairs scaled and summed
// through Dot (int8_dot_x86.h: vpmaddwd and vpaddd, or VNNI's vpdpwssd; the same lanes).
template <class Dot>
MB_K_INLINE __m256i group_dot(__m256i acc, __m256i u, const int8_t* y, __m256i sc16, int g) {
    const __m256i p = _mm256_maddubs_epi16(u, load256(y + 32 * g));
    return keep(Dot::pairs(acc, p, group_scales(sc16, g)));
}

// A half's value (F16C: exact, as fp16_to_fp32).
MB_K_INLINE float half(uint16_t h) { return _cvtsh_ss(h); }

MB_K_INLINE __m256i mask8(int m) { return _mm256_set1_epi8(char(m)); }

// ---- 512-bit code sums (the AVX512-VNNI form of q6_K): two 32-element groups per vector,
// group 2p in the low 256 bits, 2p + 1 in the high ones, so each vector instruction does two groups'
// work. The same integer lanes in the end: group_pairs_z adds the two halves, giving lane j the sum
// group_dot's lane j has over the groups.

MB_KZ_INLINE __m512i mask8z(int m) { return _mm512_set1_epi8(char(m)); }

// The same 32 bytes in both halves.
MB_KZ_INLINE __m512i twice(const void* p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}

// 16-bit lanes: a in the low half, b in the high one (the per-half shift counts of vpsllvw, vpsrlvw).
MB_KZ_INLINE __m512i halves16(int a, int b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(a))), _mm256_set1_epi16(short(b)), 1);
}

// (a & m) | b in one vpternlog (0xEC: the truth table of (A & C) | B).
MB_KZ_INLINE __m512i or_masked(__m512i a, __m512i b, __m512i m) { return _mm512_ternarylogic_epi32(a, b, m, 0xEC); }

// acc + the lanes of groups 2p and 2p + 1 (codes u, activation codes at y + 64p): the 16 sub-block
// scales as int16 (sc16, natural order), 2p's two and 2p + 1's two spread over the four 128-bit lanes.
MB_KZ_INLINE __m512i pair_dot_z(__m512i acc, __m512i u, const int8_t* y, __m512i sc16, int p) {
    alignas(64) static const uint16_t kIdx[4][32] = {
#define MB_Q(s) s, s, s, s, s, s, s, s
#define MB_P(p) {MB_Q(4 * p), MB_Q(4 * p + 1), MB_Q(4 * p + 2), MB_Q(4 * p + 3)}
        MB_P(0), MB_P(1), MB_P(2), MB_P(3),
#undef MB_P
#undef MB_Q
    };
    const __m512i prod = _mm512_maddubs_epi16(u, _mm512_loadu_si512(y + 64 * p));
    const __m512i sc = _mm512_permutexvar_epi16(_mm512_load_si512(kIdx[p]), sc16);
    return _mm512_dpwssd_epi32(acc, prod, sc);
}

// The 8 lanes of two 512-bit accumulators.
MB_KZ_INLINE __m256i group_pairs_z(__m512i a, __m512i b) {
    const __m512i s = _mm512_add_epi32(a, b);
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

// ---- per type: the 16 sub-block scales (and minimums) as bytes, and the scaled code sums

// q4_K and q5_K: 8 six-bit scales and minimums packed in 12 bytes (mb_qb_k4_scale_min), each given to
// both 16-element halves of its 32-element sub-block. Decoded in one vector: sub-block j < 4 takes
// the low 6 bits of bytes j (scale) and j + 4 (minimum); j >= 4 the nibbles of byte j + 4 with bits
// 6..7 of bytes j - 4 (scale) and j (minimum) above them. q points at 16 readable bytes (the 12 are
// followed by the codes in both blocks).
MB_K_INLINE void k4_scales(const uint8_t* q, __m128i& sc8, __m128i& mn8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    // Bytes [0..3 | 8..11 | 4..7 | 8..11]: the low bits of scales 0..7, then of minimums 0..7.
    const __m128i x = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i lo = _mm_or_si128(
        _mm_and_si128(x, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
        _mm_and_si128(_mm_srli_epi16(x, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    // Bits 6..7 of bytes 0..3 (scales 4..7) and 4..7 (minimums 4..7), moved to bits 4..5.
    const __m128i hb = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i all = _mm_or_si128(lo, _mm_and_si128(_mm_srli_epi16(hb, 2), _mm_set1_epi8(0x30)));
    sc8 = _mm_shuffle_epi8(all, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
    mn8 = _mm_shuffle_epi8(all, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
}

struct Q2 {
    using Block = block_q2_K;
    static constexpr int kZero = 0;
    static constexpr bool kHasMin = true;
    static constexpr size_t kScaleWord = offsetof(Block, d);
    static constexpr bool kScaleHigh = false;
    static constexpr bool kSumsZ = false;  // sums_z (block_lanes_z)
    MB_K_INLINE static float dmin(const Block& b) { return half(b.dmin); }
    MB_K_INLINE static void scales(const Block& b, __m128i& sc8, __m128i& mn8) {
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
        sc8 = _mm_and_si128(s, _mm_set1_epi8(0x0F));
        mn8 = _mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0F));
    }
    template <class Dot>
    MB_K_INLINE static __m256i sums(const Block& b, const int8_t* y, __m256i sc16) {
        __m256i acc0 = _mm256_setzero_si256();
        __m256i acc1 = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i q = load256(b.qs + 32 * h);
            acc0 = group_dot<Dot>(acc0, _mm256_and_si256(q, mask8(3)), y, sc16, 4 * h);
            acc1 = group_dot<Dot>(acc1, _mm256_and_si256(_mm256_srli_epi16(q, 2), mask8(3)), y, sc16, 4 * h + 1);
            acc0 = group_dot<Dot>(acc0, _mm256_and_si256(_mm256_srli_epi16(q, 4), mask8(3)), y, sc16, 4 * h + 2);
            acc1 = group_dot<Dot>(acc1, _mm256_and_si256(_mm256_srli_epi16(q, 6), mask8(3)), y, sc16, 4 * h + 3);
        }
        return _mm256_add_epi32(acc0, acc1);
    }
};

struct Q3 {
    using Block = block_q3_K;
    static constexpr int kZero = 4;
    static constexpr bool kHasMin = false;
    static constexpr size_t kScaleWord = offsetof(Block, d) - 2;
    static constexpr bool kScaleHigh = true;
    // (A sums_z as q6_K's, pairs of groups with per-half shifts, was slower on Zen 4: 8.3 vs 7.6 ns a
    // super-block, benchmarks/kquant_kernels.cpp at K = 2048.)
    static constexpr bool kSumsZ = false;
    MB_K_INLINE static float dmin(const Block&) { return 0.0f; }
    // mb_qb_k3_scale(j) - 32: low nibbles from bytes 0..7 (j < 8 low, else high nibble of byte j - 8),
    // bits 4..5 from bits 2(j/4) of byte 8 + j%4.
    MB_K_INLINE static void scales(const Block& b, __m128i& sc8, __m128i& mn8) {
        uint64_t lo8;
        uint32_t hi4;
        std::memcpy(&lo8, b.scales, 8);
        std::memcpy(&hi4, b.scales + 8, 4);
        const __m128i v = _mm_cvtsi64_si128(int64_t(lo8));
        const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(v, _mm_set1_epi8(0x0F)),
                                              _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F)));
        const __m128i hi = _mm_set_epi32(int((hi4 >> 6) & 0x03030303u), int((hi4 >> 4) & 0x03030303u),
                                         int((hi4 >> 2) & 0x03030303u), int(hi4 & 0x03030303u));
        sc8 = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
        mn8 = _mm_setzero_si128();
    }
    template <class Dot>
    MB_K_INLINE static __m256i sums(const Block& b, const int8_t* y, __m256i sc16) {
        __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        const __m256i hm = load256(b.hmask);  // bit g of each byte: group g's third bit
        for (int h = 0; h < 2; ++h) {
            const __m256i q = load256(b.qs + 32 * h);
            for (int c = 0; c < 4; ++c) {
                const int g = 4 * h + c;
                const __m256i lo = _mm256_and_si256(c == 0 ? q : _mm256_srli_epi16(q, 2 * c), mask8(3));
                // Bit g moved to bit 2 with one shift (none for g = 2); the mask drops what the 16-bit
                // shift brought over from the neighbouring byte.
                const __m256i at2 = g < 2 ? _mm256_slli_epi16(hm, 2 - g) : g == 2 ? hm : _mm256_srli_epi16(hm, g - 2);
                const __m256i hb = _mm256_and_si256(at2, mask8(4));
                acc[c & 1] = group_dot<Dot>(acc[c & 1], _mm256_or_si256(lo, hb), y, sc16, g);
            }
        }
        return _mm256_add_epi32(acc[0], acc[1]);
    }
};

struct Q4 {
    using Block = block_q4_K;
    static constexpr int kZero = 0;
    static constexpr bool kHasMin = true;
    static constexpr size_t kScaleWord = offsetof(Block, d);
    static constexpr bool kScaleHigh = false;
    static constexpr bool kSumsZ = false;  // sums_z (block_lanes_z)
    MB_K_INLINE static float dmin(const Block& b) { return half(b.dmin); }
    MB_K_INLINE static void scales(const Block& b, __m128i& sc8, __m128i& mn8) { k4_scales(b.scales, sc8, mn8); }
    template <class Dot>
    MB_K_INLINE static __m256i sums(const Block& b, const int8_t* y, __m256i sc16) {
        __m256i acc0 = _mm256_setzero_si256();
        __m256i acc1 = _mm256_setzero_si256();
        for (int p = 0; p < 4; ++p) {
            const __m256i q = load256(b.qs + 32 * p);
            acc0 = group_dot<Dot>(acc0, _mm256_and_si256(q, mask8(0xF)), y, sc16, 2 * p);
            acc1 = group_dot<Dot>(acc1, _mm256_and_si256(_mm256_srli_epi16(q, 4), mask8(0xF)), y, sc16, 2 * p + 1);
        }
        return _mm256_add_epi32(acc0, acc1);
    }
};

struct Q5 {
    using Block = block_q5_K;
    static constexpr int kZero = 0;
    static constexpr bool kHasMin = true;
    static constexpr size_t kScaleWord = offsetof(Block, d);
    static constexpr bool kScaleHigh = false;
    static constexpr bool kSumsZ = false;  // sums_z (block_lanes_z)
    MB_K_INLINE static float dmin(const Block& b) { return half(b.dmin); }
    MB_K_INLINE static void scales(const Block& b, __m128i& sc8, __m128i& mn8) { k4_scales(b.scales, sc8, mn8); }
    template <class Dot>
    MB_K_INLINE static __m256i sums(const Block& b, const int8_t* y, __m256i sc16) {
        __m256i acc0 = _mm256_setzero_si256();
        __m256i acc1 = _mm256_setzero_si256();
        const __m256i qh = load256(b.qh);  // bit g of each byte: group g's fifth bit
        for (int p = 0; p < 4; ++p) {
            const __m256i q = load256(b.qs + 32 * p);
            // Bit 2p (then 2p + 1) of each byte moved to bit 4.
            const __m256i h0 = _mm256_and_si256(2 * p <= 4 ? _mm256_slli_epi16(qh, 4 - 2 * p)
                                                          : _mm256_srli_epi16(qh, 2 * p - 4),
                                                mask8(0x10));
            const __m256i h1 = _mm256_and_si256(2 * p + 1 <= 4 ? _mm256_slli_epi16(qh, 3 - 2 * p)
                                                              : _mm256_srli_epi16(qh, 2 * p - 3),
                                                mask8(0x10));
            acc0 = group_dot<Dot>(acc0, _mm256_or_si256(_mm256_and_si256(q, mask8(0xF)), h0), y, sc16, 2 * p);
            acc1 = group_dot<Dot>(acc1, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), mask8(0xF)), h1), y,
                             sc16, 2 * p + 1);
        }
        return _mm256_add_epi32(acc0, acc1);
    }
};

struct Q6 {
    using Block = block_q6_K;
    static constexpr int kZero = 32;
    static constexpr bool kHasMin = false;
    static constexpr size_t kScaleWord = offsetof(Block, d) - 2;
    static constexpr bool kScaleHigh = true;
    static constexpr bool kSumsZ = true;  // sums_z (block_lanes_z)
    MB_K_INLINE static float dmin(const Block&) { return 0.0f; }
    MB_K_INLINE static void scales(const Block& b, __m128i& sc8, __m128i& mn8) {
        sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
        mn8 = _mm_setzero_si128();
    }
    template <class Dot>
    MB_K_INLINE static __m256i sums(const Block& b, const int8_t* y, __m256i sc16) {
        __m256i acc0 = _mm256_setzero_si256();
        __m256i acc1 = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = load256(b.ql + 64 * h);
            const __m256i l1 = load256(b.ql + 64 * h + 32);
            const __m256i qh = load256(b.qh + 32 * h);
            const __m256i u0 = _mm256_or_si256(_mm256_and_si256(l0, mask8(0xF)),
                                               _mm256_slli_epi16(_mm256_and_si256(qh, mask8(0x03)), 4));
            const __m256i u1 = _mm256_or_si256(_mm256_and_si256(l1, mask8(0xF)),
                                               _mm256_slli_epi16(_mm256_and_si256(qh, mask8(0x0C)), 2));
            const __m256i u2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), mask8(0xF)),
                                               _mm256_and_si256(qh, mask8(0x30)));
            const __m256i u3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), mask8(0xF)),
                                               _mm256_srli_epi16(_mm256_and_si256(qh, mask8(0xC0)), 2));
            acc0 = group_dot<Dot>(acc0, u0, y, sc16, 4 * h);
            acc1 = group_dot<Dot>(acc1, u1, y, sc16, 4 * h + 1);
            acc0 = group_dot<Dot>(acc0, u2, y, sc16, 4 * h + 2);
            acc1 = group_dot<Dot>(acc1, u3, y, sc16, 4 * h + 3);
        }
        return _mm256_add_epi32(acc0, acc1);
    }
    // Half h's 64 low-bit bytes are groups 4h and 4h + 1 (low nibbles) and 4h + 2, 4h + 3 (high ones);
    // their two high bits are bits 0..1, 2..3 (then 4..5, 6..7) of qh's 32 bytes, moved to bits 4..5.
    MB_KZ_INLINE static __m256i sums_z(const Block& b, const int8_t* y, __m512i sc16) {
        __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int h = 0; h < 2; ++h) {
            const __m512i l = _mm512_loadu_si512(b.ql + 64 * h);
            const __m512i qh = twice(b.qh + 32 * h);
            const __m512i hi01 = _mm512_and_si512(_mm512_sllv_epi16(qh, halves16(4, 2)), mask8z(0x30));
            const __m512i hi23 = _mm512_and_si512(_mm512_srlv_epi16(qh, halves16(0, 2)), mask8z(0x30));
            acc[0] = pair_dot_z(acc[0], or_masked(l, hi01, mask8z(0xF)), y, sc16, 2 * h);
            acc[1] = pair_dot_z(acc[1], or_masked(_mm512_srli_epi16(l, 4), hi23, mask8z(0xF)), y, sc16, 2 * h + 1);
        }
        return group_pairs_z(acc[0], acc[1]);
    }
};

// iq4_xs: the codes pick signed table values v (|v| <= 127); vpmaddubsw takes |v| against the
// activation codes with v's sign moved onto them (|y| <= 127: pairs at most 2 * 127 * 127). The 8
// sub-block scales (ls - 32, -32..31) go to both 16-element halves of their sub-block.
struct IQ4XS {
    using Block = block_iq4_xs;
    static constexpr int kZero = 0;
    static constexpr bool kHasMin = false;
    static constexpr size_t kScaleWord = offsetof(Block, d);
    static constexpr bool kScaleHigh = false;
    static constexpr bool kSumsZ = false;  // sums_z (block_lanes_z)
    MB_K_INLINE static float dmin(const Block&) { return 0.0f; }
    MB_K_INLINE static void scales(const Block& b, __m128i& sc8, __m128i& mn8) {
        uint32_t l4;
        std::memcpy(&l4, b.scales_l, 4);
        const __m128i v = _mm_cvtsi32_si128(int(l4));
        // Sub-block s: the low nibble of scales_l[s / 2] for even s, its high nibble for odd s.
        const __m128i lo = _mm_unpacklo_epi8(_mm_and_si128(v, _mm_set1_epi8(0x0F)),
                                             _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F)));
        // Bits 2s..2s+1 of scales_h spread to byte s.
        uint64_t h = b.scales_h;
        h = (h | (h << 24)) & 0x000000FF000000FFull;
        h = (h | (h << 12)) & 0x000F000F000F000Full;
        h = (h | (h << 6)) & 0x0303030303030303ull;
        const __m128i ls = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(_mm_cvtsi64_si128(int64_t(h)), 4)),
                                        _mm_set1_epi8(32));
        sc8 = _mm_shuffle_epi8(ls, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
        mn8 = _mm_setzero_si128();
    }
    template <class Dot>
    MB_K_INLINE static __m256i sub_dot(__m256i acc, __m256i v, const int8_t* y, __m256i sc16, int s) {
        const __m256i yv = load256(y + 32 * s);
        const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(yv, v));
        return keep(Dot::pairs(acc, p, group_scales(sc16, s)));
    }
    template <class Dot>
    MB_K_INLINE static __m256i sums(const Block& b, const int8_t* y, __m256i sc16) {
        const __m256i table =
            _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mb_kvalues_iq4nl)));
        __m256i acc0 = _mm256_setzero_si256();
        __m256i acc1 = _mm256_setzero_si256();
        for (int s = 0; s < 8; s += 2) {
            // Sub-blocks s and s + 1: their 16 code bytes each, low nibbles the first 16 elements.
            const __m256i q = load256(b.qs + 16 * s);
            const __m256i vlo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, mask8(0xF)));
            const __m256i vhi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), mask8(0xF)));
            acc0 = sub_dot<Dot>(acc0, _mm256_permute2x128_si256(vlo, vhi, 0x20), y, sc16, s);
            acc1 = sub_dot<Dot>(acc1, _mm256_permute2x128_si256(vlo, vhi, 0x31), y, sc16, s + 1);
        }
        return _mm256_add_epi32(acc0, acc1);
    }
};

// The two integer totals of one super-block, still in lanes: isum (the scaled code sums less the zero
// point's part) and msum (the minimums' part, zero without minimums), from the code sums (lanes).
template <class K>
MB_K_INLINE void block_totals(const block_q8_K& y, __m128i sc8, __m128i mn8, __m256i lanes, __m256i& isum,
                              __m256i& msum) {
    isum = lanes;
    const __m256i bs = load256(y.bsums);
    if (K::kZero != 0) {
        // kZero is 4 or 32: the zero point's products as a shift.
        const __m256i z = _mm256_madd_epi16(bs, _mm256_cvtepi8_epi16(sc8));
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(z, K::kZero == 4 ? 2 : 5));
    }
    msum = K::kHasMin ? _mm256_madd_epi16(bs, _mm256_cvtepi8_epi16(mn8)) : _mm256_setzero_si256();
}

template <class K, class Dot>
MB_K_INLINE void block_lanes(const typename K::Block& a, const block_q8_K& y, __m256i& isum, __m256i& msum) {
    __m128i sc8, mn8;
    K::scales(a, sc8, mn8);
    block_totals<K>(y, sc8, mn8, K::template sums<Dot>(a, y.qs, scales16(sc8)), isum, msum);
}

// The same with the 512-bit code sums where the type has them (kSumsZ), for the AVX512-VNNI form.
template <class K>
MB_KZ_INLINE void block_lanes_z(const typename K::Block& a, const block_q8_K& y, __m256i& isum, __m256i& msum) {
    if constexpr (K::kSumsZ) {
        __m128i sc8, mn8;
        K::scales(a, sc8, mn8);
        const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(sc8));
        block_totals<K>(y, sc8, mn8, K::sums_z(a, y.qs, sc16), isum, msum);
    } else {
        block_lanes<K, DotVnni>(a, y, isum, msum);
    }
}

template <class K>
MB_TARGET_AVX2 float dot_k(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const typename K::Block*>(va);
    const auto* b = static_cast<const block_q8_K*>(vb);
    float acc = 0.0f;
    for (int64_t i = 0; i < k / kQK; ++i) {
        __m256i isum, msum;
        block_lanes<K, DotAvx2>(a[i], b[i], isum, msum);
        // Both totals at once: [i, m, i, m].
        const __m256i h = _mm256_hadd_epi32(isum, msum);
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        t = _mm_hadd_epi32(t, t);
        acc = k_block_add(acc, half(a[i].d), K::dmin(a[i]), b[i].d, _mm_cvtsi128_si32(t), _mm_extract_epi32(t, 1),
                          K::kHasMin);
    }
    return acc;
}

// The totals of four rows' lanes, in row order: lane r of the result is row r's lanes summed.
MB_K_INLINE __m128i totals4(__m256i r0, __m256i r1, __m256i r2, __m256i r3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(r0, r1), _mm256_hadd_epi32(r2, r3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// The super-block scales of four blocks, one 32-bit load each: d (and dmin, for the types with
// minimums, where it follows d) as floats, lane r from block r. The types without minimums keep d in
// the high half of the word at kScaleWord (q3_K and q6_K: d is the block's last two bytes, so the word
// stays inside the block) or in the low half (iq4_xs: d first).
template <class K>
MB_K_INLINE void scales4(const typename K::Block* const* blk, __m128& d, __m128& dmin) {
    uint32_t w[4];
    for (int r = 0; r < 4; ++r) std::memcpy(&w[r], reinterpret_cast<const uint8_t*>(blk[r]) + K::kScaleWord, 4);
    const __m256 h = _mm256_cvtph_ps(_mm_setr_epi32(int(w[0]), int(w[1]), int(w[2]), int(w[3])));
    const __m128 lo = _mm256_castps256_ps128(h);  // words 0 and 1: [lo0 hi0 lo1 hi1]
    const __m128 hi = _mm256_extractf128_ps(h, 1);
    const __m128 even = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 odd = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    d = K::kHasMin || !K::kScaleHigh ? even : odd;
    dmin = odd;
}

// One super-block of a four-row tile: acc + each row's float part (k_block_add's two fused
// multiply-adds, done for the four rows in the four lanes of one vector: the same operations lane by
// lane, so the same bits as dot_k), from the rows' lanes is and ms.
template <class K>
MB_K_INLINE __m128 tile_block_add(__m128 acc, const typename K::Block* const* blk, float dy_scale, const __m256i* is,
                                  const __m256i* ms) {
    __m128 d, dmin;
    scales4<K>(blk, d, dmin);
    const __m128 dy = _mm_set1_ps(dy_scale);
    acc = _mm_fmadd_ps(_mm_mul_ps(d, dy), _mm_cvtepi32_ps(totals4(is[0], is[1], is[2], is[3])), acc);
    if (K::kHasMin) {
        const __m128 sign = _mm_castsi128_ps(_mm_set1_epi32(int(0x80000000u)));
        acc = _mm_fmadd_ps(_mm_xor_ps(_mm_mul_ps(dmin, dy), sign), _mm_cvtepi32_ps(totals4(ms[0], ms[1], ms[2], ms[3])),
                           acc);
    }
    return acc;
}

// kVecDotRows (4) rows against nt tokens, a super-block at a time (tile_block_add). The first token's
// pass prefetches (tile_prefetch.h's prefetch_tile_ahead). Each row reads the activation codes from
// memory (an empty asm hides that the four rows read the same ones), so the compiler does not keep 8
// activation vectors in registers across the rows and spill them. LANES(block, y, isum, msum) gives a
// row's lanes.
#define MB_K_TILE_BODY(LANES)                                                                             \
    using Block = typename K::Block;                                                                      \
    const int64_t nb = k / kQK;                                                                           \
    const uint8_t* rows[4];                                                                               \
    for (int r = 0; r < 4; ++r) rows[r] = a + size_t(r) * a_stride;                                       \
    constexpr int64_t bs = int64_t(sizeof(Block));                                                        \
    for (int t = 0; t < nt; ++t) {                                                                        \
        const auto* y = static_cast<const block_q8_K*>(b[t]);                                             \
        __m128 acc = _mm_setzero_ps();                                                                    \
        for (int64_t i = 0; i < nb; ++i) {                                                                \
            const Block* blk[4];                                                                          \
            for (int r = 0; r < 4; ++r) blk[r] = reinterpret_cast<const Block*>(rows[r] + i * bs);        \
            if (t == 0) prefetch_tile_ahead(rows, size_t(i * bs), size_t(bs), size_t(nb * bs), a_stride); \
            __m256i is[4], ms[4];                                                                         \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; ++r) {                                         \
                const block_q8_K* yi = y + i;                                                             \
                __asm__("" : "+r"(yi));                                                                   \
                LANES(*blk[r], *yi, is[r], ms[r]);                                                        \
            }                                                                                             \
            acc = tile_block_add<K>(acc, blk, y[i].d, is, ms);                                            \
        }                                                                                                 \
        _mm_storeu_ps(out + 4 * t, acc);                                                                  \
    }

template <class K, class Dot>
MB_TARGET_AVX2 void rows_k(int64_t k, const uint8_t* a, size_t a_stride, const void* const* b, int nt, float* out) {
    MB_K_TILE_BODY((block_lanes<K, Dot>))
}

// The AVX512-VNNI form: the same tile compiled for AVX-512 (MB_TARGET_AVX512_VNNI above), with the
// 512-bit code sums (block_lanes_z) for the types that have them.
template <class K>
MB_TARGET_AVX512_VNNI void rows_k_vnni512(int64_t k, const uint8_t* a, size_t a_stride, const void* const* b, int nt,
                                          float* out) {
    MB_K_TILE_BODY((block_lanes_z<K>))
}
#undef MB_K_TILE_BODY

}  // namespace

// quantize_q8_K's codes for a finite block whose scale -127 / vmax is finite: every |iscale * x| is
// then at most 127 (times a rounding or two), where nearest's trick and vcvtps2dq (round to nearest
// even) agree. Other blocks go through the scalar quantizer.
MB_TARGET_AVX2 bool quantize_q8_K_act_block_avx2(const float* x, block_q8_K* y) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i exp_mask = _mm256_set1_epi32(0x7F800000);
    __m256 amax = _mm256_setzero_ps();
    __m256i nonfinite = _mm256_setzero_si256();
    for (int j = 0; j < kQK; j += 8) {
        const __m256 v = _mm256_loadu_ps(x + j);
        amax = _mm256_max_ps(amax, _mm256_and_ps(v, abs_mask));
        const __m256i e = _mm256_and_si256(_mm256_castps_si256(v), exp_mask);
        nonfinite = _mm256_or_si256(nonfinite, _mm256_cmpeq_epi32(e, exp_mask));
    }
    if (!_mm256_testz_si256(nonfinite, nonfinite)) return false;
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float am = _mm_cvtss_f32(m4);
    if (!(am != 0)) return false;  // the scalar quantizer writes the zero block
    // The first element of largest magnitude gives the sign (the scalar scan keeps the first).
    const __m256 amv = _mm256_set1_ps(am);
    float vmax = 0;
    for (int j = 0; j < kQK; j += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), amv,
                                                         _CMP_EQ_OQ));
        if (hit != 0) {
            vmax = x[j + __builtin_ctz(unsigned(hit))];
            break;
        }
    }
    const float iscale = -127.0f / vmax;
    if (!(std::fabs(iscale) <= 3.0e38f)) return false;
    const __m256 is = _mm256_set1_ps(iscale);
    const __m256i hi = _mm256_set1_epi32(127);
    for (int j = 0; j < kQK; j += 32) {
        __m256i c[4];
        for (int u = 0; u < 4; ++u) {
            c[u] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + j + 8 * u))), hi);
        }
        // Codes in [-127, 127]: the saturating packs keep them; the permute undoes their lane order.
        const __m256i w01 = _mm256_packs_epi32(c[0], c[1]);
        const __m256i w23 = _mm256_packs_epi32(c[2], c[3]);
        const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23),
                                                      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y->qs + j), b);
        // bsums of the two 16-code halves.
        const __m256i s16 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), b), _mm256_set1_epi16(1));
        // s16: 8 int32 sums of 4 codes; lanes 0..3 the first 16 codes, 4..7 the next.
        __m128i t = _mm_hadd_epi32(_mm256_castsi256_si128(s16), _mm256_extracti128_si256(s16, 1));
        t = _mm_hadd_epi32(t, t);
        y->bsums[j / 16] = int16_t(_mm_cvtsi128_si32(t));
        y->bsums[j / 16 + 1] = int16_t(_mm_extract_epi32(t, 1));
    }
    y->d = 1 / iscale;
    return true;
}

VecDotKFn vec_dot_k_avx2_fn(Type t) {
    switch (t) {
        case Type::Q2_K: return dot_k<Q2>;
        case Type::Q3_K: return dot_k<Q3>;
        case Type::Q4_K: return dot_k<Q4>;
        case Type::Q5_K: return dot_k<Q5>;
        case Type::Q6_K: return dot_k<Q6>;
        case Type::IQ4_XS: return dot_k<IQ4XS>;
        default: return nullptr;
    }
}

// The tile of type t from Tile<K>::fn (one of the forms' instantiations).
template <template <class> class Tile>
VecDotRowsFn rows_k_fn(Type t) {
    static_assert(kVecDotRows == 4, "rows_k computes four rows");
    switch (t) {
        case Type::Q2_K: return Tile<Q2>::fn;
        case Type::Q3_K: return Tile<Q3>::fn;
        case Type::Q4_K: return Tile<Q4>::fn;
        case Type::Q5_K: return Tile<Q5>::fn;
        case Type::Q6_K: return Tile<Q6>::fn;
        case Type::IQ4_XS: return Tile<IQ4XS>::fn;
        default: return nullptr;
    }
}

template <class K>
struct TileAvx2 {
    static constexpr VecDotRowsFn fn = rows_k<K, DotAvx2>;
};
template <class K>
struct TileAvxVnni {
    static constexpr VecDotRowsFn fn = rows_k<K, DotAvxVnni>;
};
template <class K>
struct TileVnni512 {
    static constexpr VecDotRowsFn fn = rows_k_vnni512<K>;
};

VecDotRowsFn vec_dot_k_rows_avx2_fn(Type t, ByteDot form) {
    switch (form) {
        case ByteDot::Avx512Vnni: return rows_k_fn<TileVnni512>(t);
        case ByteDot::AvxVnni: return rows_k_fn<TileAvxVnni>(t);
        case ByteDot::Avx2: break;
    }
    return rows_k_fn<TileAvx2>(t);
}

VecDotRowsFn vec_dot_k_rows_avx2_fn(Type t) { return vec_dot_k_rows_avx2_fn(t, byte_dot_in_use()); }

#else

VecDotKFn vec_dot_k_avx2_fn(Type) { return nullptr; }
VecDotRowsFn vec_dot_k_rows_avx2_fn(Type, ByteDot) { return nullptr; }
VecDotRowsFn vec_dot_k_rows_avx2_fn(Type) { return nullptr; }
bool quantize_q8_K_act_block_avx2(const float*, block_q8_K*) { return false; }

#endif

}  // namespace mb
