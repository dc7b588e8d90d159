// FLASH_ATTN_EXT's row-path products on AVX-512 and AVX2 (flash_attn_row.h).
#include "cpu/kernels/flash_attn_row.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "core/fp16.h"
#include "core/types.h"
#include "cpu/kernels/int8_dot_x86.h"
#include "cpu/kernels/simd.h"

// GCC 12's avx512fintrin.h (PR 105593, fixed in GCC 13) fills undefined lanes from a self-initialised
// variable, which -Wmaybe-uninitialized reports once inlined into the AVX-512 steps below.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace mb {

namespace {

#if defined(MB_SIMD_X86)

// How many keys ahead the passes prefetch. Measured on Zen 4 at 2 threads, four layers' caches of 20
// sequences x 448 positions x 6 heads of 64 (f16), 224 positions read, one query per sequence and
// head (benchmarks/ops.py --only attn_row; noisy, best of 30 per build, two builds each): 8 keys
// 1.32 ms, 16 keys 0.74-0.94 ms, 32 keys 1.13-1.48 ms, 64 keys 1.05 ms; the element-by-element loops
// this replaced: 3.9 ms.
constexpr int64_t kRowsAhead = 16;

inline void prefetch_row(const uint8_t* row, size_t bytes, int hint) {
    for (size_t off = 0; off < bytes; off += 64) {
        if (hint == 0) {
            _mm_prefetch(reinterpret_cast<const char*>(row + off), _MM_HINT_T0);
        } else {
            _mm_prefetch(reinterpret_cast<const char*>(row + off), _MM_HINT_T1);
        }
    }
}

inline float element(const float* p) { return *p; }
inline float element(const uint16_t* p) { return fp16_to_fp32(*p); }

MB_TARGET_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
MB_TARGET_AVX2 inline __m256 load8(const uint16_t* p) { return load_f16x8(p); }
MB_TARGET_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
MB_TARGET_AVX512 inline __m512 load16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
MB_TARGET_AVX2 inline __m256 halves8(__m256 v) { return v; }
// The two 256-bit halves of v added (AVX-512F only: the extract forms are DQ).
MB_TARGET_AVX512 inline __m256 halves16(__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, 0xEE)));
}

template <typename T>
const T* row_at(const uint8_t* base, size_t stride, int64_t j) {
    return reinterpret_cast<const T*>(base + size_t(j) * stride);
}

// dot(q, row) over the elements [from, d), one by one (the tails past the vector width).
template <typename T>
float dot_tail(const float* q, const T* row, int64_t from, int64_t d) {
    float sum = 0.0f;
    for (int64_t i = from; i < d; ++i) sum += q[i] * element(row + i);
    return sum;
}

// The key pass, W lanes per vector (16: AVX-512, 8: AVX2), in one body per width: four keys per
// step, each a chain of W-wide FMAs over d, their four sums reduced together (lane_sums4).
#define MB_ROW_SCORES(NAME, TARGET, VEC, W, LOAD, ZERO, FMA, HALVES)                                          \
    template <typename T>                                                                                      \
    TARGET void NAME(const float* q, int64_t d, const uint8_t* k, size_t ks, int64_t n, const uint8_t* v,      \
                     size_t vs, size_t v_bytes, float* s) {                                                    \
        const int64_t dw = d / W * W;                                                                          \
        const size_t k_bytes = size_t(d) * sizeof(T);                                                          \
        int64_t j = 0;                                                                                         \
        for (; j + 4 <= n; j += 4) {                                                                           \
            for (int r = 0; r < 4; ++r) {                                                                      \
                const int64_t ahead = std::min(n - 1, j + kRowsAhead + r);                                     \
                prefetch_row(k + size_t(ahead) * ks, k_bytes, 0);                                              \
                prefetch_row(v + size_t(ahead) * vs, v_bytes, 1);                                              \
            }                                                                                                  \
            const T* rows[4] = {row_at<T>(k, ks, j), row_at<T>(k, ks, j + 1), row_at<T>(k, ks, j + 2),       \
                                row_at<T>(k, ks, j + 3)};                                                      \
            VEC acc[4] = {ZERO(), ZERO(), ZERO(), ZERO()};                                                     \
            for (int64_t i = 0; i < dw; i += W) {                                                              \
                const VEC qv = LOAD(q + i);                                                                    \
                for (int r = 0; r < 4; ++r) acc[r] = FMA(LOAD(rows[r] + i), qv, acc[r]);                       \
            }                                                                                                  \
            alignas(16) float tail[4];                                                                         \
            for (int r = 0; r < 4; ++r) tail[r] = dot_tail(q, rows[r], dw, d);                                 \
            const __m128 sums = lane_sums4(HALVES(acc[0]), HALVES(acc[1]), HALVES(acc[2]), HALVES(acc[3]));    \
            _mm_storeu_ps(s + j, _mm_add_ps(sums, _mm_load_ps(tail)));                                         \
        }                                                                                                      \
        for (; j < n; ++j) {                                                                                   \
            const T* row = row_at<T>(k, ks, j);                                                                \
            VEC acc = ZERO();                                                                                  \
            for (int64_t i = 0; i < dw; i += W) acc = FMA(LOAD(row + i), LOAD(q + i), acc);                    \
            const __m256 h = HALVES(acc);                                                                      \
            s[j] = _mm_cvtss_f32(lane_sums4(h, h, h, h)) + dot_tail(q, row, dw, d);                            \
        }                                                                                                      \
    }

