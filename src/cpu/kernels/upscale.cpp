// UPSCALE (ggml_interpolate) to dst's shape, params i[0] = mode | flags (MB_SCALE_*, shaders/kargs.h):
// sf_d = dst.ne[d] / a.ne[d] as floats; with align corners sf_0,1 = (ne - 1) / (ne_a - 1) and no half-pixel
// offset. Nearest: a[floor(i_d / sf_d)] on every dim. Bilinear / bicubic (Keys, a = -0.75) on dims 0 and 1
// at (i + offset) / sf - offset, edges clamped; dims 2 and 3 nearest. Bilinear with MB_SCALE_ANTIALIAS
// (torch's antialias=True, ggml's GGML_SCALE_FLAG_ANTIALIAS): a triangle filter of half-width
// support = max(1, 1 / sf) around (i + offset) / sf, taps a[s] for s in [c - support + offset, c + support
// + offset) inside the image, weights max(0, 1 - |s - c + offset| / support), divided by their sum.
//
// The filters of bilinear, bicubic and antialias are separable (the weight of a tap is wx * wy, and
// antialias's normalising sum is the product of the two axes' sums), so each axis gets a table of taps
// (source offsets and weights per output index), built once per call; every source row a thread needs
// is filtered along dim 0 once (cached), and each output row is then a weighted sum of whole filtered
// rows: contiguous, vectorised loops instead of a clamp, a division and four gathers per element.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu/kernels/kernels.h"
#include "kargs.h"

namespace mb {

namespace {

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

// One axis's filter: output index i reads source indices idx[i*taps + t] with weights w[i*taps + t].
struct Axis {
    int64_t taps = 0;
    std::vector<int64_t> idx;
    std::vector<float> w;
};

Axis build_axis(int mode, bool antialias, int64_t n_in, int64_t n_out, float sf, float off) {
    Axis ax;
    if (antialias) {
        const float support = std::max(1.0f, 1.0f / sf);
        const float invscale = 1.0f / support;
        auto range = [&](int64_t i, int64_t* lo, int64_t* hi) {
            const float c = (float(i) + off) / sf;
            *lo = std::max<int64_t>(int64_t(c - support + off), 0);
            *hi = std::min<int64_t>(int64_t(c + support + off), n_in);
        };
        for (int64_t i = 0; i < n_out; ++i) {
            int64_t lo, hi;
            range(i, &lo, &hi);
            ax.taps = std::max(ax.taps, hi - lo);
        }
        ax.taps = std::max<int64_t>(ax.taps, 1);
        ax.idx.assign(size_t(n_out * ax.taps), 0);
        ax.w.assign(size_t(n_out * ax.taps), 0.0f);
        for (int64_t i = 0; i < n_out; ++i) {
            const float c = (float(i) + off) / sf;
            auto triangle = [&](int64_t s) {
                return std::max(1.0f - std::fabs((float(s) - c + off) * invscale), 0.0f);
            };
            int64_t lo, hi;
            range(i, &lo, &hi);
            float total = 0.0f;
            for (int64_t s = lo; s < hi; ++s) total += triangle(s);
            for (int64_t t = 0; t < ax.taps; ++t) {
                const int64_t s = lo + t;
                const size_t k = size_t(i * ax.taps + t);
                ax.idx[k] = std::clamp<int64_t>(s, 0, n_in - 1);
                ax.w[k] = total > 0.0f && s < hi ? triangle(s) / total : 0.0f;
            }
        }
        return ax;
    }
    ax.taps = mode == MB_SCALE_BILINEAR ? 2 : 4;
    ax.idx.resize(size_t(n_out * ax.taps));
    ax.w.resize(size_t(n_out * ax.taps));
    for (int64_t i = 0; i < n_out; ++i) {
        const float f = (float(i) + off) / sf - off;
        const int64_t x0 = int64_t(std::floor(f));
        int64_t* id = &ax.idx[size_t(i * ax.taps)];
        float* w = &ax.w[size_t(i * ax.taps)];
        if (mode == MB_SCALE_BILINEAR) {
            const int64_t xa = std::clamp<int64_t>(x0, 0, n_in - 1);
            const float d = std::clamp(f - float(xa), 0.0f, 1.0f);
            id[0] = xa;
            id[1] = std::clamp<int64_t>(x0 + 1, 0, n_in - 1);
            w[0] = 1 - d;
            w[1] = d;
        } else {
            cubic_weights(f - float(x0), w);
            for (int t = 0; t < 4; ++t) id[t] = std::clamp<int64_t>(x0 - 1 + t, 0, n_in - 1);
        }
    }
    return ax;
}

// h[i] = sum_t w[i, t] * row[idx[i, t]] (idx in elements of stride `step`), for the fixed tap counts
// unrolled.
template <int T>
void filter_row_fixed(const float* row, int64_t step, const Axis& ax, int64_t n, float* h) {
    const int64_t* id = ax.idx.data();
    const float* w = ax.w.data();
    for (int64_t i = 0; i < n; ++i, id += T, w += T) {
        float v = w[0] * row[id[0] * step];
        for (int t = 1; t < T; ++t) v += w[t] * row[id[t] * step];
        h[i] = v;
    }
}

void filter_row(const float* row, int64_t step, const Axis& ax, int64_t n, float* h) {
    if (ax.taps == 2) return filter_row_fixed<2>(row, step, ax, n, h);
    if (ax.taps == 4) return filter_row_fixed<4>(row, step, ax, n, h);
    const int64_t T = ax.taps;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t* id = &ax.idx[size_t(i * T)];
        const float* w = &ax.w[size_t(i * T)];
        float v = w[0] * row[id[0] * step];
        for (int64_t t = 1; t < T; ++t) v += w[t] * row[id[t] * step];
        h[i] = v;
    }
}

void compute_nearest(const ComputeParams& p, Tensor& dst, const Tensor& a, const float sf[kMaxDims]) {
    const int64_t ne0 = dst.ne[0];
    std::vector<int64_t> xi(static_cast<size_t>(ne0));
    for (int64_t i0 = 0; i0 < ne0; ++i0) {
        xi[size_t(i0)] = std::min<int64_t>(int64_t(float(i0) / sf[0]), a.ne[0] - 1) * int64_t(a.nb[0] / sizeof(float));
    }
    const int64_t ystep = int64_t(dst.nb[0] / sizeof(float));
    int64_t r0, r1;
    split_range(dst.ne[1] * dst.ne[2] * dst.ne[3], p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
        const int64_t j1 = std::min<int64_t>(int64_t(float(i1) / sf[1]), a.ne[1] - 1);
        const int64_t j2 = std::min<int64_t>(int64_t(float(i2) / sf[2]), a.ne[2] - 1);
        const int64_t j3 = std::min<int64_t>(int64_t(float(i3) / sf[3]), a.ne[3] - 1);
        const float* x = reinterpret_cast<const float*>(at(a, 0, j1, j2, j3));
        float* y = reinterpret_cast<float*>(at(dst, 0, i1, i2, i3));
        for (int64_t i0 = 0; i0 < ne0; ++i0) y[i0 * ystep] = x[xi[size_t(i0)]];
    }
}

}  // namespace

