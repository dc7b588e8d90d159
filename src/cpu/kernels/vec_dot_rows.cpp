// Dot products of kVecDotRows consecutive weight rows with up to kVecDotTokens prepared activation rows
// (AVX2). A matrix-vector product with short rows (K of a few hundred) spends as much time per row on
// call, horizontal sum and store as on the multiply-adds; a tile of four rows shares the activation
// loads and scales and reduces four accumulators with one transposing sum, and a second token reuses
// every weight vector once it is loaded and decoded. The float kernels come 8 wide (AVX2) and 16 wide
// (AVX-512F). The quantized kernels come twice, with AVX2's and with AVX512-VNNI's byte dot products,
// and give the one-row kernels' results bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu/kernels/vec_dot.h"
#include "cpu/kernels/vec_dot_k_avx2.h"
#include "cpu/kernels/vec_dot_table_simd.h"

#include "core/fp16.h"
#include "cpu/kernels/int8_dot_x86.h"
#include "cpu/kernels/quant_blocks_avx2.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/tile_prefetch.h"

namespace mb {

namespace {

#if defined(MB_SIMD_X86)

// Whether the tiles read their rows one after the other (VecTileOrder::Rows, vec_dot.h), decided once.
const bool g_rows_in_order = vec_tile_order() == VecTileOrder::Rows;

static_assert(kVecDotRows == 4 && kVecDotTokens == 2,
              "the kernels below keep four rows and up to two tokens in registers");

constexpr int64_t kBlock = 32;

inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) { return fp16_to_fp32(*p); }

struct Bf16 {
    uint16_t bits;
};
inline float load1(const Bf16* p) { return bf16_to_fp32(p->bits); }

// W weights (or activations) as floats, 8 wide (AVX2) or 16 wide (AVX-512F).
MB_TARGET_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
MB_TARGET_AVX2 inline __m256 load8(const uint16_t* p) { return load_f16x8(p); }
MB_TARGET_AVX2 inline __m256 load8(const Bf16* p) { return load_bf16x8(&p->bits); }
MB_TARGET_AVX2 inline __m256 halves8(__m256 v) { return v; }

// gcc 12's avx512fintrin.h builds some intrinsics on a self-initialised "undefined" vector, which
// -Wuninitialized reports at every use; the values are defined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
MB_TARGET_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
MB_TARGET_AVX512 inline __m512 load16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
MB_TARGET_AVX512 inline __m512 load16(const Bf16* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(&p->bits)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
// The two 256-bit halves added, through a lane shuffle (AVX-512F; the extract forms are DQ or warn
// under gcc 12).
MB_TARGET_AVX512 inline __m256 halves16(__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, 0xEE)));
}

// How far ahead of its loads a float tile prefetches each of its four rows (tile_prefetch.h): closer
// than the k-quant tiles' 4 KiB, because f32 activations take as much L1 as the rows (K = 4096: 16
// KiB), and lines fetched 4 KiB ahead of four rows pushed them out. Measured on Zen 3, one thread,
// f16 weights against no prefetch (4-row tiles alone, best of 20 alternating calls): streaming 64 MiB
// at K = 4096 and 1536, 0.89-0.92x the time with 512 B ahead, 0.88-1.03x with 1 KiB, 1.0-1.15x with
// 4 KiB; K = 384 rows in L3 0.76-0.78x (rows that short are one tile's worth of stream each); 1 MiB
// in L3 at K = 2048 1.0x with 512 B or 1 KiB, 1.17x with 4 KiB. 1 KiB for the longer memory latency
// of many threads on one memory controller.
#if defined(MB_FLOAT_PREFETCH_BYTES)  // other distances, for benchmarks/matvec_threads.cpp's builds
constexpr size_t kFloatPrefetchBytes = MB_FLOAT_PREFETCH_BYTES;
#else
constexpr size_t kFloatPrefetchBytes = 1024;
#endif

