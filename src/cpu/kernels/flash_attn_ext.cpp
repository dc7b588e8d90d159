// FLASH_ATTN_EXT: softmax(q.k^T * scale [softcapped] + slope*mask) . v without materialising the
// score matrix. Each work item is a block of up to kQB query rows of one head; it walks the keys in
// tiles of kKB, the K tile (any type, as f32, transposed) and the V tile (as f32) in scratch, and
// runs two small register-blocked products (scores = Q.Kt, O += P.V; AVX-512, AVX2 or portable)
// around an online softmax (running max and denominator per row, O rescaled when the max grows).
// When a head's converted tiles fit kHeadScratchBytes (Whisper's encoder: 1500 keys of 64, 768 KB)
// they are converted once per (head, thread) and serve every query block of that head the thread
// takes; otherwise each query block converts its tiles one at a time.
//
// A few query rows (a decoder step: one query per sequence and head) take attend_row instead: the
// tiles' conversions and transposes would serve one row each, so each row dots its query with the
// key rows as stored, takes one softmax over all its keys, and adds up the value rows it weighs
// (f32 and f16 rows on AVX2 and AVX-512 hosts: flash_attn_row.h, four keys a step, prefetched).
//
// bf16 keys and values: both products take bf16 operands, as ggml's CPU path rounds the query to the
// keys' type: the scaled query rows and the softmax weights are rounded to bf16 (nearest even), the
// products and sums are f32. On AVX512_BF16 hosts the tiled path keeps its tiles as bf16 pairs and
// multiplies with vdpbf16ps (gemm_bf16.h: twice the products per instruction of the f32 tiles);
// elsewhere the same rounded operands go through the f32 products.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/errors.h"
#include "core/fp16.h"
#include "cpu/kernels/flash_attn_row.h"
#include "cpu/kernels/gemm_bf16.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

// GCC 12's avx512fintrin.h (PR 105593, fixed in GCC 13) fills undefined lanes from a self-initialised
// variable, which -Wmaybe-uninitialized (and, for _mm512_reduce_*_ps, -Wuninitialized) reports once
// inlined into the AVX-512 row steps below.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace mb {

