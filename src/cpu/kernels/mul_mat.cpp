// MUL_MAT on the CPU: dst[i3][i2][i][j] = sum_k a[i3/r3][i2/r2][j][k] * b[i3][i2][i][k].
//
// Two paths:
// - few tokens (matrix-vector): activations are converted once into the form that pairs with the
//   weight type (vec_dot.h), then each weight row is dotted with every token. Jobs are blocks of
//   weight rows.
// - many tokens: weights are converted (dequantised for the 16-bit and quantized types) into packed
//   f32 panels and run through the register-tiled GEMM (gemm_f32.h). Converting weights costs
//   O(rows*K) against O(rows*tokens*K) multiply-adds, and f32 FMA tiles outrun integer dot products
//   once a panel is reused across many tokens. The work runs in phases, one per a matrix and block of
//   weight rows: the threads pack the block together into one shared copy (half the packing work and
//   half the cache footprint of a copy per thread), then share its jobs (blocks of tokens).
// - int8 activations asked for (the node's kMulMatInt8Param, quantized weights only): the
//   matrix-vector path for every token count, i.e. a GEMM in byte dot products: activations
//   quantized to 8-bit blocks once, then tiles of 4 weight rows x 2 tokens (vec_dot_rows.cpp), the
//   arithmetic ggml's CPU backend uses for quantized weights. Many tokens are cut into blocks of
//   kInt8TokensPerJob, so a block's quantized activations stay in L2 while every weight row passes.
//   q8_0 weights from gemm_q8_0_min_tokens() tokens (x86 builds): the int8 GEMM (gemm_q8_0.h) on the same
//   jobs and quantized activations, with its own order of float operations (one integer sum per
//   block), which AVX2 computes with integer accumulators in registers.
// - a transposed first operand (a float matrix stored with the product's columns contiguous, such as
//   attention keys kept as K^T): mul_mat_transposed.h, broadcast tiles with no horizontal sums.
// Threads take jobs from shared counters, which keeps every core busy when one of them is slowed by
// something else on the machine. The matrix-vector path has no barrier (a slot never waits for one
// that has not started, see kernels.h): the activation rows (or, fewer rows than threads, pieces of
// them) are claimed one by one and converted once, every slot waits only until those claimed pieces
// are done, then takes its own block of jobs
// (the same rows of the weights on the same slot call after call, so they stay in that core's cache)
// and, once that is done, helps with the other slots' blocks.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/errors.h"
#include "core/ops.h"
#include "cpu/cache_sizes.h"
#include "cpu/kernels/gemm_f32.h"
#include "cpu/kernels/gemm_q8_0.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/mul_mat_transposed.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"

