// TOP_K: per row of f32 (any strides), the i32 indices of its k = dst.ne[0] largest values, largest
// first, ties in index order, NaNs last (the order of ARGSORT descending, cut at k).
//
// Each value and its index become one 64-bit key that orders as wanted under unsigned >: the value's
// bits mapped to an unsigned order (NaN lowest, -0 as +0) above the index's complement, so the
// compares have no branches on NaN or ties. A small k (k <= n / 16, sampling's top-40 of a
// vocabulary) keeps the best k keys in a min-heap while the row streams past: one compare per value,
// a heap update only for a value that beats the k-th best so far. A larger k takes an nth_element
// over all keys. Either way the k winners are then sorted.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "cpu/kernels/kernels.h"

namespace mb {

namespace {

// Selects, no branches: a row's signs are random, and a mispredicted branch per value cost more than
// the rest of the key.
inline uint64_t key_of(float x, int64_t i) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    const uint32_t mag = u & 0x7fffffffu;
    const uint32_t neg = uint32_t(int32_t(u) >> 31);  // all ones for a negative number
    uint32_t k = u ^ (neg | 0x80000000u);             // negative: ~u; positive: u with the top bit set
    k = mag == 0 ? 0x80000000u : k;                   // +0 and -0 compare equal
    k = mag > 0x7f800000u ? 0u : k;                   // NaN: below every number
    return (uint64_t(k) << 32) | uint64_t(0xffffffffu - uint32_t(i));
}

}  // namespace

bool top_k_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    return dst.op == Op::TOP_K && a && a->type == Type::F32 && dst.type == Type::I32 && dst.ne[0] <= a->ne[0] &&
           a->ne[1] == dst.ne[1] && a->ne[2] == dst.ne[2] && a->ne[3] == dst.ne[3];
}

void compute_top_k(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const int64_t n = a.ne[0];
    const int64_t k = dst.ne[0];
    const bool heap = k * 16 <= n;
    std::vector<uint64_t> keys(static_cast<size_t>(heap ? k : n));
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
        const uint8_t* x = at(a, 0, i1, i2, i3);
        if (heap) {
            if (k == 0) continue;
            auto value = [&](int64_t i) {
                float v;
                std::memcpy(&v, x + size_t(i) * a.nb[0], sizeof v);
                return v;
            };
            for (int64_t i = 0; i < k; ++i) keys[size_t(i)] = key_of(value(i), i);
            std::make_heap(keys.begin(), keys.end(), std::greater<uint64_t>());  // front: the smallest
            // The k-th best so far as a float: a later value beats it only when larger (a tie has the
            // larger index and loses), and anything but NaN beats a NaN.
            auto worst_value = [&] {
                const uint32_t kk = uint32_t(keys.front() >> 32);
                const uint32_t u = (kk & 0x80000000u) ? (kk ^ 0x80000000u) : ~kk;
                float v;
                std::memcpy(&v, &u, sizeof v);
                return kk == 0 ? std::numeric_limits<float>::quiet_NaN() : v;
            };
            float wv = worst_value();
            for (int64_t i = k; i < n; ++i) {
                const float v = value(i);
                if (v > wv || (wv != wv && v == v)) {
                    std::pop_heap(keys.begin(), keys.end(), std::greater<uint64_t>());
                    keys.back() = key_of(v, i);
                    std::push_heap(keys.begin(), keys.end(), std::greater<uint64_t>());
                    wv = worst_value();
                }
            }
        } else if (a.nb[0] == sizeof(float)) {
            const float* xf = reinterpret_cast<const float*>(x);
            for (int64_t i = 0; i < n; ++i) keys[size_t(i)] = key_of(xf[i], i);
        } else {
            for (int64_t i = 0; i < n; ++i) {
                float v;
                std::memcpy(&v, x + size_t(i) * a.nb[0], sizeof v);
                keys[size_t(i)] = key_of(v, i);
            }
        }
        const auto first = keys.begin(), kth = keys.begin() + k;
        if (!heap && k < n) std::nth_element(first, kth, keys.end(), std::greater<uint64_t>());
        std::sort(first, kth, std::greater<uint64_t>());
        uint8_t* y = at(dst, 0, i1, i2, i3);
        for (int64_t j = 0; j < k; ++j) {
            const int32_t idx = int32_t(0xffffffffu - uint32_t(keys[size_t(j)] & 0xffffffffu));
            std::memcpy(y + size_t(j) * dst.nb[0], &idx, sizeof idx);
        }
    }
}

}  // namespace mb
