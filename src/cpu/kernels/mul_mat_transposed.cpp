// MUL_MAT with a transposed float first operand (mul_mat_transposed.h).
//
// Jobs are (a matrix, block of kBlockCols columns, run of tokens), taken from one shared counter. The
// tokens of an a matrix are those of every b matrix it is broadcast over (sub-matrix major), so a
// decoder's sequences that share one window's keys fill one register tile. A job packs each tile of
// its tokens as b[t][k] -> pk[k * nt + t] (f32), then for every k loads the block's piece of a's row
// k once and adds pk[k][t] * piece to every token's accumulators. The job
// split depends on the shape only (not on the ISA cap, which picks the tiles at compute time), so
// the scratch asked for before a compute fits whatever runs.
#include "cpu/kernels/mul_mat_transposed.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include "core/errors.h"
#include "core/fp16.h"
#include "cpu/kernels/simd.h"

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12's avx512fintrin.h (PR 105593): see flash_attn_ext.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace mb {

namespace {

constexpr int64_t kBlockCols = 64;   // columns per job: 4 AVX-512 vectors, 8 AVX2 ones
constexpr int64_t kMaxTile = 6;      // tokens per register tile at most (AVX-512: 6 x 4 accumulators)
constexpr int64_t kJobsPerThread = 4;
constexpr size_t kAlign = 64;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_float(Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16; }

size_t elem_size(Type t) { return t == Type::F32 ? sizeof(float) : sizeof(uint16_t); }

float element(Type t, const uint8_t* p) {
    if (t == Type::F32) {
        float v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return t == Type::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

struct Plan {
    int64_t k, m, n;
    int64_t r2, r3;
    int64_t n_amat, tokens, col_blocks, tokens_per_job, token_runs, jobs;  // tokens: per a matrix
    size_t pack_bytes, total;
};

Plan make_plan(const Tensor& dst, int nth) {
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    Plan p{};
    p.k = a.ne[0];
    p.m = a.ne[1];
    p.n = b.ne[1];
    p.r2 = a.ne[2] > 0 ? b.ne[2] / a.ne[2] : 1;
    p.r3 = a.ne[3] > 0 ? b.ne[3] / a.ne[3] : 1;
    p.n_amat = a.ne[2] * a.ne[3];
    p.tokens = p.n * p.r2 * p.r3;
    p.col_blocks = ceil_div(p.m, kBlockCols);
    // Whole token tiles per job; runs of tokens only where matrices x column blocks leave threads idle.
    const int64_t spatial = std::max<int64_t>(1, p.n_amat * p.col_blocks);
    const int64_t want = kJobsPerThread * std::max(1, nth);
    const int64_t tokens = std::max<int64_t>(p.tokens, 1);
    const int64_t runs = std::min(ceil_div(tokens, kMaxTile), std::max<int64_t>(1, ceil_div(want, spatial)));
    p.tokens_per_job = ceil_div(ceil_div(tokens, runs), kMaxTile) * kMaxTile;
    p.token_runs = ceil_div(p.tokens, p.tokens_per_job);
    p.jobs = p.n_amat * p.col_blocks * p.token_runs;
    p.pack_bytes = align_up(sizeof(float) * size_t(kMaxTile * p.k));
    // The counter's line, a packed tile per thread, and kAlign to align the base.
    p.total = kAlign + p.pack_bytes * size_t(std::max(1, nth)) + kAlign;
    return p;
}

uint8_t* scratch_base(const ComputeParams& cp) {
    const uintptr_t raw = reinterpret_cast<uintptr_t>(cp.wdata);
    return cp.wdata + (align_up(raw) - raw);
}

std::atomic<int64_t>* job_counter(uint8_t* base) { return reinterpret_cast<std::atomic<int64_t>*>(base); }

// The activation rows rows[0 .. nt) as pk[k * nt + t].
void pack_tokens(const Tensor& b, int64_t k, const uint8_t* const* rows, int nt, float* pk) {
    for (int t = 0; t < nt; ++t) {
        const uint8_t* row = rows[t];
        if (b.type == Type::F32 && b.nb[0] == sizeof(float)) {
            const float* x = reinterpret_cast<const float*>(row);
            for (int64_t kk = 0; kk < k; ++kk) pk[kk * nt + t] = x[kk];
        } else {
            for (int64_t kk = 0; kk < k; ++kk) pk[kk * nt + t] = element(b.type, row + kk * b.nb[0]);
        }
    }
}

// Portable tile: nt tokens x cols (<= kBlockCols) columns, any element type.
void tile_portable(Type ta, int64_t k, const uint8_t* a, size_t lda, int64_t cols, const float* pk, int nt,
                   float* const* out, int64_t j0) {
    float acc[kMaxTile][kBlockCols] = {};
    float piece[kBlockCols];
    const size_t es = elem_size(ta);
    for (int64_t kk = 0; kk < k; ++kk) {
        const uint8_t* row = a + size_t(kk) * lda;
        if (ta == Type::F32) {
            std::memcpy(piece, row, size_t(cols) * sizeof(float));
        } else {
            for (int64_t j = 0; j < cols; ++j) piece[j] = element(ta, row + size_t(j) * es);
        }
        for (int t = 0; t < nt; ++t) {
            const float bt = pk[kk * nt + t];
            for (int64_t j = 0; j < cols; ++j) acc[t][j] += bt * piece[j];
        }
    }
    for (int t = 0; t < nt; ++t) std::memcpy(out[t] + j0, acc[t], size_t(cols) * sizeof(float));
}

void block_portable(Type ta, int64_t k, const uint8_t* a, size_t lda, int64_t cols, const float* pk, int nt,
                    float* const* out) {
    tile_portable(ta, k, a, lda, cols, pk, nt, out, 0);
}

#if defined(MB_SIMD_X86)

// Rows of a this many k ahead are prefetched (the rows of one job are lda apart, a stride the
// hardware prefetchers follow less well than a sequential read).
constexpr int64_t kPrefetchAhead = 8;

template <Type TA>
MB_TARGET_AVX512 inline __m512 load16(const uint8_t* p) {
    if constexpr (TA == Type::F32) {
        return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
    } else if constexpr (TA == Type::F16) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
}

// NT tokens x C vectors of 16 columns.
template <Type TA, int NT, int C>
MB_TARGET_AVX512 void tile_avx512(int64_t k, const uint8_t* a, size_t lda, const float* pk, float* const* out,
                                   int64_t j0) {
    constexpr size_t kEs = TA == Type::F32 ? 4 : 2;
    __m512 acc[NT][C];
    for (int t = 0; t < NT; ++t)
        for (int q = 0; q < C; ++q) acc[t][q] = _mm512_setzero_ps();
    for (int64_t kk = 0; kk < k; ++kk) {
        const uint8_t* row = a + size_t(kk) * lda;
        if (kk + kPrefetchAhead < k) {
            const char* ahead = reinterpret_cast<const char*>(row + kPrefetchAhead * lda);
            for (size_t off = 0; off < C * 16 * kEs; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
        }
        __m512 av[C];
        for (int q = 0; q < C; ++q) av[q] = load16<TA>(row + q * 16 * kEs);
        const float* bk = pk + kk * NT;
        for (int t = 0; t < NT; ++t) {
            const __m512 bt = _mm512_set1_ps(bk[t]);
            for (int q = 0; q < C; ++q) acc[t][q] = _mm512_fmadd_ps(bt, av[q], acc[t][q]);
        }
    }
    for (int t = 0; t < NT; ++t)
        for (int q = 0; q < C; ++q) _mm512_storeu_ps(out[t] + j0 + 16 * q, acc[t][q]);
}

template <Type TA>
MB_TARGET_AVX2 inline __m256 load8(const uint8_t* p) {
    if constexpr (TA == Type::F32) {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    } else if constexpr (TA == Type::F16) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
}

// NT (<= 3) tokens x C (<= 4) vectors of 8 columns: 12 accumulators, 3 broadcasts, 1 row vector.
template <Type TA, int NT, int C>
MB_TARGET_AVX2 void tile_avx2(int64_t k, const uint8_t* a, size_t lda, const float* pk, float* const* out, int64_t j0) {
    constexpr size_t kEs = TA == Type::F32 ? 4 : 2;
    __m256 acc[NT][C];
    for (int t = 0; t < NT; ++t)
        for (int q = 0; q < C; ++q) acc[t][q] = _mm256_setzero_ps();
    for (int64_t kk = 0; kk < k; ++kk) {
        const uint8_t* row = a + size_t(kk) * lda;
        if (kk + kPrefetchAhead < k) {
            const char* ahead = reinterpret_cast<const char*>(row + kPrefetchAhead * lda);
            for (size_t off = 0; off < C * 8 * kEs; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
        }
        __m256 bt[NT];
        for (int t = 0; t < NT; ++t) bt[t] = _mm256_broadcast_ss(pk + kk * NT + t);
        for (int q = 0; q < C; ++q) {
            const __m256 av = load8<TA>(row + q * 8 * kEs);
            for (int t = 0; t < NT; ++t) acc[t][q] = _mm256_fmadd_ps(bt[t], av, acc[t][q]);
        }
    }
    for (int t = 0; t < NT; ++t)
        for (int q = 0; q < C; ++q) _mm256_storeu_ps(out[t] + j0 + 8 * q, acc[t][q]);
}

// Results of token t, columns j0 .., go to out[t] + j0.
using TileFn = void (*)(int64_t k, const uint8_t* a, size_t lda, const float* pk, float* const* out, int64_t j0);

// [nt - 1] of tile<TA, nt, C> for nt 1 .. N.
template <Type TA, int C, template <Type, int, int> class Tile, int... NT>
TileFn pick_tile(int nt, std::integer_sequence<int, NT...>) {
    const TileFn table[] = {&Tile<TA, NT + 1, C>::run...};
    return table[nt - 1];
}

template <Type TA, int NT, int C>
struct Avx512Tile {
    static void run(int64_t k, const uint8_t* a, size_t lda, const float* pk, float* const* out, int64_t j0) {
        tile_avx512<TA, NT, C>(k, a, lda, pk, out, j0);
    }
};
template <Type TA, int NT, int C>
struct Avx2Tile {
    static void run(int64_t k, const uint8_t* a, size_t lda, const float* pk, float* const* out, int64_t j0) {
        tile_avx2<TA, NT, C>(k, a, lda, pk, out, j0);
    }
};

// One column block (cols <= kBlockCols) for one packed tile of nt tokens: whole vectors of W columns
// through the SIMD tiles (V of them at once, then one at a time), the last cols % W portably.
template <Type TA, template <Type, int, int> class Tile, int W, int V, int NTMax>
void block_simd(int64_t k, const uint8_t* a, size_t lda, int64_t cols, const float* pk, int nt, float* const* out) {
    constexpr size_t kEs = TA == Type::F32 ? 4 : 2;
    const auto seq = std::make_integer_sequence<int, NTMax>{};
    int64_t j = 0;
    if (cols - j >= int64_t(W) * V) {
        const TileFn wide = pick_tile<TA, V, Tile>(nt, seq);
        for (; cols - j >= int64_t(W) * V; j += int64_t(W) * V) wide(k, a + size_t(j) * kEs, lda, pk, out, j);
    }
    if (cols - j >= W) {
        const TileFn one = pick_tile<TA, 1, Tile>(nt, seq);
        for (; cols - j >= W; j += W) one(k, a + size_t(j) * kEs, lda, pk, out, j);
    }
    if (j < cols) tile_portable(TA, k, a + size_t(j) * kEs, lda, cols - j, pk, nt, out, j);
}

#endif  // MB_SIMD_X86

// The kernels in use now: tokens per tile, and the column block of one tile.
struct Kernel {
    int tile_tokens;
    void (*block)(Type ta, int64_t k, const uint8_t* a, size_t lda, int64_t cols, const float* pk, int nt,
                  float* const* out);
};

#if defined(MB_SIMD_X86)
template <template <Type, int, int> class Tile, int W, int V, int NTMax>
void block_for(Type ta, int64_t k, const uint8_t* a, size_t lda, int64_t cols, const float* pk, int nt,
               float* const* out) {
    switch (ta) {
        case Type::F32: return block_simd<Type::F32, Tile, W, V, NTMax>(k, a, lda, cols, pk, nt, out);
        case Type::F16: return block_simd<Type::F16, Tile, W, V, NTMax>(k, a, lda, cols, pk, nt, out);
        default: return block_simd<Type::BF16, Tile, W, V, NTMax>(k, a, lda, cols, pk, nt, out);
    }
}
#endif

Kernel kernel_in_use() {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx512f()) return {6, block_for<Avx512Tile, 16, 4, 6>};
    if (cpu_has_avx2_fma_f16c()) return {3, block_for<Avx2Tile, 8, 4, 3>};
#endif
    return {4, block_portable};
}

void run_job(const Plan& p, const Kernel& kern, const Tensor& a, const Tensor& b, Tensor& dst, int64_t job,
             float* pk) {
    const int64_t run = job % p.token_runs;
    job /= p.token_runs;
    const int64_t cb = job % p.col_blocks;
    const int64_t amat = job / p.col_blocks;
    const int64_t i02 = amat % a.ne[2];
    const int64_t i03 = amat / a.ne[2];
    const int64_t m0 = cb * kBlockCols;
    const int64_t cols = std::min(kBlockCols, p.m - m0);
    const uint8_t* ablock = host_data(a) + i02 * a.nb[2] + i03 * a.nb[3] + size_t(m0) * elem_size(a.type);
    const size_t lda = size_t(a.nb[0]);
    const int64_t u_end = std::min(p.tokens, (run + 1) * p.tokens_per_job);
    const uint8_t* rows[kMaxTile];
    float* out[kMaxTile];
    for (int64_t u0 = run * p.tokens_per_job; u0 < u_end; u0 += kern.tile_tokens) {
        const int nt = int(std::min<int64_t>(kern.tile_tokens, u_end - u0));
        for (int t = 0; t < nt; ++t) {
            // Token u of this a matrix: token u % n of its broadcast b matrix u / n.
            const int64_t sub = (u0 + t) / p.n;
            const int64_t i1 = (u0 + t) % p.n;
            const int64_t i12 = i02 * p.r2 + sub % p.r2;
            const int64_t i13 = i03 * p.r3 + sub / p.r2;
            rows[t] = host_data(b) + i1 * b.nb[1] + i12 * b.nb[2] + i13 * b.nb[3];
            out[t] = reinterpret_cast<float*>(at(dst, m0, i1, i12, i13));
        }
        pack_tokens(b, p.k, rows, nt, pk);
        kern.block(a.type, p.k, ablock, lda, cols, pk, nt, out);
    }
}

}  // namespace

bool mul_mat_transposed_applies(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    if (a == nullptr || !is_float(a->type)) return false;
    const int64_t es = int64_t(elem_size(a->type));
    return a->nb[1] == size_t(es) && a->nb[0] != size_t(es);
}

bool mul_mat_transposed_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    const Tensor* b = dst.src[1];
    if (dst.op != Op::MUL_MAT || a == nullptr || b == nullptr || !mul_mat_transposed_applies(dst)) return false;
    if (dst.type != Type::F32 || !dst.is_contiguous()) return false;
    if (!(b->type == Type::F32 || (b->type == Type::F16 && a->type == Type::F16))) return false;
    if (a->ne[0] != b->ne[0] || dst.ne[0] != a->ne[1] || dst.ne[1] != b->ne[1] || dst.ne[2] != b->ne[2] ||
        dst.ne[3] != b->ne[3]) {
        return false;
    }
    for (int d = 2; d < 4; ++d) {
        if (a->ne[d] == 0 ? b->ne[d] != 0 : b->ne[d] % a->ne[d] != 0) return false;
    }
    return true;
}

size_t mul_mat_transposed_work_size(const Tensor& dst, int nth) {
    if (dst.is_empty() || dst.src[0]->ne[0] == 0) return 0;
    return make_plan(dst, std::max(1, nth)).total;
}

void mul_mat_transposed_prepare(const ComputeParams& cp, Tensor& dst) {
    if (dst.is_empty() || dst.src[0]->ne[0] == 0 || cp.wdata == nullptr) return;
    if (cp.wsize < make_plan(dst, std::max(1, cp.nth)).total) return;  // compute reports it
    // Each thread starts on job ith, then takes the next free one.
    new (job_counter(scratch_base(cp))) std::atomic<int64_t>(cp.nth);
}

void compute_mul_mat_transposed(const ComputeParams& cp, Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const Plan p = make_plan(dst, cp.nth);
    if (cp.wdata == nullptr || cp.wsize < p.total) {
        fail<Error>("compute_mul_mat", "scratch of ", cp.wsize, " bytes is smaller than the ", p.total,
                    " bytes mul_mat_work_size asks for with ", cp.nth, " threads");
    }
    uint8_t* base = scratch_base(cp);
    float* pk = reinterpret_cast<float*>(base + kAlign + p.pack_bytes * size_t(cp.ith));
    const Kernel kern = kernel_in_use();
    std::atomic<int64_t>* counter = job_counter(base);
    for (int64_t job = cp.ith; job < p.jobs; job = counter->fetch_add(1)) run_job(p, kern, a, b, dst, job, pk);
}

}  // namespace mb