namespace {

// Query rows per work item, at most: the K/V tile conversions are shared by this many rows. A multiple
// of 16 (the scratch layout).
constexpr int64_t kQB = 128;
constexpr int64_t kKB = 256;   // keys per tile
constexpr int64_t kCols = 16;  // column width of the product kernels (two AVX2 registers)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Up to this many query rows, each row is a work item of attend_row (when its scores fit the
// scratch's score block, kQB * kKB floats). Measured on Zen 3 in Whisper tiny's decoder (6 heads of
// 64, 64 cached keys, 8 and 40 sequences of one query): the tiled path spent most of its time
// converting and transposing tiles that served a single row.
constexpr int64_t kFewRows = 4;
// A head's K and V tiles, converted to f32, are kept for all its query blocks when they take at most
// this many bytes per thread (L2-sized: the query blocks stream them from there).
constexpr int64_t kHeadScratchBytes = int64_t(1) << 20;

struct Dims {
    int64_t d, dv, nq, h, b, nkv, hkv, bkv;
    int64_t dvp;    // dv padded to kCols
    int64_t slots;  // K/V tiles held in scratch: every tile of a head, or one
    bool bf16;      // bf16 keys and values: the query and the softmax weights are rounded to bf16
    bool pairs;     // ... and the tiled path multiplies bf16 pairs (gemm_bf16_pairs on vdpbf16ps)
    int64_t dpair;  // pairs of a query or key row, ceil(d / 2)
};

// Floats of one K tile (transposed, d x kKB) and one V tile (kKB x dvp).
int64_t kt_floats(int64_t d) { return round_up(d * kKB, 16); }
int64_t v_floats(int64_t dvp) { return kKB * dvp; }

Dims dims_of(const Tensor& dst) {
    const Tensor& q = *dst.src[0];
    const Tensor& k = *dst.src[1];
    const Tensor& v = *dst.src[2];
    Dims g{q.ne[0], v.ne[0], q.ne[1], q.ne[2], q.ne[3], k.ne[1], k.ne[2], k.ne[3], round_up(v.ne[0], kCols), 1,
           false, false, (q.ne[0] + 1) / 2};
    g.bf16 = k.type == Type::BF16 && v.type == Type::BF16;
    g.pairs = g.bf16 && gemm_bf16_native();
    const int64_t tiles = (g.nkv + kKB - 1) / kKB;
    if (tiles * (kt_floats(g.d) + v_floats(g.dvp)) * int64_t(sizeof(float)) <= kHeadScratchBytes) g.slots = tiles;
    return g;
}

// Per-thread scratch, in floats, laid out as below (each part a multiple of 16 floats = 64 bytes).
struct Scratch {
    float *q, *kt, *v, *s, *o, *m, *l, *row;
};

size_t scratch_floats(const Dims& g) {
    const int64_t rowlen = std::max({g.d, 2 * round_up(g.dv, 16), kKB});  // two value rows: convert_tile_pairs
    return size_t(round_up(kQB * g.d, 16) + g.slots * (kt_floats(g.d) + v_floats(g.dvp)) + kQB * kKB + kQB * g.dvp +
                  2 * kQB + round_up(rowlen, 16));
}

Scratch carve(float* base, const Dims& g) {
    Scratch s;
    s.q = base;
    s.kt = s.q + round_up(kQB * g.d, 16);
    s.v = s.kt + g.slots * kt_floats(g.d);
    s.s = s.v + g.slots * v_floats(g.dvp);
    s.o = s.s + kQB * kKB;
    s.m = s.o + kQB * g.dvp;
    s.l = s.m + kQB;
    s.row = s.l + kQB;
    return s;
}

// C[rows x cols] += A[rows x kdim] . B[kdim x cols], all row-major; cols a multiple of kCols.
void gemm_portable(int64_t rows, int64_t cols, int64_t kdim, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float* c, int64_t ldc) {
    for (int64_t i = 0; i < rows; ++i) {
        float* ci = c + i * ldc;
        for (int64_t k = 0; k < kdim; ++k) {
            const float av = a[i * lda + k];
            const float* bk = b + k * ldb;
            for (int64_t j = 0; j < cols; ++j) ci[j] += av * bk[j];
        }
    }
}

#if defined(MB_VEC_AVX2)
template <int R>
MB_AVX2 inline void tile_avx2(int64_t kdim, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                              int64_t ldc) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) {
        acc[r][0] = _mm256_loadu_ps(c + r * ldc);
        acc[r][1] = _mm256_loadu_ps(c + r * ldc + 8);
    }
    for (int64_t k = 0; k < kdim; ++k) {
        const __m256 b0 = _mm256_loadu_ps(b + k * ldb);
        const __m256 b1 = _mm256_loadu_ps(b + k * ldb + 8);
        for (int r = 0; r < R; ++r) {
            const __m256 av = _mm256_broadcast_ss(a + r * lda + k);
            acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; ++r) {
        _mm256_storeu_ps(c + r * ldc, acc[r][0]);
        _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
    }
}

MB_AVX2 void gemm_avx2(int64_t rows, int64_t cols, int64_t kdim, const float* a, int64_t lda, const float* b,
                       int64_t ldb, float* c, int64_t ldc) {
    for (int64_t j = 0; j < cols; j += kCols) {
        int64_t i = 0;
        for (; i + 6 <= rows; i += 6) tile_avx2<6>(kdim, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc);
        const float* ai = a + i * lda;
        float* ci = c + i * ldc + j;
        switch (rows - i) {
            case 5: tile_avx2<5>(kdim, ai, lda, b + j, ldb, ci, ldc); break;
            case 4: tile_avx2<4>(kdim, ai, lda, b + j, ldb, ci, ldc); break;
            case 3: tile_avx2<3>(kdim, ai, lda, b + j, ldb, ci, ldc); break;
            case 2: tile_avx2<2>(kdim, ai, lda, b + j, ldb, ci, ldc); break;
            case 1: tile_avx2<1>(kdim, ai, lda, b + j, ldb, ci, ldc); break;
            default: break;
        }
    }
}

// AVX-512: tiles of R rows by C registers of 16 columns, R x C accumulators (at most 16 of the 32).
// Acc: C += A.B; otherwise C = A.B (C's old contents are not read, so need no zeroing).
template <int R, int C, bool Acc>
MB_TARGET_AVX512 inline void tile_avx512(int64_t kdim, const float* a, int64_t lda, const float* b, int64_t ldb,
                                         float* c, int64_t ldc) {
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r) {
        for (int q = 0; q < C; ++q) acc[r][q] = Acc ? _mm512_loadu_ps(c + r * ldc + 16 * q) : _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kdim; ++k) {
        __m512 bv[C];
        for (int q = 0; q < C; ++q) bv[q] = _mm512_loadu_ps(b + k * ldb + 16 * q);
        for (int r = 0; r < R; ++r) {
            const __m512 av = _mm512_set1_ps(a[r * lda + k]);
            for (int q = 0; q < C; ++q) acc[r][q] = _mm512_fmadd_ps(av, bv[q], acc[r][q]);
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int q = 0; q < C; ++q) _mm512_storeu_ps(c + r * ldc + 16 * q, acc[r][q]);
    }
}

