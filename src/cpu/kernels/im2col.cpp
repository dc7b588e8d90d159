// IM2COL: unfolds f32 data (any strides) into one row per output position, in f32 or f16. The 1-D
// form is the 2-D one with a single input row (H = KH = 1), so one loop serves both.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/errors.h"
#include "core/im2col_geometry.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

bool im2col_supported(const Tensor& dst) {
    if (dst.op != Op::IM2COL) return false;
    const Tensor* kernel = dst.src[0];
    const Tensor* data = dst.src[1];
    if (kernel == nullptr || data == nullptr || data->type != Type::F32) return false;
    if (dst.type != Type::F32 && dst.type != Type::F16) return false;
    if (dst.nb[0] != type_traits(dst.type).type_size) return false;
    const Im2colGeometry g = im2col_geometry(dst);
    if (g.s0 <= 0 || g.d0 <= 0 || g.p0 < 0) return false;
    if (g.is_2d && (g.s1 <= 0 || g.d1 <= 0 || g.p1 < 0)) return false;
    if (dst.ne[0] != g.ic * g.kh * g.kw) return false;
    if (g.is_2d) return dst.ne[2] == g.oh && dst.ne[3] == g.n;
    return dst.ne[2] == g.n && dst.ne[3] == 1 && data->ne[3] == 1;
}

void compute_im2col(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& data = *dst.src[1];
    const Im2colGeometry g = im2col_geometry(dst);
    const int64_t row_len = dst.ne[0];
    std::vector<float> buf(static_cast<size_t>(row_len));
    const bool packed = data.nb[0] == sizeof(float);

    int64_t r0, r1;
    split_range(g.ow * g.oh * g.n, p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t ox = r % g.ow;
        const int64_t oy = (r / g.ow) % g.oh;
        const int64_t in = r / (g.ow * g.oh);
        float* out = buf.data();
        const int64_t ix0 = ox * g.s0 - g.p0;
        // Away from the edges every tap is inside the row: no per-tap bounds checks.
        const bool interior = packed && ix0 >= 0 && ix0 + (g.kw - 1) * g.d0 < g.iw;
        for (int64_t c = 0; c < g.ic; ++c) {
            for (int64_t ky = 0; ky < g.kh; ++ky) {
                const int64_t iy = oy * g.s1 + ky * g.d1 - g.p1;
                const bool row_in = iy >= 0 && iy < g.ih;
                const uint8_t* base = g.is_2d ? at(data, 0, row_in ? iy : 0, c, in) : at(data, 0, c, in);
                if (interior && row_in) {
                    const float* src = reinterpret_cast<const float*>(base) + ix0;
                    for (int64_t kx = 0; kx < g.kw; ++kx) out[kx] = src[kx * g.d0];
                    out += g.kw;
                    continue;
                }
                for (int64_t kx = 0; kx < g.kw; ++kx) {
                    const int64_t ix = ix0 + kx * g.d0;
                    float v = 0.0f;
                    if (row_in && ix >= 0 && ix < g.iw) std::memcpy(&v, base + size_t(ix) * data.nb[0], sizeof v);
                    *out++ = v;
                }
            }
        }
        uint8_t* drow = g.is_2d ? at(dst, 0, ox, oy, in) : at(dst, 0, ox, in);
        quantize_row(dst.type, buf.data(), drow, row_len);
    }
}

}  // namespace mb
