// Dot products of kVecDotRows consecutive weight rows with one prepared activation row (AVX2). A
// matrix-vector product with short rows (K of a few hundred) spends as much time per row on call,
// horizontal sum and store as on the multiply-adds; doing four rows per call shares the activation
// loads and scales and reduces four accumulators with one transposing sum.
#include "cpu/kernels/vec_dot.h"

#include "core/fp16.h"
#include "cpu/kernels/quant_blocks_avx2.h"
#include "cpu/kernels/simd.h"

namespace mb {

namespace {

#if defined(MB_SIMD_X86)

static_assert(kVecDotRows == 4, "the kernels below keep four rows in registers");

constexpr int64_t kBlock = 32;

// (sum of a0, sum of a1, sum of a2, sum of a3).
MB_TARGET_AVX2 inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

MB_TARGET_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
MB_TARGET_AVX2 inline __m256 load8(const uint16_t* p) { return load_f16x8(p); }
inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) { return fp16_to_fp32(*p); }

struct Bf16 {
    uint16_t bits;
};
MB_TARGET_AVX2 inline __m256 load8(const Bf16* p) { return load_bf16x8(&p->bits); }
inline float load1(const Bf16* p) { return bf16_to_fp32(p->bits); }

// Float weights (TA: float, f16 as uint16_t, Bf16) times float or f16 activations (TB). Two
// accumulators per row: eight independent FMA chains.
template <typename TA, typename TB>
MB_TARGET_AVX2 void dot_rows_float(int64_t k, const uint8_t* a, size_t stride, const void* vb, float* out) {
    const TB* b = static_cast<const TB*>(vb);
    const TA* r0 = reinterpret_cast<const TA*>(a);
    const TA* r1 = reinterpret_cast<const TA*>(a + stride);
    const TA* r2 = reinterpret_cast<const TA*>(a + 2 * stride);
    const TA* r3 = reinterpret_cast<const TA*>(a + 3 * stride);
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        const __m256 b0 = load8(b + i), b1 = load8(b + i + 8);
        c00 = _mm256_fmadd_ps(load8(r0 + i), b0, c00);
        c01 = _mm256_fmadd_ps(load8(r0 + i + 8), b1, c01);
        c10 = _mm256_fmadd_ps(load8(r1 + i), b0, c10);
        c11 = _mm256_fmadd_ps(load8(r1 + i + 8), b1, c11);
        c20 = _mm256_fmadd_ps(load8(r2 + i), b0, c20);
        c21 = _mm256_fmadd_ps(load8(r2 + i + 8), b1, c21);
        c30 = _mm256_fmadd_ps(load8(r3 + i), b0, c30);
        c31 = _mm256_fmadd_ps(load8(r3 + i + 8), b1, c31);
    }
    for (; i + 8 <= k; i += 8) {
        const __m256 b0 = load8(b + i);
        c00 = _mm256_fmadd_ps(load8(r0 + i), b0, c00);
        c10 = _mm256_fmadd_ps(load8(r1 + i), b0, c10);
        c20 = _mm256_fmadd_ps(load8(r2 + i), b0, c20);
        c30 = _mm256_fmadd_ps(load8(r3 + i), b0, c30);
    }
    __m128 s = hsum4(_mm256_add_ps(c00, c01), _mm256_add_ps(c10, c11), _mm256_add_ps(c20, c21),
                     _mm256_add_ps(c30, c31));
    alignas(16) float tail[4] = {};
    for (; i < k; ++i) {
        const float bi = load1(b + i);
        tail[0] += load1(r0 + i) * bi;
        tail[1] += load1(r1 + i) * bi;
        tail[2] += load1(r2 + i) * bi;
        tail[3] += load1(r3 + i) * bi;
    }
    _mm_storeu_ps(out, _mm_add_ps(s, _mm_load_ps(tail)));
}

// The 4- and 5-bit types: unsigned codes c times the activation codes q, scaled by d*D per block.
// q4_0 and q5_0 values are d * (c - kZero): kZero * q is subtracted per lane in integers (computed once
// per activation block for the four rows). q4_1 and q5_1 values are d * c + m: the m * S term (S the
// activation block's sum, BlockQ8Act::s) is summed per row apart.
template <typename Block, int kZero>
MB_TARGET_AVX2 void dot_rows_quant(int64_t k, const uint8_t* a, size_t stride, const void* vb, float* out) {
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    const Block* rows[4];
    for (int r = 0; r < 4; ++r) rows[r] = reinterpret_cast<const Block*>(a + size_t(r) * stride);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float off[4] = {};
    for (int64_t i = 0; i < k / kBlock; ++i) {
        const __m256i bq = load_codes32(b[i].qs);
        const float bd = b[i].d;
        const __m256i zq = kZero != 0 ? dot_u8_i8(_mm256_set1_epi8(kZero), bq) : _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            const Block& x = rows[r][i];
            const float d = _cvtsh_ss(x.d);
            __m256i p = dot_u8_i8(block_codes(x), bq);
            if (kZero != 0) {
                p = _mm256_sub_epi32(p, zq);
            } else {
                off[r] += block_offset(x, d) * b[i].s;
            }
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * bd), acc[r]);
        }
    }
    const __m128 s = hsum4(acc[0], acc[1], acc[2], acc[3]);
    _mm_storeu_ps(out, _mm_add_ps(s, _mm_loadu_ps(off)));
}

// q8_0: signed codes; |a| times b with a's sign moved onto b (as dot_q8_0_avx2 does).
MB_TARGET_AVX2 void dot_rows_q8_0(int64_t k, const uint8_t* a, size_t stride, const void* vb, float* out) {
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    const BlockQ8_0* rows[4];
    for (int r = 0; r < 4; ++r) rows[r] = reinterpret_cast<const BlockQ8_0*>(a + size_t(r) * stride);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < k / kBlock; ++i) {
        const __m256i bq = load_codes32(b[i].qs);
        const float bd = b[i].d;
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            const BlockQ8_0& x = rows[r][i];
            const __m256i q = load_codes32(x.qs);
            const __m256i p = dot_u8_i8(_mm256_sign_epi8(q, q), _mm256_sign_epi8(bq, q));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(x.d) * bd), acc[r]);
        }
    }
    _mm_storeu_ps(out, hsum4(acc[0], acc[1], acc[2], acc[3]));
}

#endif  // MB_SIMD_X86

}  // namespace

VecDotRowsFn vec_dot_rows_fn(Type a, VecType vt) {
#if defined(MB_SIMD_X86)
    if (!cpu_has_avx2_fma_f16c()) {
        return nullptr;
    }
    if (vt == VecType::F32) {
        switch (a) {
            case Type::F32: return dot_rows_float<float, float>;
            case Type::F16: return dot_rows_float<uint16_t, float>;
            case Type::BF16: return dot_rows_float<Bf16, float>;
            default: return nullptr;
        }
    }
    if (vt == VecType::F16) {
        return a == Type::F16 ? dot_rows_float<uint16_t, uint16_t> : nullptr;
    }
    switch (a) {
        case Type::Q4_0: return dot_rows_quant<BlockQ4_0, 8>;
        case Type::Q4_1: return dot_rows_quant<BlockQ4_1, 0>;
        case Type::Q5_0: return dot_rows_quant<BlockQ5_0, 16>;
        case Type::Q5_1: return dot_rows_quant<BlockQ5_1, 0>;
        case Type::Q8_0: return dot_rows_q8_0;
        default: return nullptr;
    }
#else
    (void)a;
    (void)vt;
    return nullptr;
#endif
}

}  // namespace mb
