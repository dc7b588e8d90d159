// MUL_MAT_ID (ggml's expert routing): dst[:, e, t] = as[ids[e, t]] @ b[:, e % b.ne1, t]. Each
// product is a row of mat-vec dots through vec_dot.h, so every weight type mul_mat takes (float and
// quantized) works here the same way; threads split the expert matrix's rows. The (e, t) pairs are
// grouped by expert, so each expert's weights are read once for all the tokens routed to it (kPairs
// at a time), kVecDotRows rows by kVecDotTokens tokens per multi-row dot where the pairing has one.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/errors.h"
#include "core/types.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec_dot.h"

namespace mb {

namespace {

VecType act_type(const Tensor& dst) { return vec_type_for(dst.src[0]->type, Type::F32); }

constexpr int64_t kPairs = 64;  // activation rows prepared at once per expert

size_t row_bytes_of(const Tensor& dst) { return (vec_row_bytes(act_type(dst), dst.src[0]->ne[0]) + 63) / 64 * 64; }

size_t thread_bytes(const Tensor& dst) {
    const int64_t pairs = std::min<int64_t>(kPairs, std::max<int64_t>(dst.ne[1] * dst.ne[2], 1));
    return size_t(pairs) * row_bytes_of(dst) + 64;
}

}  // namespace

bool mul_mat_id_supported(const Tensor& dst) {
    const Tensor* as = dst.src[0];
    const Tensor* b = dst.src[1];
    const Tensor* ids = dst.src[2];
    if (dst.op != Op::MUL_MAT_ID || !as || !b || !ids || dst.type != Type::F32) return false;
    if (b->type != Type::F32 || ids->type != Type::I32) return false;
    if (!vec_dot_fn(as->type, act_type(dst))) return false;
    const auto& tr = type_traits(as->type);
    return as->nb[0] == tr.type_size && as->ne[0] % tr.block_size == 0;
}

size_t mul_mat_id_work_size(const Tensor& dst, int nth) { return size_t(nth) * thread_bytes(dst) + 64; }

void compute_mul_mat_id(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& as = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const Tensor& ids = *dst.src[2];
    const int64_t k = as.ne[0], n = as.ne[1], n_as = as.ne[2];
    const int64_t n_used = dst.ne[1], n_pairs = dst.ne[1] * dst.ne[2];
    const VecType vt = act_type(dst);
    const VecDotFn dot = vec_dot_fn(as.type, vt);
    const VecDotRowsFn dot_rows = vec_dot_rows_fn(as.type, vt);
    const size_t row_bytes = row_bytes_of(dst);
    uint8_t* base = p.wdata + (64 - reinterpret_cast<uintptr_t>(p.wdata) % 64) % 64;
    uint8_t* prep = base + size_t(p.ith) * thread_bytes(dst);
    // Every thread checks every id (before any work, so all threads throw alike) and sorts the pairs by
    // expert (counting sort: pair order kept within an expert).
    std::vector<int64_t> start(size_t(n_as) + 1, 0);
    std::vector<int32_t> expert_of(static_cast<size_t>(n_pairs));
    for (int64_t q = 0; q < n_pairs; ++q) {
        const int64_t e = q % n_used, t = q / n_used;
        const int32_t expert = *reinterpret_cast<const int32_t*>(at(ids, e, t));
        if (expert < 0 || expert >= n_as) {
            fail<OutOfRangeError>("MUL_MAT_ID", "expert id ", expert, " out of range for ", as.describe(), " (",
                                  n_as, " experts) at ids[", t, ", ", e, "]");
        }
        expert_of[size_t(q)] = expert;
        ++start[size_t(expert) + 1];
    }
    int64_t r0, r1;
    split_range(n, p.ith, p.nth, &r0, &r1);
    if (r1 <= r0) return;
    for (int64_t x = 0; x < n_as; ++x) start[size_t(x) + 1] += start[size_t(x)];
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    std::vector<int64_t> sorted(static_cast<size_t>(n_pairs));
    for (int64_t q = 0; q < n_pairs; ++q) sorted[size_t(fill[size_t(expert_of[size_t(q)])]++)] = q;

    const void* rows[kPairs];
    float* outs[kPairs];
    for (int64_t x = 0; x < n_as; ++x) {
        const uint8_t* w = host_data(as) + size_t(x) * as.nb[2];
        for (int64_t c0 = start[size_t(x)]; c0 < start[size_t(x) + 1]; c0 += kPairs) {
            const int64_t np = std::min(kPairs, start[size_t(x) + 1] - c0);
            for (int64_t i = 0; i < np; ++i) {
                const int64_t q = sorted[size_t(c0 + i)], e = q % n_used, t = q / n_used;
                uint8_t* row = prep + size_t(i) * row_bytes;
                vec_prepare_row(vt, Type::F32, at(b, 0, e % b.ne[1], t), b.nb[0], k, row);
                rows[i] = row;
                outs[i] = reinterpret_cast<float*>(at(dst, 0, e, t));
            }
            const int64_t ostep = int64_t(dst.nb[0] / sizeof(float));
            int64_t r = r0;
            if (dot_rows) {
                float tile[kVecDotRows * kVecDotTokens];
                for (; r + kVecDotRows <= r1; r += kVecDotRows) {
                    for (int64_t i = 0; i < np; i += kVecDotTokens) {
                        const int nt = int(std::min<int64_t>(kVecDotTokens, np - i));
                        dot_rows(k, w + size_t(r) * as.nb[1], as.nb[1], rows + i, nt, tile);
                        for (int tt = 0; tt < nt; ++tt) {
                            for (int rr = 0; rr < kVecDotRows; ++rr) {
                                outs[i + tt][(r + rr) * ostep] = tile[tt * kVecDotRows + rr];
                            }
                        }
                    }
                }
            }
            for (; r < r1; ++r) {
                for (int64_t i = 0; i < np; ++i) outs[i][r * ostep] = dot(k, w + size_t(r) * as.nb[1], rows[i]);
            }
        }
    }
}

}  // namespace mb