// The columns [j, j + 16 C) of every row, 8 rows at a time.
template <int C, bool Acc>
MB_TARGET_AVX512 void rows_avx512(int64_t rows, int64_t kdim, const float* a, int64_t lda, const float* b, int64_t ldb,
                                  float* c, int64_t ldc) {
    int64_t i = 0;
    for (; i + 8 <= rows; i += 8) tile_avx512<8, C, Acc>(kdim, a + i * lda, lda, b, ldb, c + i * ldc, ldc);
    const float* ai = a + i * lda;
    float* ci = c + i * ldc;
    switch (rows - i) {
        case 7: tile_avx512<7, C, Acc>(kdim, ai, lda, b, ldb, ci, ldc); break;
        case 6: tile_avx512<6, C, Acc>(kdim, ai, lda, b, ldb, ci, ldc); break;
        case 5: tile_avx512<5, C, Acc>(kdim, ai, lda, b, ldb, ci, ldc); break;
        case 4: tile_avx512<4, C, Acc>(kdim, ai, lda, b, ldb, ci, ldc); break;
        case 3: tile_avx512<3, C, Acc>(kdim, ai, lda, b, ldb, ci, ldc); break;
        case 2: tile_avx512<2, C, Acc>(kdim, ai, lda, b, ldb, ci, ldc); break;
        case 1: tile_avx512<1, C, Acc>(kdim, ai, lda, b, ldb, ci, ldc); break;
        default: break;
    }
}

// The online-softmax row steps of the tiled path over n, a multiple of 16 (kCols).
MB_TARGET_AVX512 float max_avx512(const float* s, int64_t n) {
    __m512 m0 = _mm512_set1_ps(kNegInf);
    __m512 m1 = m0;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(s + j));
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(s + j + 16));
    }
    if (j < n) m0 = _mm512_max_ps(m0, _mm512_loadu_ps(s + j));
    return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

MB_TARGET_AVX512 float exp_sum_avx512(float* s, float m, int64_t n) {
    const __m512 mv = _mm512_set1_ps(m);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        const __m512 e = vec::exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), mv));
        _mm512_storeu_ps(s + j, e);
        acc = _mm512_add_ps(acc, e);
    }
    return _mm512_reduce_add_ps(acc);
}

MB_TARGET_AVX512 void scale_avx512(float* x, float f, int64_t n) {
    const __m512 fv = _mm512_set1_ps(f);
    for (int64_t j = 0; j < n; j += 16) _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), fv));
}

template <bool Acc>
MB_TARGET_AVX512 void gemm_avx512(int64_t rows, int64_t cols, int64_t kdim, const float* a, int64_t lda,
                                  const float* b, int64_t ldb, float* c, int64_t ldc) {
    int64_t j = 0;
    for (; j + 2 * kCols <= cols; j += 2 * kCols) rows_avx512<2, Acc>(rows, kdim, a, lda, b + j, ldb, c + j, ldc);
    if (j < cols) rows_avx512<1, Acc>(rows, kdim, a, lda, b + j, ldb, c + j, ldc);
}

// Hints the n floats at p (a multiple of 16, 64-byte aligned) into L2 ahead of use.
MB_TARGET_AVX512 void prefetch_l2(const float* p, int64_t n) {
    for (int64_t j = 0; j < n; j += 16) _mm_prefetch(reinterpret_cast<const char*>(p + j), _MM_HINT_T1);
}

MB_AVX2 float max_avx2(const float* s, int64_t n) {
    __m256 m = _mm256_set1_ps(kNegInf);
    for (int64_t j = 0; j < n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + j));
    return vec::hmax8(m);
}

MB_AVX2 void scale_avx2(float* x, float f, int64_t n) {
    const __m256 fv = _mm256_set1_ps(f);
    for (int64_t j = 0; j < n; j += 8) _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), fv));
}

