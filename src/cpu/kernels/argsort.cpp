// ARGSORT: per row of f32 (any strides), the i32 indices that sort it ascending or descending
// (params i[0] = 1: descending). Ties keep index order; NaNs go last in either order.
//
// Each value becomes a 32-bit key whose unsigned order is the wanted order (sign-magnitude flipped to
// two's order, -0 folded onto +0 so the two compare equal, bits inverted for descending, every NaN the
// largest key), then an LSD radix sort of (key, index) pairs, 8 bits a pass: it is stable, so equal
// keys keep the index order they started in, and a pass whose digit is the same in every key is skipped.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "cpu/kernels/kernels.h"

namespace mb {

namespace {

uint32_t sort_key(float x, bool desc) {
    if (std::isnan(x)) return 0xFFFFFFFFu;
    if (x == 0.0f) x = 0.0f;  // -0 == +0: one key, so ties by index
    uint32_t u;
    std::memcpy(&u, &x, sizeof(u));
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    if (desc) u = ~u;
    // The largest non-NaN key is 0xFF800000 in both orders (+inf's ascending, -inf's descending), so
    // 0xFFFFFFFF is NaN's alone.
    return u;
}

}  // namespace

bool argsort_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    return dst.op == Op::ARGSORT && a && a->type == Type::F32 && dst.type == Type::I32 &&
           a->ne[0] == dst.ne[0] && a->ne[1] == dst.ne[1] && a->ne[2] == dst.ne[2] && a->ne[3] == dst.ne[3];
}

void compute_argsort(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const bool desc = dst.op_params[0] != 0;
    const int64_t n = dst.ne[0];
    std::vector<uint32_t> key(size_t(n) * 2);
    std::vector<int32_t> idx(size_t(n) * 2);
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
        uint32_t* k_in = key.data();
        uint32_t* k_out = key.data() + n;
        int32_t* i_in = idx.data();
        int32_t* i_out = idx.data() + n;
        const uint8_t* row = at(a, 0, i1, i2, i3);
        for (int64_t i = 0; i < n; ++i) {
            k_in[i] = sort_key(*reinterpret_cast<const float*>(row + i * a.nb[0]), desc);
            i_in[i] = int32_t(i);
        }
        for (int shift = 0; shift < 32; shift += 8) {
            uint32_t count[256] = {};
            for (int64_t i = 0; i < n; ++i) ++count[(k_in[i] >> shift) & 0xFF];
            if (count[(k_in[0] >> shift) & 0xFF] == uint32_t(n)) continue;  // one digit for all: order kept
            uint32_t pos = 0;
            for (uint32_t& c : count) {
                const uint32_t here = c;
                c = pos;
                pos += here;
            }
            for (int64_t i = 0; i < n; ++i) {
                const uint32_t d = (k_in[i] >> shift) & 0xFF;
                const uint32_t o = count[d]++;
                k_out[o] = k_in[i];
                i_out[o] = i_in[i];
            }
            std::swap(k_in, k_out);
            std::swap(i_in, i_out);
        }
        uint8_t* out = at(dst, 0, i1, i2, i3);
        if (dst.nb[0] == sizeof(int32_t)) {
            std::memcpy(out, i_in, size_t(n) * sizeof(int32_t));
        } else {
            for (int64_t i = 0; i < n; ++i) *reinterpret_cast<int32_t*>(out + i * dst.nb[0]) = i_in[i];
        }
    }
}

}  // namespace mb