// Float weights (TA: float, f16 as uint16_t, Bf16) times float or f16 activations (TB), NT tokens.
// Each weight vector is loaded (and converted) once for all tokens. Eight independent FMA chains:
// one token runs k unrolled by two, two tokens one chain per (row, token). One body, written as a
// macro because each width needs its own target attribute: 8 wide (AVX2), and 16 wide (AVX-512F)
// where the cap allows. Measured on the Xeon host (benchmarks/isa_matvec.py --only f16, 1 and 4
// threads) the 16-wide tile is 1.04-1.17x the 8-wide one for f16 weights. Float sums, so the two
// widths differ in the order (and the last bits) of their sums.
#define MB_TILE_FLOAT_STEP(I, VEC, W, LOAD, FMA)                                                             \
    {                                                                                                         \
        VEC bv[NT][U];                                                                                        \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; ++t)                                                \
            _Pragma("GCC unroll 2") for (int u = 0; u < U; ++u) bv[t][u] = LOAD(b[t] + (I) + W * u);       \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; ++r) {                                               \
            _Pragma("GCC unroll 2") for (int u = 0; u < U; ++u) {                                           \
                const VEC av = LOAD(rows[r] + (I) + W * u);                                                   \
                _Pragma("GCC unroll 8") for (int t = 0; t < NT; ++t)                                         \
                    acc[r][t][u] = FMA(av, bv[t][u], acc[r][t][u]);                                           \
            }                                                                                                 \
        }                                                                                                     \
    }
// The same multiply-adds for row R alone (VecTileOrder::Rows): every chain of the row in the order
// MB_TILE_FLOAT_STEP gives it, the activation vectors loaded again per row (from L1).
#define MB_TILE_FLOAT_ROW_STEP(R, I, VEC, W, LOAD, FMA)                                                      \
    {                                                                                                         \
        _Pragma("GCC unroll 2") for (int u = 0; u < U; ++u) {                                               \
            const VEC av = LOAD(rows[R] + (I) + W * u);                                                       \
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; ++t)                                             \
                acc[R][t][u] = FMA(av, LOAD(b[t] + (I) + W * u), acc[R][t][u]);                               \
        }                                                                                                     \
    }
#define MB_TILE_FLOAT(NAME, TARGET, VEC, W, LOAD, ZERO, FMA, ADD, HALVES)                                      \
    template <typename TA, typename TB, int NT>                                                               \
    TARGET void NAME(int64_t k, const uint8_t* a, size_t stride, const void* const* vb, float* out) {         \
        constexpr int U = NT == 1 ? 2 : 1;                                                                    \
        const TA* rows[4];                                                                                    \
        const TB* b[NT];                                                                                      \
        for (int r = 0; r < 4; ++r) rows[r] = reinterpret_cast<const TA*>(a + size_t(r) * stride);            \
        for (int t = 0; t < NT; ++t) b[t] = static_cast<const TB*>(vb[t]);                                    \
        VEC acc[4][NT][U];                                                                                    \
        for (auto& row : acc)                                                                                 \
            for (auto& tok : row)                                                                             \
                for (auto& v : tok) v = ZERO();                                                               \
        const uint8_t* prow[4] = {a, a + stride, a + 2 * stride, a + 3 * stride};                            \
        constexpr int64_t kLine = 64 / int64_t(sizeof(TA));                                                   \
        constexpr int64_t kStep = W * U >= kLine ? W * U : kLine;                                             \
        int64_t i = 0;                                                                                        \
        const bool in_order = NT <= kVecDotTokens && g_rows_in_order; /* the wide tiles: side by side */    \
        if (in_order) {                                                                                       \
            _Pragma("GCC unroll 1") for (int r = 0; r < 4; ++r) {                                           \
                for (int64_t j = 0; j + W * U <= k; j += W * U) {                                             \
                    prefetch_row_walk(prow, r, stride, size_t(j) * sizeof(TA), size_t(W * U) * sizeof(TA),    \
                                      size_t(k) * sizeof(TA));                                                \
                    MB_TILE_FLOAT_ROW_STEP(r, j, VEC, W, LOAD, FMA)                                           \
                }                                                                                             \
            }                                                                                                 \
            i = k / (W * U) * (W * U);                                                                        \
        }                                                                                                     \
        for (; !in_order && i + kStep <= k; i += kStep) {                                                     \
            prefetch_tile_rows(prow, size_t(i) * sizeof(TA), size_t(kStep) * sizeof(TA), size_t(k) * sizeof(TA), \
                               stride, kFloatPrefetchBytes);                                                  \
            _Pragma("GCC unroll 4") for (int64_t j = i; j < i + kStep; j += W * U)                          \
                MB_TILE_FLOAT_STEP(j, VEC, W, LOAD, FMA)                                                      \
        }                                                                                                     \
        for (; i + W * U <= k; i += W * U) MB_TILE_FLOAT_STEP(i, VEC, W, LOAD, FMA)                          \
        for (; i + W <= k; i += W) {                                                                          \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; ++r) {                                           \
                const VEC av = LOAD(rows[r] + i);                                                             \
                _Pragma("GCC unroll 8") for (int t = 0; t < NT; ++t)                                         \
                    acc[r][t][0] = FMA(av, LOAD(b[t] + i), acc[r][t][0]);                                     \
            }                                                                                                 \
        }                                                                                                     \
        for (int t = 0; t < NT; ++t) {                                                                        \
            __m256 sum[4];                                                                                    \
            for (int r = 0; r < 4; ++r) {                                                                     \
                VEC v = acc[r][t][0];                                                                         \
                for (int u = 1; u < U; ++u) v = ADD(v, acc[r][t][u]);                                         \
                sum[r] = HALVES(v);                                                                           \
            }                                                                                                 \
            alignas(16) float tail[4] = {};                                                                   \
            for (int64_t j = i; j < k; ++j) {                                                                 \
                const float bj = load1(b[t] + j);                                                             \
                for (int r = 0; r < 4; ++r) tail[r] += load1(rows[r] + j) * bj;                               \
            }                                                                                                 \
            _mm_storeu_ps(out + 4 * t, _mm_add_ps(lane_sums4(sum[0], sum[1], sum[2], sum[3]), _mm_load_ps(tail))); \
        }                                                                                                     \
    }