// Row update of the online softmax over n (a multiple of 8) scores: p = exp(s - m); returns sum(p).
MB_AVX2 float exp_sum_avx2(float* s, float m, int64_t n) {
    const __m256 mv = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8) {
        const __m256 e = vec::exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
        _mm256_storeu_ps(s + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    return vec::hsum8(acc);
}

// A key or value row's elements as floats, 8 at a time or one: f32 rows as stored, f16 rows converted.
MB_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
MB_AVX2 inline __m256 load8(const uint16_t* p) { return load_f16x8(p); }
inline float element(float x) { return x; }
inline float element(uint16_t x) { return fp16_to_fp32(x); }

// dot(a, b) over n elements of an f32 or f16 row b, in two accumulator chains.
template <typename T>
MB_AVX2 float dot_avx2(const float* a, const T* b, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps();
    __m256 acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load8(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc0);
    float sum = vec::hsum8(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) sum += a[i] * element(b[i]);
    return sum;
}

// y += f * x over n elements of an f32 or f16 row x.
template <typename T>
MB_AVX2 void axpy_avx2(float f, const T* x, float* y, int64_t n) {
    const __m256 fv = _mm256_set1_ps(f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(fv, load8(x + i), _mm256_loadu_ps(y + i)));
    }
    for (; i < n; ++i) y[i] += f * element(x[i]);
}

MB_AVX2 void softcap_avx2(float* s, float cap, int64_t n) {
    const __m256 inv = _mm256_set1_ps(1.0f / cap);
    const __m256 cv = _mm256_set1_ps(cap);
    for (int64_t j = 0; j < n; j += 8) {
        _mm256_storeu_ps(s + j, _mm256_mul_ps(cv, vec::tanh8(_mm256_mul_ps(_mm256_loadu_ps(s + j), inv))));
    }
}
#endif

void gemm(int64_t rows, int64_t cols, int64_t kdim, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc) {
#if defined(MB_VEC_AVX2)
    if (cpu_has_avx512f()) return gemm_avx512<true>(rows, cols, kdim, a, lda, b, ldb, c, ldc);
    if (vec::use_avx2()) return gemm_avx2(rows, cols, kdim, a, lda, b, ldb, c, ldc);
#endif
    gemm_portable(rows, cols, kdim, a, lda, b, ldb, c, ldc);
}

// C = A.B over rows x cols of C (ldc apart); C's other columns are left as they are. AVX-512 writes
// C without reading it; the other paths accumulate into C zeroed first.
void gemm_set(int64_t rows, int64_t cols, int64_t kdim, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc) {
#if defined(MB_VEC_AVX2)
    if (cpu_has_avx512f()) return gemm_avx512<false>(rows, cols, kdim, a, lda, b, ldb, c, ldc);
#endif
    for (int64_t i = 0; i < rows; ++i) std::fill(c + i * ldc, c + i * ldc + cols, 0.0f);
    gemm(rows, cols, kdim, a, lda, b, ldb, c, ldc);
}

// The next K/V tile of a head held in scratch, hinted into L2 a slice per query row while the
// current tile's softmax runs (AVX-512 hosts; elsewhere nothing).
void prefetch_slice(const float* p, int64_t n, int64_t i, int64_t nr) {
#if defined(MB_VEC_AVX2)
    if (cpu_has_avx512f()) {
        const int64_t per = round_up((n + nr - 1) / nr, 16);
        const int64_t a = std::min(n, i * per);
        const int64_t b = std::min(n, a + per);
        if (b > a) prefetch_l2(p + a, b - a);
    }
#else
    (void)p, (void)n, (void)i, (void)nr;
#endif
}

float exp_sum(float* s, float m, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return exp_sum_avx2(s, m, n);
#endif
    for (int64_t j = 0; j < n; ++j) s[j] = vec::exp(s[j] - m);
    return vec::sum_portable(s, n);
}

// Both over n, a multiple of 8 (padded tile widths).
float row_max(const float* s, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return max_avx2(s, n);
#endif
    float m = kNegInf;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
    return m;
}

void scale_row(float* x, float f, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return scale_avx2(x, f, n);
#endif
    for (int64_t j = 0; j < n; ++j) x[j] *= f;
}

// The tiled path's row steps over n, a multiple of 16: AVX-512 where the CPU has it.
float block_max(const float* s, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (cpu_has_avx512f()) return max_avx512(s, n);
#endif
    return row_max(s, n);
}

float block_exp_sum(float* s, float m, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (cpu_has_avx512f()) return exp_sum_avx512(s, m, n);
#endif
    return exp_sum(s, m, n);
}

void block_scale(float* x, float f, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (cpu_has_avx512f()) return scale_avx512(x, f, n);
#endif
    scale_row(x, f, n);
}

void softcap(float* s, float cap, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return softcap_avx2(s, cap, n);
#endif
    for (int64_t j = 0; j < n; ++j) s[j] = cap * vec::tanh(s[j] / cap);
}