// The value pass over the NC vectors of columns [c, c + NC W): NC accumulators in registers, each
// key's weight broadcast once.
#define MB_ROW_VALUES(NAME, TARGET, VEC, W, LOAD, ZERO, FMA, SET1, STORE)                                     \
    template <typename T, int NC>                                                                              \
    TARGET void NAME(const float* w, int64_t n, const uint8_t* v, size_t vs, int64_t c, float* o) {            \
        VEC acc[NC];                                                                                           \
        for (int u = 0; u < NC; ++u) acc[u] = ZERO();                                                          \
        for (int64_t j = 0; j < n; ++j) {                                                                      \
            if (w[j] == 0.0f) continue;                                                                        \
            prefetch_row(v + size_t(std::min(n - 1, j + kRowsAhead)) * vs + c * sizeof(T), NC * W * sizeof(T), \
                         0);                                                                                   \
            const T* row = row_at<T>(v, vs, j) + c;                                                            \
            const VEC wv = SET1(w[j]);                                                                         \
            for (int u = 0; u < NC; ++u) acc[u] = FMA(wv, LOAD(row + u * W), acc[u]);                         \
        }                                                                                                      \
        for (int u = 0; u < NC; ++u) STORE(o + c + u * W, acc[u]);                                             \
    }

MB_ROW_SCORES(scores_avx512, MB_TARGET_AVX512, __m512, 16, load16, _mm512_setzero_ps, _mm512_fmadd_ps, halves16)
MB_ROW_SCORES(scores_avx2, MB_TARGET_AVX2, __m256, 8, load8, _mm256_setzero_ps, _mm256_fmadd_ps, halves8)
MB_ROW_VALUES(values_avx512, MB_TARGET_AVX512, __m512, 16, load16, _mm512_setzero_ps, _mm512_fmadd_ps,
              _mm512_set1_ps, _mm512_storeu_ps)
MB_ROW_VALUES(values_avx2, MB_TARGET_AVX2, __m256, 8, load8, _mm256_setzero_ps, _mm256_fmadd_ps, _mm256_set1_ps,
              _mm256_storeu_ps)

#undef MB_ROW_SCORES
#undef MB_ROW_VALUES

// Every column of the value pass: blocks of four vectors (64 floats on AVX-512, 32 on AVX2), then the
// remaining whole vectors, then the columns past the last vector one by one.
template <typename T>
void values(const float* w, int64_t n, const uint8_t* v, size_t vs, int64_t dv, float* o) {
    const bool wide = cpu_has_avx512f();
    const int64_t width = wide ? 16 : 8;
    int64_t c = 0;
    for (; c + 4 * width <= dv; c += 4 * width) {
        wide ? values_avx512<T, 4>(w, n, v, vs, c, o) : values_avx2<T, 4>(w, n, v, vs, c, o);
    }
    for (; c + width <= dv; c += width) {
        wide ? values_avx512<T, 1>(w, n, v, vs, c, o) : values_avx2<T, 1>(w, n, v, vs, c, o);
    }
    for (; c < dv; ++c) {
        float sum = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
            if (w[j] != 0.0f) sum += w[j] * element(row_at<T>(v, vs, j) + c);
        }
        o[c] = sum;
    }
}

#endif  // MB_SIMD_X86

bool row_type_ok(const Tensor& t) {
    return (t.type == Type::F32 && t.nb[0] == sizeof(float)) || (t.type == Type::F16 && t.nb[0] == sizeof(uint16_t));
}

}  // namespace

bool flash_attn_row_applies(const Tensor& k, const Tensor& v) {
#if defined(MB_SIMD_X86)
    return cpu_has_avx2_fma_f16c() && row_type_ok(k) && row_type_ok(v);
#else
    (void)k, (void)v;
    return false;
#endif
}

void attn_row_scores(const float* q, int64_t d, const uint8_t* k, size_t k_stride, Type k_type, int64_t n,
                     const uint8_t* v, size_t v_stride, size_t v_bytes, float* s) {
#if defined(MB_SIMD_X86)
    const bool wide = cpu_has_avx512f();
    if (k_type == Type::F16) {
        wide ? scores_avx512<uint16_t>(q, d, k, k_stride, n, v, v_stride, v_bytes, s)
             : scores_avx2<uint16_t>(q, d, k, k_stride, n, v, v_stride, v_bytes, s);
        return;
    }
    if (k_type == Type::F32) {
        wide ? scores_avx512<float>(q, d, k, k_stride, n, v, v_stride, v_bytes, s)
             : scores_avx2<float>(q, d, k, k_stride, n, v, v_stride, v_bytes, s);
        return;
    }
#else
    (void)q, (void)d, (void)k, (void)k_stride, (void)n, (void)v, (void)v_stride, (void)v_bytes, (void)s;
#endif
    fail<InvalidArgumentError>("attn_row_scores", "key type ", type_traits(k_type).name,
                               " is not one of these kernels' (f32, f16)");
}

void attn_row_values(const float* w, int64_t n, const uint8_t* v, size_t v_stride, Type v_type, int64_t dv,
                     float* o) {
#if defined(MB_SIMD_X86)
    if (v_type == Type::F16) return values<uint16_t>(w, n, v, v_stride, dv, o);
    if (v_type == Type::F32) return values<float>(w, n, v, v_stride, dv, o);
#else
    (void)w, (void)n, (void)v, (void)v_stride, (void)dv, (void)o;
#endif
    fail<InvalidArgumentError>("attn_row_values", "value type ", type_traits(v_type).name,
                               " is not one of these kernels' (f32, f16)");
}

}  // namespace mb