MB_TILE_FLOAT(tile_float, MB_TARGET_AVX2, __m256, 8, load8, _mm256_setzero_ps, _mm256_fmadd_ps, _mm256_add_ps,
              halves8)
MB_TILE_FLOAT(tile_float_avx512, MB_TARGET_AVX512, __m512, 16, load16, _mm512_setzero_ps, _mm512_fmadd_ps,
              _mm512_add_ps, halves16)

#undef MB_TILE_FLOAT
#undef MB_TILE_FLOAT_STEP
#undef MB_TILE_FLOAT_ROW_STEP

// NP token pairs and one token more, each weight vector loaded once for all 2 * NP + 1: the paired
// tokens in the two-token tile's chains (one per row and token, k in steps of 16) and the last in the
// one-token tile's two (even and odd steps of 16, the last lone step in the first), reduced and their
// tails summed as those tiles do, so every result is bit for bit the one the tiles it replaces give.
// Five tokens (beam search's five beams) then read the rows once instead of twice, and the lone token
// no longer runs the one-token tile's per-row call and reduction alone.
template <typename TA, typename TB, int NP>
MB_TARGET_AVX512 void tile_float_avx512_odd(int64_t k, const uint8_t* a, size_t stride, const void* const* vb,
                                            float* out) {
    constexpr int NT = 2 * NP + 1;
    const TA* rows[4];
    const TB* b[NT];
    for (int r = 0; r < 4; ++r) rows[r] = reinterpret_cast<const TA*>(a + size_t(r) * stride);
    for (int t = 0; t < NT; ++t) b[t] = static_cast<const TB*>(vb[t]);
    __m512 pair_acc[4][2 * NP];
    __m512 lone_acc[4][2];
    for (int r = 0; r < 4; ++r) {
        for (auto& v : pair_acc[r]) v = _mm512_setzero_ps();
        lone_acc[r][0] = lone_acc[r][1] = _mm512_setzero_ps();
    }
    const uint8_t* prow[4] = {a, a + stride, a + 2 * stride, a + 3 * stride};
    const TB* lone = b[NT - 1];
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
        prefetch_tile_rows(prow, size_t(i) * sizeof(TA), 32 * sizeof(TA), size_t(k) * sizeof(TA), stride,
                           kFloatPrefetchBytes);
#pragma GCC unroll 2
        for (int u = 0; u < 2; ++u) {
            __m512 bv[2 * NP];
#pragma GCC unroll 4
            for (int t = 0; t < 2 * NP; ++t) bv[t] = load16(b[t] + i + 16 * u);
            const __m512 lv = load16(lone + i + 16 * u);
#pragma GCC unroll 4
            for (int r = 0; r < 4; ++r) {
                const __m512 av = load16(rows[r] + i + 16 * u);
#pragma GCC unroll 4
                for (int t = 0; t < 2 * NP; ++t) pair_acc[r][t] = _mm512_fmadd_ps(av, bv[t], pair_acc[r][t]);
                lone_acc[r][u] = _mm512_fmadd_ps(av, lv, lone_acc[r][u]);
            }
        }
    }
    if (i + 16 <= k) {
        __m512 bv[2 * NP];
        for (int t = 0; t < 2 * NP; ++t) bv[t] = load16(b[t] + i);
        const __m512 lv = load16(lone + i);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            const __m512 av = load16(rows[r] + i);
            for (int t = 0; t < 2 * NP; ++t) pair_acc[r][t] = _mm512_fmadd_ps(av, bv[t], pair_acc[r][t]);
            lone_acc[r][0] = _mm512_fmadd_ps(av, lv, lone_acc[r][0]);
        }
        i += 16;
    }
    for (int t = 0; t < NT; ++t) {
        __m256 sum[4];
        for (int r = 0; r < 4; ++r) {
            sum[r] = halves16(t < 2 * NP ? pair_acc[r][t] : _mm512_add_ps(lone_acc[r][0], lone_acc[r][1]));
        }
        alignas(16) float tail[4] = {};
        for (int64_t j = i; j < k; ++j) {
            const float bj = load1(b[t] + j);
            for (int r = 0; r < 4; ++r) tail[r] += load1(rows[r] + j) * bj;
        }
        _mm_storeu_ps(out + 4 * t, _mm_add_ps(lane_sums4(sum[0], sum[1], sum[2], sum[3]), _mm_load_ps(tail)));
    }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Blocks per prefetch of the four rows (tile_prefetch.h): as many as fit in a cache line, so every