float dot(const float* a, const float* b, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return dot_avx2(a, b, n);
#endif
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

void axpy(float f, const float* x, float* y, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return axpy_avx2(f, x, y, n);
#endif
    for (int64_t i = 0; i < n; ++i) y[i] += f * x[i];
}

bool kv_type_ok(Type t) { return t != Type::I32; }

// n elements of t's row at p as floats: the row itself (contiguous f32) or its conversion into buf.
const float* row_f32(const Tensor& t, const uint8_t* p, int64_t n, float* buf) {
    if (t.type == Type::F32 && t.nb[0] == sizeof(float)) return reinterpret_cast<const float*>(p);
    if (type_traits(t.type).is_quantized || t.nb[0] == type_traits(t.type).type_size) {
        dequantize_row(t.type, p, buf, n);
    } else {
        for (int64_t d = 0; d < n; ++d) dequantize_row(t.type, p + size_t(d) * t.nb[0], &buf[d], 1);
    }
    return buf;
}

// dot(a, the row of t at p) and y += f * (the row of t at p), n elements: f16 and f32 rows in place
// (AVX2), other rows through row_f32 into buf.
float dot_row(const float* a, const Tensor& t, const uint8_t* p, int64_t n, float* buf) {
#if defined(MB_VEC_AVX2)
    if (t.type == Type::F16 && t.nb[0] == 2 && vec::use_avx2()) {
        return dot_avx2(a, reinterpret_cast<const uint16_t*>(p), n);
    }
#endif
    return dot(a, row_f32(t, p, n, buf), n);
}

void axpy_row(float f, const Tensor& t, const uint8_t* p, float* y, int64_t n, float* buf) {
#if defined(MB_VEC_AVX2)
    if (t.type == Type::F16 && t.nb[0] == 2 && vec::use_avx2()) {
        return axpy_avx2(f, reinterpret_cast<const uint16_t*>(p), y, n);
    }
#endif
    axpy(f, row_f32(t, p, n, buf), y, n);
}

float round_bf16(float x) { return bf16_to_fp32(fp32_to_bf16(x)); }

// Two floats as one bf16 pair (lo in the low half), rounded to nearest even.
uint32_t bf16_pair(float lo, float hi) { return uint32_t(fp32_to_bf16(lo)) | uint32_t(fp32_to_bf16(hi)) << 16; }

// The scores of query row iq of head h, batch b fit the scratch's score block.
bool few_rows(const Dims& g) { return g.nq <= kFewRows && round_up(g.nkv, 8) <= kQB * kKB; }

// One work item of few_rows: query row iq of head h, batch b (see the file comment).
void attend_row(const Tensor& dst, const Dims& g, const Scratch& sc, int64_t h, int64_t b, int64_t iq) {
    const Tensor& q = *dst.src[0];
    const Tensor& k = *dst.src[1];
    const Tensor& v = *dst.src[2];
    const Tensor* mask = dst.src[3];
    const float scale = dst.param_f(0);
    const float cap = dst.param_f(2);
    const float slope = vec::alibi_slope(dst.param_f(1), h, g.h);
    const int64_t hk = h / (g.h / g.hkv);
    const int64_t bk = b / (g.b / g.bkv);
    const int64_t nkvp = round_up(g.nkv, 8);

    float* qs = sc.q;
    vec::gather_f32(at(q, 0, iq, h, b), q.nb[0], g.d, qs);
    for (int64_t d = 0; d < g.d; ++d) qs[d] = g.bf16 ? round_bf16(qs[d] * scale) : qs[d] * scale;
    float* s = sc.s;
    const bool rows_native = flash_attn_row_applies(k, v);
    if (rows_native) {
        attn_row_scores(qs, g.d, at(k, 0, 0, hk, bk), k.nb[1], k.type, g.nkv, at(v, 0, 0, hk, bk), v.nb[1],
                        size_t(g.dv) * type_traits(v.type).type_size, s);
    } else {
        for (int64_t j = 0; j < g.nkv; ++j) s[j] = dot_row(qs, k, at(k, 0, j, hk, bk), g.d, sc.row);
    }
    std::fill(s + g.nkv, s + nkvp, 0.0f);
    if (cap > 0.0f) softcap(s, cap, nkvp);
    if (mask) {
        for (int64_t j0 = 0; j0 < g.nkv; j0 += kKB) {
            const int64_t kb = std::min(kKB, g.nkv - j0);
            const float* m = row_f32(*mask, at(*mask, j0, iq, h % mask->ne[2], b % mask->ne[3]), kb, sc.row);
            for (int64_t j = 0; j < kb; ++j) s[j0 + j] += slope * m[j];
        }
    }
    std::fill(s + g.nkv, s + nkvp, kNegInf);
    float* out = reinterpret_cast<float*>(at(dst, 0, h, iq, b));
    const float mx = row_max(s, nkvp);
    if (mx == kNegInf) {
        // Every key is masked out: zeros, as ggml gives.
        std::fill(out, out + g.dv, 0.0f);
        return;
    }
    const float inv = 1.0f / exp_sum(s, mx, nkvp);
    float* o = sc.o;
    if (rows_native) {
        attn_row_values(s, g.nkv, at(v, 0, 0, hk, bk), v.nb[1], v.type, g.dv, o);
    } else {
        std::fill(o, o + g.dv, 0.0f);
        for (int64_t j = 0; j < g.nkv; ++j) {
            const float w = g.bf16 ? round_bf16(s[j]) : s[j];
            if (w != 0.0f) axpy_row(w, v, at(v, 0, j, hk, bk), o, g.dv, sc.row);
        }
    }
    for (int64_t d = 0; d < g.dv; ++d) out[d] = o[d] * inv;
}

// convert_tile's bf16 pair layout (g.pairs): K transposed by pairs, kt[p * kKB + j] = key j's elements
// (2p, 2p + 1); V by pairs of keys, vt[(j / 2) * dvp + c] = element c of keys j, j + 1 (a missing
// last key of an odd tile as zeros). The padding columns of V stay zero.
void convert_tile_pairs(const Tensor& k, const Tensor& v, const Dims& g, const Scratch& sc, uint32_t* kt,
                        uint32_t* vt, int64_t hk, int64_t bk, int64_t j0, int64_t kb) {
    for (int64_t j = 0; j < kb; ++j) {
        const float* kf = row_f32(k, at(k, 0, j0 + j, hk, bk), g.d, sc.row);
        for (int64_t p = 0; p < g.dpair; ++p) {
            kt[p * kKB + j] = bf16_pair(kf[2 * p], 2 * p + 1 < g.d ? kf[2 * p + 1] : 0.0f);
        }
    }
    float* second = sc.row + round_up(g.dv, 16);  // the scratch row holds both value rows (rowlen >= 2 dv)
    for (int64_t j = 0; j < kb; j += 2) {
        const float* v0 = row_f32(v, at(v, 0, j0 + j, hk, bk), g.dv, sc.row);
        const float* v1 = j + 1 < kb ? row_f32(v, at(v, 0, j0 + j + 1, hk, bk), g.dv, second) : nullptr;
        uint32_t* out = vt + (j / 2) * g.dvp;
        for (int64_t c = 0; c < g.dv; ++c) out[c] = bf16_pair(v0[c], v1 ? v1[c] : 0.0f);
    }
}

// Key tile t (keys [t kKB, t kKB + kKB)) of kv head hk, batch bk into its scratch slot: K transposed
// (d x kKB), V as rows of dvp, both as f32 (or as bf16 pairs: convert_tile_pairs).
void convert_tile(const Tensor& k, const Tensor& v, const Dims& g, const Scratch& sc, int64_t hk, int64_t bk,
                  int64_t t) {
    const int64_t slot = g.slots > 1 ? t : 0;
    float* kt = sc.kt + slot * kt_floats(g.d);
    float* vt = sc.v + slot * v_floats(g.dvp);
    const int64_t j0 = t * kKB;
    const int64_t kb = std::min(kKB, g.nkv - j0);
    if (g.pairs) {
        return convert_tile_pairs(k, v, g, sc, reinterpret_cast<uint32_t*>(kt), reinterpret_cast<uint32_t*>(vt), hk,
                                  bk, j0, kb);
    }
    for (int64_t j = 0; j < kb; ++j) {
        const float* kf = row_f32(k, at(k, 0, j0 + j, hk, bk), g.d, sc.row);
        for (int64_t d = 0; d < g.d; ++d) kt[d * kKB + j] = kf[d];
        const uint8_t* vrow = at(v, 0, j0 + j, hk, bk);
        float* vs = vt + j * g.dvp;
        const float* vf = row_f32(v, vrow, g.dv, vs);  // the row itself where it is contiguous f32
        if (vf != vs) std::memcpy(vs, vf, size_t(g.dv) * sizeof(float));
    }
}

// One work item: query rows [iq0, iq0 + nr) of head h, batch b. With g.slots > 1, `converted` says
// whether the scratch already holds this head's tiles (converted for an earlier block).
void attend_block(const Tensor& dst, const Dims& g, const Scratch& sc, int64_t h, int64_t b, int64_t iq0,
                  int64_t nr, bool converted) {
    const Tensor& q = *dst.src[0];
    const Tensor& k = *dst.src[1];
    const Tensor& v = *dst.src[2];
    const Tensor* mask = dst.src[3];
    const float scale = dst.param_f(0);
    const float max_bias = dst.param_f(1);
    const float cap = dst.param_f(2);
    const float slope = vec::alibi_slope(max_bias, h, g.h);
    const int64_t hk = h / (g.h / g.hkv);
    const int64_t bk = b / (g.b / g.bkv);

    // The scaled query rows: f32 rows of d (bf16-rounded values for bf16 keys), or rows of dpair
    // bf16 pairs.
    uint32_t* qpairs = reinterpret_cast<uint32_t*>(sc.q);
    for (int64_t i = 0; i < nr; ++i) {
        const uint8_t* qrow = at(q, 0, iq0 + i, h, b);
        float* qs = g.pairs ? sc.row : sc.q + i * g.d;
        vec::gather_f32(qrow, q.nb[0], g.d, qs);
        for (int64_t d = 0; d < g.d; ++d) qs[d] = g.bf16 && !g.pairs ? round_bf16(qs[d] * scale) : qs[d] * scale;
        for (int64_t p = 0; g.pairs && p < g.dpair; ++p) {
            qpairs[i * g.dpair + p] = bf16_pair(qs[2 * p], 2 * p + 1 < g.d ? qs[2 * p + 1] : 0.0f);
        }
        sc.m[i] = kNegInf;
        sc.l[i] = 0.0f;
    }
    std::fill(sc.o, sc.o + nr * g.dvp, 0.0f);

    for (int64_t j0 = 0; j0 < g.nkv; j0 += kKB) {
        const int64_t kb = std::min(kKB, g.nkv - j0);
        const int64_t kbp = round_up(kb, kCols);
        const int64_t t = j0 / kKB;
        if (g.slots == 1 || !converted) convert_tile(k, v, g, sc, hk, bk, t);
        const int64_t slot = g.slots > 1 ? t : 0;
        const float* kt = sc.kt + slot * kt_floats(g.d);
        const float* vt = sc.v + slot * v_floats(g.dvp);

        if (g.pairs) {
            gemm_bf16_pairs(nr, kbp, g.dpair, qpairs, g.dpair, reinterpret_cast<const uint32_t*>(kt), kKB, sc.s, kKB,
                            false);
        } else {
            gemm_set(nr, kbp, g.d, sc.q, g.d, kt, kKB, sc.s, kKB);
        }
        // With every tile held, the next one (K transposed, then V, adjacent slots) is fetched early.
        const bool ahead = g.slots > 1 && converted && j0 + kKB < g.nkv;
        const float* next = sc.kt + (slot + 1) * kt_floats(g.d);
        const float* next_v = sc.v + (slot + 1) * v_floats(g.dvp);

        for (int64_t i = 0; i < nr; ++i) {
            if (ahead) {
                prefetch_slice(next, kt_floats(g.d), i, nr);
                prefetch_slice(next_v, v_floats(g.dvp), i, nr);
            }
            float* srow = sc.s + i * kKB;
            if (cap > 0.0f) softcap(srow, cap, kbp);
            if (mask) {
                const float* m = row_f32(*mask, at(*mask, j0, iq0 + i, h % mask->ne[2], b % mask->ne[3]), kb, sc.row);
                for (int64_t j = 0; j < kb; ++j) srow[j] += slope * m[j];
            }
            for (int64_t j = kb; j < kbp; ++j) srow[j] = kNegInf;
            const float mx = block_max(srow, kbp);
            const float m_new = std::max(sc.m[i], mx);
            if (m_new == kNegInf) {
                // Every key so far is masked out: this row has nothing to add yet.
                std::fill(srow, srow + kbp, 0.0f);
                continue;
            }
            const float alpha = vec::exp(sc.m[i] - m_new);
            const float sum = block_exp_sum(srow, m_new, kbp);
            sc.l[i] = sc.l[i] * alpha + sum;
            sc.m[i] = m_new;
            if (alpha != 1.0f) block_scale(sc.o + i * g.dvp, alpha, g.dvp);
            // The weights as the value product takes them: bf16 pairs over the row's first half, or
            // f32 values rounded to bf16.
            if (g.pairs) {
                pack_bf16_pairs_in_place(srow, kbp);
            } else if (g.bf16) {
                for (int64_t j = 0; j < kb; ++j) srow[j] = round_bf16(srow[j]);
            }
        }
        if (g.pairs) {
            gemm_bf16_pairs(nr, g.dvp, (kb + 1) / 2, reinterpret_cast<const uint32_t*>(sc.s), kKB,
                            reinterpret_cast<const uint32_t*>(vt), g.dvp, sc.o, g.dvp, true);
        } else {
            gemm(nr, g.dvp, kb, sc.s, kKB, vt, g.dvp, sc.o, g.dvp);
        }
    }

    for (int64_t i = 0; i < nr; ++i) {
        // A row whose keys were all masked gets zeros, as ggml gives.
        const float inv = sc.l[i] == 0.0f ? 0.0f : 1.0f / sc.l[i];
        float* out = reinterpret_cast<float*>(at(dst, 0, h, iq0 + i, b));
        const float* orow = sc.o + i * g.dvp;
        for (int64_t d = 0; d < g.dv; ++d) out[d] = orow[d] * inv;
    }
}

}  // namespace

