// TOP_K: per row of f32 (any strides), the i32 indices of its k = dst.ne[0] largest values, largest
// first, ties in index order, NaNs last (the order of ARGSORT descending, cut at k).
//
// Each value and its index become one 64-bit key that orders as wanted under unsigned >: the value's
// bits mapped to an unsigned order (NaN lowest, -0 as +0) above the index's complement, so the
// compares have no branches on NaN or ties. A small k (k <= n / 16, sampling's top-40 of a
// vocabulary) streams the row past a threshold, the k-th best key so far: a value above it is
// appended to a candidate list (chunks of a contiguous row are tested in vector compares),
// and a full list is cut back to its best k with an nth_element, which raises the threshold. A larger
// k takes an nth_element over all keys. Either way the k winners are then sorted.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "cpu/kernels/kernels.h"
#include "cpu/kernels/simd.h"

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

constexpr int64_t kChunk = 32;

// Bit j set where x[j] > w (false for a NaN), j < kChunk.
using AboveMask = uint32_t (*)(const float* x, float w);

uint32_t above_mask_portable(const float* x, float w) {
    uint32_t m = 0;
    for (int j = 0; j < kChunk; ++j) m |= uint32_t(x[j] > w) << j;
    return m;
}

#if defined(MB_SIMD_X86)
MB_TARGET_AVX2 uint32_t above_mask_avx2(const float* x, float w) {
    const __m256 vw = _mm256_set1_ps(w);
    uint32_t m = 0;
    for (int q = 0; q < kChunk / 8; ++q) {
        m |= uint32_t(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + 8 * q), vw, _CMP_GT_OQ))) << (8 * q);
    }
    return m;
}
#endif

AboveMask select_above_mask() {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx2_fma_f16c()) return above_mask_avx2;
#endif
    return above_mask_portable;
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
    const bool stream = k * 16 <= n;
    // Streaming: the best k so far, then the candidates that beat the k-th of them, a chunk's worth of
    // room kept free.
    const int64_t cap = stream ? 4 * k + 2 * kChunk : n;
    const AboveMask above_mask = select_above_mask();
    std::vector<uint64_t> keys(static_cast<size_t>(cap));
    const auto first = keys.begin(), kth = keys.begin() + k;
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
        const uint8_t* x = at(a, 0, i1, i2, i3);
        auto value = [&](int64_t i) {
            float v;
            std::memcpy(&v, x + size_t(i) * a.nb[0], sizeof v);
            return v;
        };
        if (stream) {
            if (k == 0) continue;
            for (int64_t i = 0; i < k; ++i) keys[size_t(i)] = key_of(value(i), i);
            int64_t count = k;
            // The k-th best so far as a float (its key at kth - 1): a later value beats it only when
            // larger (a tie has the larger index and loses), and anything but NaN beats a NaN.
            float wv = 0.0f;
            auto keep_best = [&] {
                std::nth_element(first, kth - 1, first + count, std::greater<uint64_t>());
                count = k;
                const uint32_t kk = uint32_t(keys[size_t(k - 1)] >> 32);
                const uint32_t u = (kk & 0x80000000u) ? (kk ^ 0x80000000u) : ~kk;
                std::memcpy(&wv, &u, sizeof wv);
                wv = kk == 0 ? std::numeric_limits<float>::quiet_NaN() : wv;
            };
            keep_best();
            // Appends the key of value i when it beats wv; no branch on the outcome.
            auto offer = [&](int64_t i, float v) {
                keys[size_t(count)] = key_of(v, i);
                count += int64_t((v > wv) | ((wv != wv) & (v == v)));
            };
            int64_t i = k;
            if (a.nb[0] == sizeof(float)) {
                // Contiguous: a chunk is compared with wv at once (NaN beats nothing) into a mask,
                // and only its set bits are appended. With wv a NaN (a NaN among the best k) every
                // number is a candidate: value by value.
                const float* xf = reinterpret_cast<const float*>(x);
                for (; i + kChunk <= n; i += kChunk) {
                    if (count + kChunk > cap) keep_best();
                    if (wv != wv) {
                        for (int64_t j = i; j < i + kChunk; ++j) offer(j, xf[j]);
                        continue;
                    }
                    for (uint32_t m = above_mask(xf + i, wv); m != 0; m &= m - 1) {
                        const int64_t j = i + __builtin_ctz(m);
                        keys[size_t(count++)] = key_of(xf[j], j);
                    }
                }
            }
            for (; i < n; ++i) {
                if (count == cap) keep_best();
                offer(i, value(i));
            }
            if (count > k) std::nth_element(first, kth, first + count, std::greater<uint64_t>());
        } else {
            if (a.nb[0] == sizeof(float)) {
                const float* xf = reinterpret_cast<const float*>(x);
                for (int64_t i = 0; i < n; ++i) keys[size_t(i)] = key_of(xf[i], i);
            } else {
                for (int64_t i = 0; i < n; ++i) keys[size_t(i)] = key_of(value(i), i);
            }
            if (k < n) std::nth_element(first, kth, keys.end(), std::greater<uint64_t>());
        }
        std::sort(first, kth, std::greater<uint64_t>());
        uint8_t* y = at(dst, 0, i1, i2, i3);
        for (int64_t j = 0; j < k; ++j) {
            const int32_t idx = int32_t(0xffffffffu - uint32_t(keys[size_t(j)] & 0xffffffffu));
            std::memcpy(y + size_t(j) * dst.nb[0], &idx, sizeof idx);
        }
    }
}

}  // namespace mb