// line of a row is asked for.
template <typename Block>
constexpr int64_t kPrefetchStep = sizeof(Block) >= 64 ? 1 : int64_t(64 / sizeof(Block));

// The 4- and 5-bit types, NT tokens, in the order of int8_dot_x86.h (so each result is bit for bit the
// one-row kernel's), the lanes through Dot (AVX2 or VNNI), the four rows in g_rows_in_order's order.
// Side by side, a block's codes and scale are decoded once for all tokens; q4_0's and q5_0's zero
// point is taken off in the lanes (its lanes per activation block are computed once for the four
// rows); q4_1's and q5_1's m * S terms are summed per row and
// token apart.
template <typename Dot, typename Block, int kZero, int NT>
MB_TARGET_AVX2 void tile_quant(int64_t k, const uint8_t* a, size_t stride, const void* const* vb, float* out) {
    const Block* rows[4];
    const BlockQ8Act* b[NT];
    for (int r = 0; r < 4; ++r) rows[r] = reinterpret_cast<const Block*>(a + size_t(r) * stride);
    for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8Act*>(vb[t]);
    __m256 acc[4][NT];
    __m128 off[NT];  // lane r: row r's m * S sum, one fused multiply-add per block as fma1 does it
    for (auto& row : acc)
        for (auto& v : row) v = _mm256_setzero_ps();
    for (auto& v : off) v = _mm_setzero_ps();
    const uint8_t* prow[4] = {a, a + stride, a + 2 * stride, a + 3 * stride};
    constexpr int64_t kStep = kPrefetchStep<Block>;
    const int64_t nb = k / kBlock;
    if (g_rows_in_order) {
        // Row r's m * S sum per token as one scalar chain: lane r of the vector chain below, the same
        // fused multiply-adds in the same order.
        float row_off[4][NT] = {};
#pragma GCC unroll 1
        for (int r = 0; r < 4; ++r) {
            for (int64_t i = 0; i < nb; ++i) {
                prefetch_row_walk(prow, r, stride, size_t(i) * sizeof(Block), sizeof(Block),
                                  size_t(nb) * sizeof(Block));
                const Block& x = rows[r][i];
                const float d = _cvtsh_ss(x.d);
                const __m256i codes = block_codes(x);
#pragma GCC unroll 2
                for (int t = 0; t < NT; ++t) {
                    const __m256i bq = load_codes32(b[t][i].qs);
                    acc[r][t] = scale_add(Dot::lanes(zero_point_lanes<Dot, kZero>(bq), codes, bq), d * b[t][i].d,
                                          acc[r][t]);
                    if constexpr (kZero == 0) row_off[r][t] = fma1(_cvtsh_ss(x.m), b[t][i].s, row_off[r][t]);
                }
            }
        }
        for (int t = 0; t < NT; ++t) off[t] = _mm_setr_ps(row_off[0][t], row_off[1][t], row_off[2][t], row_off[3][t]);
    }
    for (int64_t i = 0; !g_rows_in_order && i < nb; ++i) {
        if (i % kStep == 0) {
            prefetch_tile_rows(prow, size_t(i) * sizeof(Block), kStep * sizeof(Block), size_t(nb) * sizeof(Block),
                               stride);
        }
        __m256i bq[NT], zq[NT];
        float bd[NT];
#pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) {
            bq[t] = load_codes32(b[t][i].qs);
            bd[t] = b[t][i].d;
            zq[t] = zero_point_lanes<Dot, kZero>(bq[t]);
        }
        if constexpr (kZero == 0) {
            const __m128 m4 = _mm_cvtph_ps(_mm_setr_epi16(short(rows[0][i].m), short(rows[1][i].m),
                                                          short(rows[2][i].m), short(rows[3][i].m), 0, 0, 0, 0));
#pragma GCC unroll 2
            for (int t = 0; t < NT; ++t) off[t] = _mm_fmadd_ps(m4, _mm_set1_ps(b[t][i].s), off[t]);
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            const Block& x = rows[r][i];
            const float d = _cvtsh_ss(x.d);
            const __m256i codes = block_codes(x);
#pragma GCC unroll 2
            for (int t = 0; t < NT; ++t) {
                acc[r][t] = scale_add(Dot::lanes(zq[t], codes, bq[t]), d * bd[t], acc[r][t]);
            }
        }
    }
    for (int t = 0; t < NT; ++t) {
        const __m128 s = lane_sums4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]);
        _mm_storeu_ps(out + 4 * t, kZero == 0 ? _mm_add_ps(s, off[t]) : s);
    }
}

