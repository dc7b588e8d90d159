// OUT_PROD (ggml_out_prod): dst[i2, i3] (ne10 x ne00, f32) = b[i2, i3]^T a[j2, j3] summed over the shared
// dim 1: dst[n][m] = sum_k a[k][m] * b[k][n], a's matrices broadcast over b's (j2 = i2 / (ne12 / ne02)).
//
// It is the f32 GEMM of MUL_MAT (gemm_f32.h: C[i][j] = sum_k B[i][k] W[j][k]) with the tokens B = b's
// columns and the weights W = a's columns: both are packed here straight from rows of a and b (each k
// step reads NR, resp. MR, consecutive floats). Threads split the output rows of every matrix; a
// thread's rows go in chunks of kRows, each chunk's tokens packed once per k block and the panels of
// a packed per chunk (a tenth of the work at worst, kRows = 96).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/gemm_f32.h"
#include "cpu/kernels/kernels.h"

namespace mb {

namespace {

constexpr int64_t kKc = 256;                 // k block
constexpr int64_t kRows = 16 * kGemmMR;      // output rows per chunk (tokens packed together)
constexpr int64_t kCols = 8 * kGemmNR;       // output columns per GEMM call (panels packed together)

inline float load_f32(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// out[(c / NR) * kc * NR + k * NR + c % NR] = x[k0 + k][c0 + c] (x: a), zeros past column n.
void pack_cols(const Tensor& x, const uint8_t* base, int64_t k0, int64_t kc, int64_t c0, int64_t n, int64_t width,
               float* out) {
    const int64_t groups = (width + kGemmNR - 1) / kGemmNR;
    for (int64_t g = 0; g < groups; ++g) {
        float* panel = out + g * kc * kGemmNR;
        for (int64_t k = 0; k < kc; ++k) {
            const uint8_t* row = base + size_t(k0 + k) * x.nb[1];
            float* dst = panel + k * kGemmNR;
            for (int64_t r = 0; r < kGemmNR; ++r) {
                const int64_t c = c0 + g * kGemmNR + r;
                dst[r] = c < n ? load_f32(row + size_t(c) * x.nb[0]) : 0.0f;
            }
        }
    }
}

// out[(c / MR) * kc * MR + k * MR + c % MR] = x[k0 + k][c0 + c] (x: b), zeros past column n.
void pack_tokens(const Tensor& x, const uint8_t* base, int64_t k0, int64_t kc, int64_t c0, int64_t n, int64_t width,
                 float* out) {
    const int64_t groups = (width + kGemmMR - 1) / kGemmMR;
    for (int64_t g = 0; g < groups; ++g) {
        float* grp = out + g * kc * kGemmMR;
        for (int64_t k = 0; k < kc; ++k) {
            const uint8_t* row = base + size_t(k0 + k) * x.nb[1];
            float* dst = grp + k * kGemmMR;
            for (int64_t r = 0; r < kGemmMR; ++r) {
                const int64_t c = c0 + g * kGemmMR + r;
                dst[r] = c < n ? load_f32(row + size_t(c) * x.nb[0]) : 0.0f;
            }
        }
    }
}

constexpr size_t kThreadFloats = size_t(kKc * kRows + kKc * kCols);

}  // namespace

bool out_prod_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    const Tensor* b = dst.src[1];
    if (dst.op != Op::OUT_PROD || !a || !b || a->type != Type::F32 || b->type != Type::F32 || dst.type != Type::F32) {
        return false;
    }
    return a->ne[1] == b->ne[1] && a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 &&
           b->ne[3] % a->ne[3] == 0 && dst.ne[0] == a->ne[0] && dst.ne[1] == b->ne[0] && dst.ne[2] == b->ne[2] &&
           dst.ne[3] == b->ne[3] && dst.nb[0] == sizeof(float);
}

size_t out_prod_work_size(const Tensor&, int nth) { return size_t(nth) * kThreadFloats * sizeof(float); }

void compute_out_prod(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const int64_t M = dst.ne[0], N = dst.ne[1], K = a.ne[1];
    float* tokens = reinterpret_cast<float*>(p.wdata) + size_t(p.ith) * kThreadFloats;
    float* panels = tokens + kKc * kRows;
    const int64_t r2 = b.ne[2] / a.ne[2], r3 = b.ne[3] / a.ne[3];
    // Work items: (matrix, chunk of kRows output rows), dealt out in turn.
    const int64_t chunks = (N + kRows - 1) / kRows;
    const int64_t items = chunks * dst.ne[2] * dst.ne[3];
    for (int64_t it = p.ith; it < items; it += p.nth) {
        const int64_t ch = it % chunks, mat = it / chunks;
        const int64_t i2 = mat % dst.ne[2], i3 = mat / dst.ne[2];
        const uint8_t* abase = host_data(a) + size_t(i2 / r2) * a.nb[2] + size_t(i3 / r3) * a.nb[3];
        const uint8_t* bbase = host_data(b) + size_t(i2) * b.nb[2] + size_t(i3) * b.nb[3];
        float* c = reinterpret_cast<float*>(host_data(dst) + size_t(i2) * dst.nb[2] + size_t(i3) * dst.nb[3]);
        const int64_t ldc = int64_t(dst.nb[1] / sizeof(float));
        const int64_t n0 = ch * kRows, nn = std::min(kRows, N - n0);
        if (K == 0) {
            for (int64_t i = 0; i < nn; ++i) std::fill(c + (n0 + i) * ldc, c + (n0 + i) * ldc + M, 0.0f);
            continue;
        }
        for (int64_t k0 = 0; k0 < K; k0 += kKc) {
            const int64_t kc = std::min(kKc, K - k0);
            pack_tokens(b, bbase, k0, kc, n0, N, nn, tokens);
            for (int64_t m0 = 0; m0 < M; m0 += kCols) {
                const int64_t mm = std::min(kCols, M - m0);
                pack_cols(a, abase, k0, kc, m0, M, mm, panels);
                gemm_f32_block(kc, panels, mm, tokens, nn, c + n0 * ldc + m0, ldc, k0 > 0);
            }
        }
    }
}

}  // namespace mb
