// POOL_2D (ggml_pool_2d): f32 [W, H, C, N] -> f32 [OW, OH, C, N], windows k0 x k1 at strides s0, s1
// from -p0, -p1. Max over the window's cells inside the input; avg sums those and divides by
// k0*k1, as ggml does (padding counts as zeros). params i[0] = op (0 max, 1 avg), i[1..6] = k0, k1,
// s0, s1, p0, p1. A thread takes a range of output rows; packed rows (elements 4 bytes apart in the
// input row and the output) go a window column at a time over the whole row, others a pixel at a time.
// Either way each pixel folds its cells in the order ky, kx (the same max over signed zeros and NaNs,
// the same sum).
#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu/kernels/kernels.h"

namespace mb {

namespace {

// max as the per-pixel fold takes it: a NaN cell or an equal one leaves the running value.
inline float fold_max(float acc, float v) { return v > acc ? v : acc; }

// One output row from its window rows inside the input (rows[0 .. n_rows), ky order), packed: y starts
// at the empty window's value, then each window row and column kx folds its input into the span of
// output pixels whose window cell lies inside the row.
void pool_row_packed(const float* const* rows, int64_t n_rows, bool avg, int64_t k0, int64_t k1, int64_t s0,
                     int64_t p0, int64_t IW, int64_t OW, float* y) {
    std::fill(y, y + OW, avg ? 0.0f : -FLT_MAX);
    for (int64_t j = 0; j < n_rows; ++j) {
        const float* in = rows[j];
        for (int64_t kx = 0; kx < k0; ++kx) {
            const int64_t off = kx - p0;  // ix = ox * s0 + off
            // ox with 0 <= ox * s0 + off < IW
            const int64_t lo = off >= 0 ? 0 : (-off + s0 - 1) / s0;
            const int64_t hi = IW - 1 - off < 0 ? -1 : std::min<int64_t>(OW - 1, (IW - 1 - off) / s0);
            if (avg) {
                for (int64_t ox = lo; ox <= hi; ++ox) y[ox] += in[ox * s0 + off];
            } else {
                for (int64_t ox = lo; ox <= hi; ++ox) y[ox] = fold_max(y[ox], in[ox * s0 + off]);
            }
        }
    }
    if (avg) {
        const float div = float(k0 * k1);
        for (int64_t ox = 0; ox < OW; ++ox) y[ox] /= div;
    }
}

}  // namespace

bool pool_2d_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    return dst.op == Op::POOL_2D && a && a->type == Type::F32 && dst.type == Type::F32;
}

void compute_pool_2d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const bool avg = dst.op_params[0] == 1;
    const int64_t k0 = dst.op_params[1], k1 = dst.op_params[2], s0 = dst.op_params[3], s1 = dst.op_params[4];
    const int64_t p0 = dst.op_params[5], p1 = dst.op_params[6];
    const bool packed = a.nb[0] == sizeof(float) && dst.nb[0] == sizeof(float);
    std::vector<const float*> rows(static_cast<size_t>(k1));
    int64_t r0, r1;
    split_range(dst.ne[1] * dst.ne[2] * dst.ne[3], p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t oy = r % dst.ne[1], c = (r / dst.ne[1]) % dst.ne[2], n = r / (dst.ne[1] * dst.ne[2]);
        if (packed) {
            int64_t n_rows = 0;
            for (int64_t ky = 0; ky < k1; ++ky) {
                const int64_t iy = oy * s1 - p1 + ky;
                if (iy < 0 || iy >= a.ne[1]) continue;
                rows[size_t(n_rows++)] = reinterpret_cast<const float*>(at(a, 0, iy, c, n));
            }
            pool_row_packed(rows.data(), n_rows, avg, k0, k1, s0, p0, a.ne[0], dst.ne[0],
                            reinterpret_cast<float*>(at(dst, 0, oy, c, n)));
            continue;
        }
        for (int64_t ox = 0; ox < dst.ne[0]; ++ox) {
            float acc = avg ? 0.0f : -FLT_MAX;
            for (int64_t ky = 0; ky < k1; ++ky) {
                const int64_t iy = oy * s1 - p1 + ky;
                if (iy < 0 || iy >= a.ne[1]) continue;
                for (int64_t kx = 0; kx < k0; ++kx) {
                    const int64_t ix = ox * s0 - p0 + kx;
                    if (ix < 0 || ix >= a.ne[0]) continue;
                    const float v = *reinterpret_cast<const float*>(at(a, ix, iy, c, n));
                    acc = avg ? acc + v : fold_max(acc, v);
                }
            }
            *reinterpret_cast<float*>(at(dst, ox, oy, c, n)) = avg ? acc / float(k0 * k1) : acc;
        }
    }
}

}  // namespace mb