bool flash_attn_ext_supported(const Tensor& dst) {
    if (dst.op != Op::FLASH_ATTN_EXT) return false;
    const Tensor* q = dst.src[0];
    const Tensor* k = dst.src[1];
    const Tensor* v = dst.src[2];
    const Tensor* mask = dst.src[3];
    if (q == nullptr || k == nullptr || v == nullptr) return false;
    if (q->type != Type::F32 || k->type != v->type || !kv_type_ok(k->type) || dst.type != Type::F32) return false;
    if (type_traits(k->type).is_quantized && (k->nb[0] != type_traits(k->type).type_size ||
                                              v->nb[0] != type_traits(v->type).type_size)) {
        return false;
    }
    if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || v->ne[3] != k->ne[3]) return false;
    if (k->ne[2] == 0 || k->ne[3] == 0 || q->ne[2] % k->ne[2] != 0 || q->ne[3] % k->ne[3] != 0) return false;
    if (dst.ne[0] != v->ne[0] || dst.ne[1] != q->ne[2] || dst.ne[2] != q->ne[1] || dst.ne[3] != q->ne[3]) return false;
    if (!dst.is_contiguous()) return false;
    if (mask) {
        if (mask->type != Type::F16 && mask->type != Type::F32) return false;
        if (mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1]) return false;
        if (mask->ne[2] == 0 || mask->ne[3] == 0 || q->ne[2] % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0) {
            return false;
        }
    }
    return true;
}

