// CUMSUM (ggml_cumsum): the running sum along each row of f32 (any strides), in f32 as ggml sums.
// Rows are split over the threads; a packed row on x86 is scanned four values at a time (two
// shifted adds in a register, then the carry of the rows before), so the chain of dependent adds is
// one per four values.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/kernels.h"
#include "cpu/kernels/simd.h"

namespace mb {

namespace {

void scan_packed(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    float carry = 0.0f;
#if defined(MB_SIMD_X86)
    __m128 c = _mm_setzero_ps();
    for (; i + 4 <= n; i += 4) {
        __m128 v = _mm_loadu_ps(x + i);
        v = _mm_add_ps(v, _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(v), 4)));
        v = _mm_add_ps(v, _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(v), 8)));
        v = _mm_add_ps(v, c);
        _mm_storeu_ps(y + i, v);
        c = _mm_shuffle_ps(v, v, _MM_SHUFFLE(3, 3, 3, 3));
    }
    carry = _mm_cvtss_f32(c);
#endif
    for (; i < n; ++i) {
        carry += x[i];
        y[i] = carry;
    }
}

}  // namespace

bool cumsum_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    return dst.op == Op::CUMSUM && a && a->type == Type::F32 && dst.type == Type::F32 && a->ne[0] == dst.ne[0] &&
           a->ne[1] == dst.ne[1] && a->ne[2] == dst.ne[2] && a->ne[3] == dst.ne[3];
}

void compute_cumsum(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const int64_t n = a.ne[0];
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
        const uint8_t* x = at(a, 0, i1, i2, i3);
        uint8_t* y = at(dst, 0, i1, i2, i3);
        if (a.nb[0] == sizeof(float) && dst.nb[0] == sizeof(float)) {
            scan_packed(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n);
            continue;
        }
        float s = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
            float v;
            std::memcpy(&v, x + size_t(i) * a.nb[0], sizeof v);
            s += v;
            std::memcpy(y + size_t(i) * dst.nb[0], &s, sizeof s);
        }
    }
}

}  // namespace mb
