// UPSCALE (ggml_interpolate) to dst's shape, params i[0] = mode | flags (MB_SCALE_*, shaders/kargs.h):
// sf_d = dst.ne[d] / a.ne[d] as floats; with align corners sf_0,1 = (ne - 1) / (ne_a - 1) and no half-pixel
// offset. Nearest: a[floor(i_d / sf_d)] on every dim. Bilinear / bicubic (Keys, a = -0.75) on dims 0 and 1
// at (i + offset) / sf - offset, edges clamped; dims 2 and 3 nearest.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cpu/kernels/kernels.h"
#include "kargs.h"

namespace mb {

namespace {

float get(const Tensor& a, int64_t i0, int64_t i1, const uint8_t* plane) {
    i0 = std::clamp<int64_t>(i0, 0, a.ne[0] - 1);
    i1 = std::clamp<int64_t>(i1, 0, a.ne[1] - 1);
    return *reinterpret_cast<const float*>(plane + i0 * a.nb[0] + i1 * a.nb[1]);
}

// Keys' cubic convolution weights for the four taps around a point at fraction t.
void cubic_weights(float t, float w[4]) {
    const float A = -0.75f;
    auto near = [A](float x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
    auto far = [A](float x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
    w[0] = far(t + 1);
    w[1] = near(t);
    w[2] = near(1 - t);
    w[3] = far(2 - t);
}

}  // namespace

bool upscale_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    const int mode = dst.op_params[0] & 0xFF;
    return dst.op == Op::UPSCALE && a && a->type == Type::F32 && dst.type == Type::F32 && mode <= MB_SCALE_BICUBIC;
}

void compute_upscale(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const int mode = dst.op_params[0] & 0xFF;
    float sf[kMaxDims];
    for (int d = 0; d < kMaxDims; ++d) sf[d] = float(dst.ne[d]) / float(a.ne[d]);
    float off = 0.5f;
    if (dst.op_params[0] & MB_SCALE_ALIGN_CORNERS) {
        off = 0.0f;
        for (int d = 0; d < 2; ++d) {
            if (dst.ne[d] > 1 && a.ne[d] > 1) sf[d] = float(dst.ne[d] - 1) / float(a.ne[d] - 1);
        }
    }
    int64_t r0, r1;
    split_range(dst.ne[1] * dst.ne[2] * dst.ne[3], p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
        const int64_t j2 = int64_t(float(i2) / sf[2]), j3 = int64_t(float(i3) / sf[3]);
        const uint8_t* plane = host_data(a) + j2 * a.nb[2] + j3 * a.nb[3];
        float* y = reinterpret_cast<float*>(at(dst, 0, i1, i2, i3));
        const int64_t ystep = int64_t(dst.nb[0] / sizeof(float));
        if (mode == MB_SCALE_NEAREST) {
            const int64_t j1 = int64_t(float(i1) / sf[1]);
            for (int64_t i0 = 0; i0 < dst.ne[0]; ++i0) {
                y[i0 * ystep] = get(a, int64_t(float(i0) / sf[0]), j1, plane);
            }
            continue;
        }
        const float fy = (float(i1) + off) / sf[1] - off;
        const int64_t y0 = int64_t(std::floor(fy));
        if (mode == MB_SCALE_BILINEAR) {
            const int64_t ya = std::clamp<int64_t>(y0, 0, a.ne[1] - 1);
            const int64_t yb = std::clamp<int64_t>(y0 + 1, 0, a.ne[1] - 1);
            const float dy = std::clamp(fy - float(ya), 0.0f, 1.0f);
            for (int64_t i0 = 0; i0 < dst.ne[0]; ++i0) {
                const float fx = (float(i0) + off) / sf[0] - off;
                const int64_t x0 = int64_t(std::floor(fx));
                const int64_t xa = std::clamp<int64_t>(x0, 0, a.ne[0] - 1);
                const int64_t xb = std::clamp<int64_t>(x0 + 1, 0, a.ne[0] - 1);
                const float dx = std::clamp(fx - float(xa), 0.0f, 1.0f);
                const float v00 = get(a, xa, ya, plane), v10 = get(a, xb, ya, plane);
                const float v01 = get(a, xa, yb, plane), v11 = get(a, xb, yb, plane);
                y[i0 * ystep] = v00 * (1 - dx) * (1 - dy) + v10 * dx * (1 - dy) + v01 * (1 - dx) * dy + v11 * dx * dy;
            }
            continue;
        }
        float wy[4];
        cubic_weights(fy - float(y0), wy);
        for (int64_t i0 = 0; i0 < dst.ne[0]; ++i0) {
            const float fx = (float(i0) + off) / sf[0] - off;
            const int64_t x0 = int64_t(std::floor(fx));
            float wx[4];
            cubic_weights(fx - float(x0), wx);
            float v = 0.0f;
            for (int u = 0; u < 4; ++u) {
                float row = 0.0f;
                for (int t = 0; t < 4; ++t) row += get(a, x0 - 1 + t, y0 - 1 + u, plane) * wx[t];
                v += row * wy[u];
            }
            y[i0 * ystep] = v;
        }
    }
}

}  // namespace mb