// One q8_0 block of a row against every token's block (codes bq[t], scale bd[t]), into acc[t]: signed
// codes; |a| times b with a's sign moved onto b (as dot_q8_0_x86 does).
template <typename Dot, int NT>
MB_TARGET_AVX2 inline void q8_0_block(const BlockQ8_0& x, const __m256i* bq, const float* bd, __m256* acc) {
    const __m256i q = load_codes32(x.qs);
    const __m256i abs_q = _mm256_sign_epi8(q, q);
    const float d = _cvtsh_ss(x.d);
#pragma GCC unroll 2
    for (int t = 0; t < NT; ++t) {
        const __m256i lanes = Dot::lanes(_mm256_setzero_si256(), abs_q, _mm256_sign_epi8(bq[t], q));
        acc[t] = scale_add(lanes, d * bd[t], acc[t]);
    }
}

// Block i of every token's activations, for q8_0_block.
template <int NT>
MB_TARGET_AVX2 inline void q8_act_block(const BlockQ8Act* const* b, int64_t i, __m256i* bq, float* bd) {
#pragma GCC unroll 2
    for (int t = 0; t < NT; ++t) {
        bq[t] = load_codes32(b[t][i].qs);
        bd[t] = b[t][i].d;
    }
}

// q8_0, NT tokens, the four rows in g_rows_in_order's order.
template <typename Dot, int NT>
MB_TARGET_AVX2 void tile_q8_0(int64_t k, const uint8_t* a, size_t stride, const void* const* vb, float* out) {
    const BlockQ8_0* rows[4];
    const BlockQ8Act* b[NT];
    for (int r = 0; r < 4; ++r) rows[r] = reinterpret_cast<const BlockQ8_0*>(a + size_t(r) * stride);
    for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8Act*>(vb[t]);
    __m256 acc[4][NT];
    for (auto& row : acc)
        for (auto& v : row) v = _mm256_setzero_ps();
    const uint8_t* prow[4] = {a, a + stride, a + 2 * stride, a + 3 * stride};
    constexpr int64_t kStep = kPrefetchStep<BlockQ8_0>;
    const int64_t nb = k / kBlock;
    __m256i bq[NT];
    float bd[NT];
    if (g_rows_in_order) {
#pragma GCC unroll 1
        for (int r = 0; r < 4; ++r) {
            for (int64_t i = 0; i < nb; ++i) {
                prefetch_row_walk(prow, r, stride, size_t(i) * sizeof(BlockQ8_0), sizeof(BlockQ8_0),
                                  size_t(nb) * sizeof(BlockQ8_0));
                q8_act_block<NT>(b, i, bq, bd);
                q8_0_block<Dot, NT>(rows[r][i], bq, bd, acc[r]);
            }
        }
    } else {
        for (int64_t i = 0; i < nb; ++i) {
            if (i % kStep == 0) {
                prefetch_tile_rows(prow, size_t(i) * sizeof(BlockQ8_0), kStep * sizeof(BlockQ8_0),
                                   size_t(nb) * sizeof(BlockQ8_0), stride);
            }
            q8_act_block<NT>(b, i, bq, bd);  // once for the four rows
#pragma GCC unroll 4
            for (int r = 0; r < 4; ++r) q8_0_block<Dot, NT>(rows[r][i], bq, bd, acc[r]);
        }
    }
    for (int t = 0; t < NT; ++t) _mm_storeu_ps(out + 4 * t, lane_sums4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
}

using TileFn = void (*)(int64_t k, const uint8_t* a, size_t stride, const void* const* b, float* out);

// One entry point per pairing: nt (1 or 2) picks the tile.
template <TileFn One, TileFn Two>
void by_tokens(int64_t k, const uint8_t* a, size_t stride, const void* const* b, int nt, float* out) {
    (nt == 2 ? Two : One)(k, a, stride, b, out);
}

template <typename TA, typename TB>
constexpr VecDotRowsFn rows_float = by_tokens<tile_float<TA, TB, 1>, tile_float<TA, TB, 2>>;
template <typename TA, typename TB>
constexpr VecDotRowsFn rows_float_avx512 = by_tokens<tile_float_avx512<TA, TB, 1>, tile_float_avx512<TA, TB, 2>>;
// nt of 2 .. 6 (kVecDotTokensWide): every tile of two or more tokens keeps one FMA chain per (row,
// token) in the same k order and reduces it the same way, so each result is bit for bit the two-token
// tile's; 3 and 5 are pairs and a last token in the one-token tile's chains (tile_float_avx512_odd),
// its results those of that tile. Six tokens: 24 accumulators, 6 activation vectors and one weight
// vector of the 32 zmm; five: 16 + 8 accumulators.
template <typename TA, typename TB>
void rows_float_avx512_wide(int64_t k, const uint8_t* a, size_t stride, const void* const* b, int nt, float* out) {
    switch (nt) {
        case 6: return tile_float_avx512<TA, TB, 6>(k, a, stride, b, out);
        case 5: return tile_float_avx512_odd<TA, TB, 2>(k, a, stride, b, out);
        case 4: return tile_float_avx512<TA, TB, 4>(k, a, stride, b, out);
        case 3: return tile_float_avx512_odd<TA, TB, 1>(k, a, stride, b, out);
        default: return tile_float_avx512<TA, TB, 2>(k, a, stride, b, out);
    }
}
template <typename Dot, typename Block, int kZero>
constexpr VecDotRowsFn rows_quant = by_tokens<tile_quant<Dot, Block, kZero, 1>, tile_quant<Dot, Block, kZero, 2>>;
template <typename Dot>
constexpr VecDotRowsFn rows_q8_0 = by_tokens<tile_q8_0<Dot, 1>, tile_q8_0<Dot, 2>>;

// The quantized pairings with the byte dot products of Dot.
template <typename Dot>
VecDotRowsFn rows_for_quant(Type a) {
    switch (a) {
        case Type::Q4_0: return rows_quant<Dot, BlockQ4_0, MB_QB_ZERO_Q4_0>;
        case Type::Q4_1: return rows_quant<Dot, BlockQ4_1, 0>;
        case Type::Q5_0: return rows_quant<Dot, BlockQ5_0, MB_QB_ZERO_Q5_0>;
        case Type::Q5_1: return rows_quant<Dot, BlockQ5_1, 0>;
        case Type::Q8_0: return rows_q8_0<Dot>;
        default: return nullptr;
    }
}

#endif  // MB_SIMD_X86

}  // namespace