int flash_attn_ext_threads(const Tensor& dst, int nth) { return nth; }

size_t flash_attn_ext_work_size(const Tensor& dst, int nth) {
    // 64 bytes of slack per thread let each thread's part start on a cache line.
    return size_t(nth) * (scratch_floats(dims_of(dst)) * sizeof(float) + 64);
}

void compute_flash_attn_ext(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Dims g = dims_of(dst);
    const size_t per_thread = scratch_floats(g) * sizeof(float) + 64;
    if (p.wdata == nullptr || p.wsize < per_thread * size_t(p.nth)) {
        fail<InvalidArgumentError>("compute_flash_attn_ext", "scratch too small (", p.wsize, " bytes, need ",
                                   per_thread * size_t(p.nth), ")");
    }
    uint8_t* mine = p.wdata + per_thread * size_t(p.ith);
    mine += (64 - reinterpret_cast<uintptr_t>(mine) % 64) % 64;
    const Scratch sc = carve(reinterpret_cast<float*>(mine), g);
    if (few_rows(g)) {
        int64_t w0, w1;
        split_range(g.b * g.h * g.nq, p.ith, p.nth, &w0, &w1);
        for (int64_t w = w0; w < w1; ++w) attend_row(dst, g, sc, (w / g.nq) % g.h, w / (g.nq * g.h), w % g.nq);
        return;
    }
    // The padding columns of the K and V tiles are never written but are multiplied: zeroed so they
    // hold no NaN or denormal left in the scratch by an earlier node.
    std::fill(sc.kt, sc.s, 0.0f);

    // Smaller query blocks when there are too few blocks to keep every thread busy.
    int64_t qrows = kQB;
    while (qrows > 16 && g.b * g.h * ((g.nq + qrows - 1) / qrows) < 2 * int64_t(p.nth)) qrows /= 2;
    const int64_t nqb = (g.nq + qrows - 1) / qrows;
    int64_t w0, w1;
    split_range(g.b * g.h * nqb, p.ith, p.nth, &w0, &w1);
    int64_t held = -1;  // the kv head (bk * hkv + hk) whose tiles the scratch holds, if any
    for (int64_t w = w0; w < w1; ++w) {
        const int64_t qb = w % nqb;
        const int64_t h = (w / nqb) % g.h;
        const int64_t b = w / (nqb * g.h);
        const int64_t iq0 = qb * qrows;
        const int64_t kv_head = (b / (g.b / g.bkv)) * g.hkv + h / (g.h / g.hkv);
        attend_block(dst, g, sc, h, b, iq0, std::min(qrows, g.nq - iq0), held == kv_head);
        held = kv_head;
    }
}

}  // namespace mb