bool upscale_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    const int mode = dst.op_params[0] & 0xFF;
    const bool aa = (dst.op_params[0] & MB_SCALE_ANTIALIAS) != 0;
    return dst.op == Op::UPSCALE && a && a->type == Type::F32 && dst.type == Type::F32 &&
           mode <= MB_SCALE_BICUBIC && (!aa || mode == MB_SCALE_BILINEAR);
}

void compute_upscale(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const int mode = dst.op_params[0] & 0xFF;
    const bool antialias = (dst.op_params[0] & MB_SCALE_ANTIALIAS) != 0;
    float sf[kMaxDims];
    for (int d = 0; d < kMaxDims; ++d) sf[d] = float(dst.ne[d]) / float(a.ne[d]);
    float off = 0.5f;
    if (dst.op_params[0] & MB_SCALE_ALIGN_CORNERS) {
        off = 0.0f;
        for (int d = 0; d < 2; ++d) {
            if (dst.ne[d] > 1 && a.ne[d] > 1) sf[d] = float(dst.ne[d] - 1) / float(a.ne[d] - 1);
        }
    }
    if (mode == MB_SCALE_NEAREST) return compute_nearest(p, dst, a, sf);

    int64_t r0, r1;
    split_range(dst.ne[1] * dst.ne[2] * dst.ne[3], p.ith, p.nth, &r0, &r1);
    if (r0 >= r1) return;
    const int64_t ne0 = dst.ne[0], ne1 = dst.ne[1];
    const Axis ax = build_axis(mode, antialias, a.ne[0], ne0, sf[0], off);
    const Axis ay = build_axis(mode, antialias, a.ne[1], ne1, sf[1], off);
    // Cache of rows filtered along dim 0, direct-mapped by source row index: the taps of one output
    // row lie within ay.taps consecutive source rows, so 2 * taps slots (a power of 2) never evict one
    // another within a row.
    int64_t slots = 1;
    while (slots < 2 * ay.taps) slots *= 2;
    std::vector<float> cache(size_t(slots * ne0));
    std::vector<int64_t> held(size_t(slots), -1);
    std::vector<float> out;
    const int64_t xstep = int64_t(a.nb[0] / sizeof(float));
    const bool packed_out = dst.nb[0] == sizeof(float);
    if (!packed_out) out.resize(size_t(ne0));
    int64_t plane_id = -1;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i23 = r / ne1, i2 = i23 % dst.ne[2], i3 = i23 / dst.ne[2];
        if (i23 != plane_id) {  // a new source plane: the cached rows belong to the previous one
            plane_id = i23;
            std::fill(held.begin(), held.end(), -1);
        }
        const int64_t j2 = std::min<int64_t>(int64_t(float(i2) / sf[2]), a.ne[2] - 1);
        const int64_t j3 = std::min<int64_t>(int64_t(float(i3) / sf[3]), a.ne[3] - 1);
        float* y = packed_out ? reinterpret_cast<float*>(at(dst, 0, i1, i2, i3)) : out.data();
        const int64_t* iy = &ay.idx[size_t(i1 * ay.taps)];
        const float* wy = &ay.w[size_t(i1 * ay.taps)];
        for (int64_t u = 0; u < ay.taps; ++u) {
            const int64_t sy = iy[u];
            const int64_t slot = sy & (slots - 1);
            float* h = &cache[size_t(slot * ne0)];
            if (held[size_t(slot)] != sy) {
                filter_row(reinterpret_cast<const float*>(at(a, 0, sy, j2, j3)), xstep, ax, ne0, h);
                held[size_t(slot)] = sy;
            }
            const float wu = wy[u];
            if (u == 0) {
                for (int64_t i0 = 0; i0 < ne0; ++i0) y[i0] = wu * h[i0];
            } else {
                for (int64_t i0 = 0; i0 < ne0; ++i0) y[i0] += wu * h[i0];
            }
        }
        if (!packed_out) {
            float* yd = reinterpret_cast<float*>(at(dst, 0, i1, i2, i3));
            const int64_t ystep = int64_t(dst.nb[0] / sizeof(float));
            for (int64_t i0 = 0; i0 < ne0; ++i0) yd[i0 * ystep] = out[size_t(i0)];
        }
    }
}

}  // namespace mb