namespace mb {

namespace {

// Below this many tokens per matrix the matrix-vector path wins: packing a weight panel costs about
// as much as the multiply-adds it then serves. f32 weights only need a transpose to pack; the other
// types are dequantised first, which moves the crossover up. Measured on Zen 3, 2 threads, with the
// 4-row x 2-token dot tiles (384x1536 and 1536x384 weights): f32 at 8 tokens 104/83 us (vec) vs
// 143/165 us (gemm), even near 12; q4_0 at 16 tokens 249/188 us vs 224/278 us, gemm ahead from 24.
constexpr int64_t kGemmMinTokensF32 = 12;
constexpr int64_t kGemmMinTokensConverted = 24;
// int8 activations: tokens per job (K = 1536 at 1.25 bytes per quantized element: 120 KiB).
constexpr int64_t kInt8TokensPerJob = 64;
// int8 activations against q8_0 weights: from gemm_q8_0_min_tokens() tokens, the int8 GEMM
// (gemm_q8_0.h, its own order of float operations) for every token of the product; below it, the
// matrix-vector kernels. Without AVX512-VNNI that is 6: up to 8 tokens the AVX2 GEMM runs one group of
// 8 (tokens past nt are zeros), so its cost is flat in the token count while the matrix-vector
// kernels' grows; measured on Zen 3 (1 thread, CPU time) with 384 x 51864 weights (the vocabulary
// projection), matrix-vector / GEMM ms at 2 tokens 2.43 / 3.97, 4: 3.11 / 3.64, 5: 3.76 / 3.69,
// 8: 5.62 / 3.60. With AVX512-VNNI it is 5: the few-token kernel (16 weight rows per vector, no
// token lanes to fill) beats the matrix-vector kernels from 5 tokens, beam search's (measured on
// Zen 4, see gemm_q8_0.cpp); below that its transpose of each weight panel costs more than it saves.
// Cache blocking, measured for a 32 KiB L1 and 512 KiB L2 per core and scaled to the host's caches
// (host_cache_sizes). A phase packs a block of weight rows over all of K (4 MiB there, shared, in
// L3). Per k block, a weight panel (16 x kc floats, up to 24 KiB) stays in L1 while a job's packed
// tokens (96 x kc, up to 144 KiB) stream from L2. K up to 384 takes one k block, so output tiles are
// written once and a phase may hold every row the budget allows (repacking tokens costs about
// 8/rows of the multiply-adds). With several k blocks the output tile is revisited per block, so
// rows are capped to keep it (96 x 512 floats, 192 KiB) in L2 beside the tokens. Every phase
// repacks the job's tokens, so fewer, larger phases pack less: on a host with 2 MiB of L2 and a
// large L3, a 2048-row weight is one phase instead of four.
constexpr int64_t kMaxKBlock = 384;
constexpr size_t kMeasuredL1 = size_t(32) << 10;
constexpr int64_t kMaxRowsMultiBlock = 512;
constexpr size_t kMeasuredL2 = size_t(512) << 10;
constexpr size_t kPackBudgetBytes = size_t(4) << 20;
// On AVX-512 hardware the GEMM tile reads two panels at once (2 x 16 x kc floats), so k blocks are
// shorter to keep both in L1. Measured on a Xeon with AVX-512 (48 KiB L1), 2 threads, 8 alternating
// runs each, min/median ms: 1500x1536x384 7.02/8.23 (256) vs 7.34/8.98 (384), 2048^3 72.8/89.9 vs
// 83.6/100.2; K = 384 shapes (one block either way) were as fast or faster with 384
// (1500x384x1536 6.78/7.85 vs 6.94/8.20), so only K that needs several blocks anyway gets the
// shorter ones. Chosen from the hardware, not the max_isa cap, so the plan (and the scratch size
// asked for before a compute) cannot change while a compute runs.
constexpr int64_t kMaxKBlockAvx512 = 256;
constexpr size_t kMeasuredL1Avx512 = size_t(48) << 10;

struct Blocking {
    int64_t max_k_block, max_k_block_avx512, max_rows_multi_block;
    size_t pack_budget;
};

// A measured value scaled by cache / measured cache, rounded down to a multiple of `step`.
int64_t scaled(int64_t value, size_t cache, size_t measured, int64_t step, int64_t lo, int64_t hi) {
    const int64_t v = int64_t(double(value) * double(cache) / double(measured)) / step * step;
    return std::max(lo, std::min(hi, v));
}

const Blocking& blocking() {
    static const Blocking b = [] {
        const CacheSizes& c = host_cache_sizes();
        Blocking out{};
        out.max_k_block = scaled(kMaxKBlock, c.l1d, kMeasuredL1, 32, 128, 512);
        out.max_k_block_avx512 = scaled(kMaxKBlockAvx512, c.l1d, kMeasuredL1Avx512, 32, 128, 512);
        out.max_rows_multi_block = scaled(kMaxRowsMultiBlock, c.l2, kMeasuredL2, 16, 256, 2048);
        // An eighth of L3 for the shared block (others use the rest), no less than the measured 4 MiB.
        out.pack_budget = std::max(kPackBudgetBytes, std::min(c.l3 / 8, size_t(16) << 20));
        return out;
    }();
    return b;
}

int64_t max_k_block(int64_t k) {
    const Blocking& b = blocking();
    return k > b.max_k_block && cpu_isa_hardware() == CpuIsa::Avx512 ? b.max_k_block_avx512 : b.max_k_block;
}
// Matrix-vector jobs read at most this many weight bytes: a job is the unit a slot that finished its
// own block takes from another, so once the weights are far larger than the caches the last job
// running alone sets the tail (4 jobs per thread of a 256 MiB matrix at 16 threads: 4 MiB each, the
// last one at a single core's share of the memory bandwidth).
constexpr size_t kVecJobBytes = size_t(256) << 10;
// Activation rows are converted in pieces of at least this many elements (a multiple of 256, so a
// piece is whole q8_K and q8 blocks) when there are fewer rows than threads: one token's row is then
// shared out as ggml splits it, instead of one slot converting it while the others wait.
constexpr int64_t kConvPieceMin = 512;
constexpr int64_t kTokensPerJob = 96;  // a multiple of kGemmMR
constexpr int64_t kJobsPerThread = 4;  // enough jobs for the shared counter to even out the threads
constexpr size_t kAlign = 64;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_weight_type(Type t) {
    if (type_traits(t).is_grid) return true;
    switch (t) {
        case Type::F32:
        case Type::F16:
        case Type::BF16:
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
        case Type::Q8_0:
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
        case Type::IQ4_NL:
        case Type::IQ4_XS:
        case Type::MXFP4:
            return true;
        default:
            return false;
    }
}

struct Shape {
    int64_t k, m, n;          // a.ne0, a.ne1 (weight rows, dst.ne0), b.ne1 (tokens, dst.ne1)
    int64_t a2, a3, r2, r3;   // a's matrices and how many b matrices share each, per dim
    int64_t n_amat, n_sub;    // a matrices; b matrices per a matrix
};

Shape shape_of(const Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    Shape s{};
    s.k = a.ne[0];
    s.m = a.ne[1];
    s.n = b.ne[1];
    s.a2 = a.ne[2];
    s.a3 = a.ne[3];
    s.r2 = a.ne[2] > 0 ? b.ne[2] / a.ne[2] : 0;
    s.r3 = a.ne[3] > 0 ? b.ne[3] / a.ne[3] : 0;
    s.n_amat = s.a2 * s.a3;
    s.n_sub = s.r2 * s.r3;
    return s;
}

struct Plan {
    bool gemm = false;
    bool int8_gemm = false;  // int8 activations x q8_0 weights through gemm_q8_0 (scratch per thread)
    // Activation rows: converted into scratch (conv_type rows of conv_row_bytes), or read in place.
    bool convert_b = false;
    VecType conv_type = VecType::F32;
    size_t conv_row_bytes = 0;
    int64_t conv_piece = 0, conv_pieces = 1;  // vec: activation rows converted in pieces of conv_piece elements
    int64_t kc = 0, n_kblocks = 0;  // k blocking (gemm)
    // gemm: phases (a matrix x block of rows_per_phase weight rows), each cut into jobs (b matrix x
    // block of tokens x block of rows_per_job rows). vec: one phase of jobs (a matrix x block of
    // rows_per_job rows x b matrix).
    int64_t n_phases = 1, rblocks_per_amat = 1, rows_per_phase = 0;
    int64_t rows_per_job = 0, rsplits = 1, tokens_per_job = 0, n_tchunks = 1, jobs_per_phase = 0;
    // Scratch: job counters (a cache line each; gemm: one per phase; vec: activation rows claimed,
    // activation rows done, then one per slot), converted b, the shared packed weights (gemm), then per
    // thread a tile of dequantised rows and the packed tokens of one k block (gemm).
    int64_t n_counters = 1;
    size_t conv_offset = 0, pack_offset = 0, pack_bytes = 0, thread_offset = 0, tmp_bytes = 0;
    size_t thread_bytes = 0, total = 0;
};

// Whether b's rows can feed the chosen path without conversion.
bool b_usable_in_place(const Tensor& b, VecType want) {
    const size_t es = want == VecType::F32 ? sizeof(float) : sizeof(uint16_t);
    const Type t = want == VecType::F32 ? Type::F32 : Type::F16;
    if (want == VecType::Q8 || want == VecType::Q8K || b.type != t || b.nb[0] != es) {
        return false;
    }
    return b.nb[1] % es == 0 && b.nb[2] % es == 0 && b.nb[3] % es == 0;
}

Plan make_plan(const Tensor& dst, int nth) {
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const Shape s = shape_of(dst);
    const int64_t n_bmat = s.n_amat * s.n_sub;
    Plan p;
    const bool int8 = dst.op_params[ops::kMulMatInt8Param] != 0 && type_traits(a.type).is_quantized;
    p.gemm = !int8 && s.n >= (a.type == Type::F32 ? kGemmMinTokensF32 : kGemmMinTokensConverted);
    p.conv_type = p.gemm ? VecType::F32 : vec_type_for(a.type, b.type);
    p.convert_b = !b_usable_in_place(b, p.conv_type);
    p.conv_row_bytes = align_up(vec_row_bytes(p.conv_type, s.k));
    const int64_t want_jobs = kJobsPerThread * nth;

    if (p.gemm) {
        p.n_kblocks = ceil_div(s.k, max_k_block(s.k));
        // Multiples of 32 keep every k block whole in quantized blocks (K is then a multiple of 32);
        // the k-quants' 256-value super-blocks need multiples of 256, which may take fewer blocks.
        const int64_t qb = type_traits(a.type).block_size;
        p.kc = round_up(ceil_div(s.k, p.n_kblocks), std::max<int64_t>(32, qb));
        if (qb > 32) p.n_kblocks = ceil_div(s.k, p.kc);
        const int64_t k_padded = p.kc * p.n_kblocks;
        const int64_t budget_rows = int64_t(blocking().pack_budget / (sizeof(float) * size_t(k_padded)));
        int64_t max_rows = std::max<int64_t>(kGemmNR, budget_rows / kGemmNR * kGemmNR);
        if (p.n_kblocks > 1) {
            max_rows = std::min(max_rows, blocking().max_rows_multi_block);
        }
        p.rblocks_per_amat = ceil_div(s.m, max_rows);
        p.rows_per_phase = round_up(ceil_div(s.m, p.rblocks_per_amat), kGemmNR);
        p.rblocks_per_amat = ceil_div(s.m, p.rows_per_phase);
        p.n_phases = s.n_amat * p.rblocks_per_amat;
        // Enough jobs per phase for every thread: smaller token blocks first (they only repeat token
        // packing per weight panel), then blocks of the phase's rows (which repack tokens per block).
        p.tokens_per_job = std::min(round_up(s.n, kGemmMR), kTokensPerJob);
        p.n_tchunks = ceil_div(s.n, p.tokens_per_job);
        if (s.n_sub * p.n_tchunks < want_jobs) {
            const int64_t per = ceil_div(want_jobs, s.n_sub);
            p.tokens_per_job = std::max<int64_t>(4 * kGemmMR, round_up(ceil_div(s.n, per), kGemmMR));
            p.tokens_per_job = std::min(p.tokens_per_job, round_up(s.n, kGemmMR));
            p.n_tchunks = ceil_div(s.n, p.tokens_per_job);
        }
        p.rsplits = std::min(ceil_div(p.rows_per_phase, kGemmNR),
                             std::max<int64_t>(1, ceil_div(want_jobs, s.n_sub * p.n_tchunks)));
        p.rows_per_job = round_up(ceil_div(p.rows_per_phase, p.rsplits), kGemmNR);
        p.rsplits = ceil_div(p.rows_per_phase, p.rows_per_job);
        p.jobs_per_phase = s.n_sub * p.n_tchunks * p.rsplits;
        p.pack_bytes = align_up(sizeof(float) * size_t(p.rows_per_phase * k_padded));
        p.tmp_bytes = align_up(sizeof(float) * size_t(kGemmNR * p.kc));
        const size_t tokens_bytes = align_up(sizeof(float) * size_t(round_up(p.tokens_per_job, kGemmMR) * p.kc));
        p.thread_bytes = p.tmp_bytes + tokens_bytes;
    } else {
        p.tokens_per_job = s.n > kInt8TokensPerJob ? kInt8TokensPerJob : s.n;  // only int8 gets past 24
        p.n_tchunks = ceil_div(s.n, p.tokens_per_job);
        // Blocks of whole dot tiles; a block boundary inside a cache line of dst costs one line
        // shared between two threads, far less than uneven blocks would at 16 threads.
        const int64_t per_mat = std::max<int64_t>(1, ceil_div(want_jobs, n_bmat * p.n_tchunks));
        const int64_t max_rows = std::max<int64_t>(1, int64_t(kVecJobBytes / std::max<size_t>(1, a.nb[1])));
        p.rows_per_job = round_up(std::min(ceil_div(s.m, per_mat), max_rows), kVecDotRows);
        const int64_t b_rows = s.n * n_bmat;
        p.conv_piece = s.k;
        if (b_rows < nth) {
            const int64_t want = std::min(ceil_div(nth, b_rows), ceil_div(s.k, kConvPieceMin));
            p.conv_piece = std::min(s.k, round_up(ceil_div(s.k, want), 256));
        }
        p.conv_pieces = ceil_div(s.k, std::max<int64_t>(1, p.conv_piece));
        p.jobs_per_phase = n_bmat * p.n_tchunks * ceil_div(s.m, p.rows_per_job);
        // From the types and shape only, not the max_isa cap (which picks the kernel at compute
        // time), so the scratch asked for before a compute fits whatever runs.
        p.int8_gemm = int8 && a.type == Type::Q8_0 && s.n >= gemm_q8_0_min_tokens() && gemm_q8_0_built();
        if (p.int8_gemm) {
            p.thread_bytes = align_up(gemm_q8_0_scratch_bytes(s.k, p.tokens_per_job));
        }
    }

    p.n_counters = p.gemm ? p.n_phases : 2 + nth;
    p.conv_offset = kAlign * size_t(p.n_counters);
    const size_t conv_bytes = p.convert_b ? p.conv_row_bytes * size_t(s.n * n_bmat) : 0;
    p.pack_offset = p.conv_offset + conv_bytes;
    p.thread_offset = p.pack_offset + p.pack_bytes;
    // The extra kAlign lets compute align the scratch base.
    p.total = p.thread_offset + p.thread_bytes * size_t(nth) + kAlign;
    return p;
}

struct Job {
    int64_t i02, i03, i12, i13;  // a matrix and b matrix
    int64_t r0, r1, t0, t1;      // weight rows and tokens
};

// b matrix `sub` (0 .. r2*r3) of those that share a matrix `amat`.
void set_matrices(const Shape& s, int64_t amat, int64_t sub, Job& j) {
    j.i02 = amat % s.a2;
    j.i03 = amat / s.a2;
    j.i12 = j.i02 * s.r2 + sub % s.r2;
    j.i13 = j.i03 * s.r3 + sub / s.r2;
}

// Job `job` of gemm phase `phase`; rows past the phase's block come out empty (r0 >= r1).
Job decode_gemm(const Plan& p, const Shape& s, int64_t phase, int64_t job) {
    Job j{};
    const int64_t rs = job % p.rsplits;
    job /= p.rsplits;
    const int64_t tc = job % p.n_tchunks;
    set_matrices(s, phase / p.rblocks_per_amat, job / p.n_tchunks, j);
    const int64_t phase_r0 = (phase % p.rblocks_per_amat) * p.rows_per_phase;
    const int64_t phase_r1 = std::min(s.m, phase_r0 + p.rows_per_phase);
    j.r0 = std::min(phase_r1, phase_r0 + rs * p.rows_per_job);
    j.r1 = std::min(phase_r1, j.r0 + p.rows_per_job);
    j.t0 = tc * p.tokens_per_job;
    j.t1 = std::min(s.n, j.t0 + p.tokens_per_job);
    return j;
}

// Vec jobs run in (a matrix, row block, b matrix, token block) order, so b matrices that share
// weights, and the token blocks of one b matrix, follow each other while those rows are in cache.
Job decode_vec(const Plan& p, const Shape& s, int64_t job) {
    Job j{};
    const int64_t tc = job % p.n_tchunks;
    job /= p.n_tchunks;
    const int64_t sub = job % s.n_sub;
    job /= s.n_sub;
    const int64_t rblocks = ceil_div(s.m, p.rows_per_job);
    set_matrices(s, job / rblocks, sub, j);
    j.r0 = (job % rblocks) * p.rows_per_job;
    j.r1 = std::min(s.m, j.r0 + p.rows_per_job);
    j.t0 = tc * p.tokens_per_job;
    j.t1 = std::min(s.n, j.t0 + p.tokens_per_job);
    return j;
}

// Address of activation row (i1, i2, i3) as the compute paths read it.
const uint8_t* b_row(const Plan& p, const Shape& s, const Tensor& b, const uint8_t* conv, int64_t i1, int64_t i2,
                     int64_t i3) {
    if (p.convert_b) {
        const int64_t b2 = s.a2 * s.r2;
        return conv + p.conv_row_bytes * size_t((i3 * b2 + i2) * s.n + i1);
    }
    return host_data(b) + i1 * b.nb[1] + i2 * b.nb[2] + i3 * b.nb[3];
}

int64_t activation_rows(const Shape& s) { return s.n * s.n_amat * s.n_sub; }

// Elements [e0, e1) of activation row `row` (e0 a multiple of 256, so whole blocks of every form).
void convert_activation_part(const Plan& p, const Shape& s, const Tensor& b, uint8_t* conv, int64_t row, int64_t e0,
                             int64_t e1) {
    const int64_t b2 = s.a2 * s.r2;
    const int64_t i1 = row % s.n;
    const int64_t i2 = (row / s.n) % b2;
    const int64_t i3 = row / (s.n * b2);
    const uint8_t* x = host_data(b) + i1 * b.nb[1] + i2 * b.nb[2] + i3 * b.nb[3] + e0 * b.nb[0];
    vec_prepare_row(p.conv_type, b.type, x, b.nb[0], e1 - e0,
                    conv + p.conv_row_bytes * size_t(row) + vec_row_bytes(p.conv_type, e0));
}

void convert_activation_row(const Plan& p, const Shape& s, const Tensor& b, uint8_t* conv, int64_t row) {
    convert_activation_part(p, s, b, conv, row, 0, s.k);
}

// gemm: this slot's share, by a static split (a barrier follows).
void convert_activations(const ComputeParams& cp, const Plan& p, const Shape& s, const Tensor& b, uint8_t* conv) {
    int64_t begin, end;
    split_range(activation_rows(s), cp.ith, cp.nth, &begin, &end);
    for (int64_t row = begin; row < end; ++row) convert_activation_row(p, s, b, conv, row);
}

// This thread's share of packing phase `phase`: the block's rows over every k block, as
// gemm_f32_block expects (k block kb at pack + kb * rows_per_phase * kc, its panels consecutive).
void pack_phase(const ComputeParams& cp, const Plan& p, const Shape& s, const Tensor& a, int64_t phase, float* pack,
                float* tmp) {
    const int64_t amat = phase / p.rblocks_per_amat;
    const uint8_t* base = host_data(a) + (amat % s.a2) * a.nb[2] + (amat / s.a2) * a.nb[3];
    const int64_t r0 = (phase % p.rblocks_per_amat) * p.rows_per_phase;
    const int64_t r1 = std::min(s.m, r0 + p.rows_per_phase);
    const int64_t n_panels = ceil_div(r1 - r0, kGemmNR);
    int64_t begin, end;
    split_range(n_panels * p.n_kblocks, cp.ith, cp.nth, &begin, &end);
    for (int64_t unit = begin; unit < end; ++unit) {
        const int64_t kb = unit / n_panels;
        const int64_t r = r0 + (unit % n_panels) * kGemmNR;
        const int64_t k0 = kb * p.kc;
        const int64_t kc = std::min(p.kc, s.k - k0);
        const size_t k_off = row_size(a.type, k0);
        const int nr = int(std::min<int64_t>(kGemmNR, r1 - r));
        const float* rows[kGemmNR];
        for (int i = 0; i < nr; ++i) {
            const uint8_t* src = base + (r + i) * a.nb[1] + k_off;
            if (a.type == Type::F32) {
                rows[i] = reinterpret_cast<const float*>(src);
            } else {
                dequantize_row(a.type, src, tmp + i * p.kc, kc);
                rows[i] = tmp + i * p.kc;
            }
        }
        gemm_pack_panel(rows, nr, kc, pack + kb * p.rows_per_phase * p.kc + (r - r0) * kc);
    }
}

// pack holds the phase's block, whose first row is phase_r0.
void run_gemm_job(const Plan& p, const Shape& s, const Tensor& b, Tensor& dst, const uint8_t* conv, const Job& j,
                  const float* pack, int64_t phase_r0, float* tokens) {
    const float* b0 = reinterpret_cast<const float*>(b_row(p, s, b, conv, j.t0, j.i12, j.i13));
    const int64_t ldb = p.convert_b ? int64_t(p.conv_row_bytes / sizeof(float)) : int64_t(b.nb[1] / sizeof(float));
    float* c = reinterpret_cast<float*>(at(dst, j.r0, j.t0, j.i12, j.i13));
    const int64_t ldc = int64_t(dst.nb[1] / sizeof(float));
    for (int64_t kb = 0; kb < p.n_kblocks; ++kb) {
        const int64_t k0 = kb * p.kc;
        const int64_t kc = std::min(p.kc, s.k - k0);
        gemm_pack_tokens(b0 + k0, ldb, j.t1 - j.t0, kc, tokens);
        const float* panels = pack + kb * p.rows_per_phase * p.kc + (j.r0 - phase_r0) * kc;
        gemm_f32_block(kc, panels, j.r1 - j.r0, tokens, j.t1 - j.t0, c, ldc, kb > 0);
    }
}

// Whether the wide tiles take an odd token count of 3 or 5 in one call (vec_dot_rows_wide_fn), rather
// than its pairs side by side and the last token through the one-token tile. Where that tile reads its
// rows one after the other (VecTileOrder::Rows, AMD) and the weights come from memory, the one-token
// tile's sequential stream is the faster read: f16 weights of 51864 x 384 (40 MB) evicted between
// calls, 2 threads, Zen 4, 3 and 5 tokens 1.8-2.4 -> 2.3-2.6 ms in one call; 26041 x 384 (20 MB)
// 1.6-1.8 -> 1.0-1.3; Whisper base's cross-attention keys (6 x 8 heads of 1500 x 64 f16, 1.5 MB a
// layer) 5 tokens 0.98-1.06 -> 0.71 ms, 3 tokens 1.0-1.19 -> 0.57-0.61 (medians, two builds run in
// turn). So in one call everywhere else, and on Rows hosts up to this many bytes of weights per matrix.
constexpr size_t kOddTileMaxBytes = size_t(8) << 20;

bool odd_tiles(const Shape& s, const Tensor& a) {
    return vec_tile_order() == VecTileOrder::Interleaved || size_t(s.m) * a.nb[1] <= kOddTileMaxBytes;
}

// Weight rows go kVecDotRows at a time, tokens kVecDotTokens at a time, through dot_rows where there
// is one (dst is packed, so a token's results for consecutive rows are adjacent); the rest one by one.
// With int8_gemm, the whole job goes through the int8 GEMM.
void run_vec_job(const Plan& p, const Shape& s, const Tensor& a, const Tensor& b, Tensor& dst, const uint8_t* conv,
                 const Job& j, VecDotFn dot, VecDotRowsFn dot_rows, VecDotRowsFn dot_wide, uint8_t* scratch) {
    const uint8_t* base = host_data(a) + j.i02 * a.nb[2] + j.i03 * a.nb[3];
    int64_t r = j.r0;
    if (p.int8_gemm) {
        const void* acts[kInt8TokensPerJob];
        for (int64_t t = j.t0; t < j.t1; ++t) acts[t - j.t0] = b_row(p, s, b, conv, t, j.i12, j.i13);
        float* out = reinterpret_cast<float*>(at(dst, r, j.t0, j.i12, j.i13));
        gemm_q8_0(s.k, base + r * a.nb[1], a.nb[1], j.r1 - j.r0, acts, j.t1 - j.t0, out,
                  int64_t(dst.nb[1] / sizeof(float)), scratch);
        return;
    }
    if (dot_wide != nullptr) {
        // Pairs of tokens as the two-token tile takes them (an odd last token through the one-token
        // tile), up to three pairs per call: the same results bit for bit, each weight row read once
        // per six tokens instead of once per two. The last three or five tokens go in one call where
        // odd_tiles says (pairs and the odd one side by side, the same bits again).
        const bool odd = odd_tiles(s, a);
        const int64_t pairs_end = j.t0 + (j.t1 - j.t0) / 2 * 2;
        for (; r + kVecDotRows <= j.r1; r += kVecDotRows) {
            const uint8_t* w = base + r * a.nb[1];
            const void* acts[kVecDotTokensWide];
            float v[kVecDotTokensWide * kVecDotRows];
            int64_t t = j.t0;
            while (t < j.t1) {
                const int64_t left = j.t1 - t;
                int nt = 1;
                if (odd && (left == 3 || left == 5)) {
                    nt = int(left);
                } else if (t < pairs_end) {
                    nt = int(std::min<int64_t>(kVecDotTokensWide, pairs_end - t));
                }
                for (int u = 0; u < nt; ++u) acts[u] = b_row(p, s, b, conv, t + u, j.i12, j.i13);
                if (nt == 1) {
                    dot_rows(s.k, w, a.nb[1], acts, 1, v);
                } else {
                    dot_wide(s.k, w, a.nb[1], acts, nt, v);
                }
                for (int u = 0; u < nt; ++u) {
                    std::memcpy(at(dst, r, t + u, j.i12, j.i13), v + u * kVecDotRows, kVecDotRows * sizeof(float));
                }
                t += nt;
            }
        }
    } else if (dot_rows != nullptr) {
        for (; r + kVecDotRows <= j.r1; r += kVecDotRows) {
            const uint8_t* w = base + r * a.nb[1];
            for (int64_t t = j.t0; t < j.t1; t += kVecDotTokens) {
                const int nt = int(std::min<int64_t>(kVecDotTokens, j.t1 - t));
                const void* acts[kVecDotTokens];
                for (int u = 0; u < nt; ++u) acts[u] = b_row(p, s, b, conv, t + u, j.i12, j.i13);
                float v[kVecDotTokens * kVecDotRows];
                dot_rows(s.k, w, a.nb[1], acts, nt, v);
                for (int u = 0; u < nt; ++u) {
                    std::memcpy(at(dst, r, t + u, j.i12, j.i13), v + u * kVecDotRows, kVecDotRows * sizeof(float));
                }
            }
        }
    }
    for (; r < j.r1; ++r) {
        const uint8_t* w = base + r * a.nb[1];
        for (int64_t t = j.t0; t < j.t1; ++t) {
            const float v = dot(s.k, w, b_row(p, s, b, conv, t, j.i12, j.i13));
            std::memcpy(at(dst, r, t, j.i12, j.i13), &v, sizeof v);
        }
    }
}

void zero_dst(const ComputeParams& cp, Tensor& dst) {
    const int64_t rows = dst.nrows();
    int64_t begin, end;
    split_range(rows, cp.ith, cp.nth, &begin, &end);
    for (int64_t r = begin; r < end; ++r) {
        const int64_t i1 = r % dst.ne[1];
        const int64_t i2 = (r / dst.ne[1]) % dst.ne[2];
        const int64_t i3 = r / (dst.ne[1] * dst.ne[2]);
        std::memset(at(dst, 0, i1, i2, i3), 0, size_t(dst.ne[0]) * sizeof(float));
    }
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

std::atomic<int64_t>* counter_at(uint8_t* base, int64_t i) {
    return reinterpret_cast<std::atomic<int64_t>*>(base + kAlign * size_t(i));
}

uint8_t* scratch_base(const ComputeParams& cp) {
    const uintptr_t raw = reinterpret_cast<uintptr_t>(cp.wdata);
    return cp.wdata + (align_up(raw) - raw);
}

// The matrix-vector path, for slot cp.ith (see the top of the file). Counters 0 and 1 count the
// activation pieces claimed and converted; counter 2 + t counts the jobs taken from slot t's block.
void run_vec(const ComputeParams& cp, const Plan& p, const Shape& s, const Tensor& a, const Tensor& b, Tensor& dst,
             uint8_t* base, const uint8_t* conv) {
    if (p.convert_b) {
        const int64_t units = activation_rows(s) * p.conv_pieces;
        std::atomic<int64_t>* claimed = counter_at(base, 0);
        std::atomic<int64_t>* converted = counter_at(base, 1);
        uint8_t* out = base + p.conv_offset;
        for (int64_t u = claimed->fetch_add(1); u < units; u = claimed->fetch_add(1)) {
            const int64_t e0 = (u % p.conv_pieces) * p.conv_piece;
            convert_activation_part(p, s, b, out, u / p.conv_pieces, e0, std::min(s.k, e0 + p.conv_piece));
            converted->fetch_add(1, std::memory_order_release);
        }
        // Every piece is claimed by a slot that is running, so this waits for work in progress only.
        while (converted->load(std::memory_order_acquire) < units) {
            cpu_relax();
        }
    }
    const VecDotFn dot = vec_dot_fn(a.type, p.conv_type);
    const VecDotRowsFn dot_rows = vec_dot_rows_fn(a.type, p.conv_type);
    // MB_VEC_WIDE_TILES=0 turns the wide tiles off (benchmarks/small_rows_matmul.py's before/after).
    static const bool wide_on = [] {
        const char* e = std::getenv("MB_VEC_WIDE_TILES");
        return e == nullptr || std::strcmp(e, "0") != 0;
    }();
    const VecDotRowsFn dot_wide = wide_on && dot_rows != nullptr ? vec_dot_rows_wide_fn(a.type, p.conv_type) : nullptr;
    uint8_t* scratch = base + p.thread_offset + p.thread_bytes * size_t(cp.ith);
    for (int k = 0; k < cp.nth; ++k) {
        const int t = (cp.ith + k) % cp.nth;
        const int64_t first = p.jobs_per_phase * t / cp.nth;
        const int64_t count = p.jobs_per_phase * (t + 1) / cp.nth - first;
        std::atomic<int64_t>* taken = counter_at(base, 2 + t);
        // A read first: a block already done costs no write to its owner's cache line.
        if (t != cp.ith && taken->load(std::memory_order_relaxed) >= count) {
            continue;
        }
        for (int64_t j = taken->fetch_add(1); j < count; j = taken->fetch_add(1)) {
            run_vec_job(p, s, a, b, dst, conv, decode_vec(p, s, first + j), dot, dot_rows, dot_wide, scratch);
        }
    }
}

}  // namespace

void mul_mat_prepare(const ComputeParams& cp, Tensor& dst) {
    if (mul_mat_transposed_applies(dst)) {
        mul_mat_transposed_prepare(cp, dst);
        return;
    }
    if (dst.is_empty() || dst.src[0]->ne[0] == 0 || cp.wdata == nullptr) {
        return;
    }
    const Plan p = make_plan(dst, std::max(1, cp.nth));
    if (cp.wsize < p.total) {
        return;  // compute_mul_mat reports it
    }
    uint8_t* base = scratch_base(cp);
    for (int64_t i = 0; i < p.n_counters; ++i) {
        // gemm: each thread starts on job ith of a phase, then takes the next free one.
        new (counter_at(base, i)) std::atomic<int64_t>(p.gemm ? cp.nth : 0);
    }
}

bool mul_mat_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    const Tensor* b = dst.src[1];
    if (dst.op != Op::MUL_MAT || a == nullptr || b == nullptr) {
        return false;
    }
    if (mul_mat_transposed_applies(dst)) {
        return mul_mat_transposed_supported(dst);
    }
    if (dst.type != Type::F32 || !dst.is_contiguous() || !is_weight_type(a->type)) {
        return false;
    }
    if (!(b->type == Type::F32 || (b->type == Type::F16 && a->type == Type::F16))) {
        return false;
    }
    const TypeTraits& ta = type_traits(a->type);
    // Weight rows are read as whole rows of blocks.
    if (a->nb[0] != ta.type_size || a->ne[0] % ta.block_size != 0) {
        return false;
    }
    if (a->ne[0] != b->ne[0] || dst.ne[0] != a->ne[1] || dst.ne[1] != b->ne[1] || dst.ne[2] != b->ne[2] ||
        dst.ne[3] != b->ne[3]) {
        return false;
    }
    for (int d = 2; d < 4; ++d) {
        if (a->ne[d] == 0 ? b->ne[d] != 0 : b->ne[d] % a->ne[d] != 0) {
            return false;
        }
    }
    return true;
}

int mul_mat_threads(const Tensor& dst, int nth) {
    const double macs = double(dst.src[0]->ne[0]) * double(dst.nelements());
    const int64_t want = int64_t(macs / double(1 << 16));
    return int(std::max<int64_t>(1, std::min<int64_t>(want, nth)));
}

size_t mul_mat_work_size(const Tensor& dst, int nth) {
    if (dst.is_empty() || dst.src[0]->ne[0] == 0) {
        return 0;
    }
    if (mul_mat_transposed_applies(dst)) {
        return mul_mat_transposed_work_size(dst, nth);
    }
    return make_plan(dst, std::max(1, nth)).total;
}

void compute_mul_mat(const ComputeParams& cp, Tensor& dst) {
    if (dst.is_empty()) {
        return;
    }
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    if (a.ne[0] == 0) {
        zero_dst(cp, dst);
        return;
    }
    if (mul_mat_transposed_applies(dst)) {
        compute_mul_mat_transposed(cp, dst);
        return;
    }
    const Shape s = shape_of(dst);
    const Plan p = make_plan(dst, cp.nth);
    if (cp.wdata == nullptr || cp.wsize < p.total) {
        fail<Error>("compute_mul_mat", "scratch of ", cp.wsize, " bytes is smaller than the ", p.total,
                    " bytes mul_mat_work_size asks for with ", cp.nth, " threads");
    }
    uint8_t* base = scratch_base(cp);
    uint8_t* conv = base + p.conv_offset;

    if (!p.gemm) {
        run_vec(cp, p, s, a, b, dst, base, conv);
        return;
    }
    if (p.convert_b) {
        convert_activations(cp, p, s, b, conv);  // the barrier after the first packing orders it too
    }
    auto counter = [&](int64_t phase) { return counter_at(base, phase); };
    float* pack = reinterpret_cast<float*>(base + p.pack_offset);
    float* tmp = reinterpret_cast<float*>(base + p.thread_offset + p.thread_bytes * size_t(cp.ith));
    float* tokens = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(tmp) + p.tmp_bytes);
    for (int64_t phase = 0; phase < p.n_phases; ++phase) {
        pack_phase(cp, p, s, a, phase, pack, tmp);
        if (cp.nth > 1) {
            cp.barrier();
        }
        const int64_t phase_r0 = (phase % p.rblocks_per_amat) * p.rows_per_phase;
        for (int64_t job = cp.ith; job < p.jobs_per_phase; job = counter(phase)->fetch_add(1)) {
            const Job j = decode_gemm(p, s, phase, job);
            if (j.r0 < j.r1) {
                run_gemm_job(p, s, b, dst, conv, j, pack, phase_r0, tokens);
            }
        }
        // The next phase repacks the shared block only once every job of this one is done.
        if (cp.nth > 1 && phase + 1 < p.n_phases) {
            cp.barrier();
        }
    }
}

}  // namespace mb