VecTileOrder vec_tile_order() {
    static const VecTileOrder order = [] {
        if (const char* e = std::getenv("MB_VEC_TILE_ORDER")) {
            if (std::strcmp(e, "rows") == 0) return VecTileOrder::Rows;
            if (std::strcmp(e, "interleaved") == 0) return VecTileOrder::Interleaved;
        }
#if defined(MB_SIMD_X86)
        __builtin_cpu_init();  // may run from a static initialiser, before libgcc's own
        return __builtin_cpu_is("amd") ? VecTileOrder::Rows : VecTileOrder::Interleaved;
#else
        return VecTileOrder::Interleaved;
#endif
    }();
    return order;
}

const char* vec_tile_order_name(VecTileOrder order) {
    return order == VecTileOrder::Rows ? "rows" : "interleaved";
}

VecDotRowsFn vec_dot_rows_fn(Type a, VecType vt) {
#if defined(MB_SIMD_X86)
    if (!cpu_has_avx2_fma_f16c()) {
        return nullptr;
    }
    const bool wide = cpu_has_avx512f();
    if (vt == VecType::F32) {
        switch (a) {
            case Type::F32: return wide ? rows_float_avx512<float, float> : rows_float<float, float>;
            case Type::F16: return wide ? rows_float_avx512<uint16_t, float> : rows_float<uint16_t, float>;
            case Type::BF16: return wide ? rows_float_avx512<Bf16, float> : rows_float<Bf16, float>;
            default: return nullptr;
        }
    }
    if (vt == VecType::Q8K) return vec_dot_k_rows_avx2_fn(a);  // nullptr for the grid types
    if (vt == VecType::F16) {
        if (a != Type::F16) return nullptr;
        return wide ? rows_float_avx512<uint16_t, uint16_t> : rows_float<uint16_t, uint16_t>;
    }
    if (VecDotRowsFn table = vec_dot_table_rows_fn(a)) return table;  // iq4_nl, mxfp4
    return by_byte_dot(rows_for_quant<DotAvx2>(a), rows_for_quant<DotAvxVnni>(a), rows_for_quant<DotVnni>(a));
#else
    (void)a;
    (void)vt;
    return nullptr;
#endif
}

VecDotRowsFn vec_dot_rows_wide_fn(Type a, VecType vt) {
#if defined(MB_SIMD_X86)
    if (!cpu_has_avx2_fma_f16c() || !cpu_has_avx512f()) {
        return nullptr;
    }
    if (vt == VecType::F32) {
        switch (a) {
            case Type::F32: return rows_float_avx512_wide<float, float>;
            case Type::F16: return rows_float_avx512_wide<uint16_t, float>;
            case Type::BF16: return rows_float_avx512_wide<Bf16, float>;
            default: return nullptr;
        }
    }
    if (vt == VecType::F16 && a == Type::F16) return rows_float_avx512_wide<uint16_t, uint16_t>;
    return nullptr;
#else
    (void)a;
    (void)vt;
    return nullptr;
#endif
}

}  // namespace mb
