// CONV_TRANSPOSE_2D (ggml_conv_transpose_2d_p0): kernel [KW, KH, OC, IC] f32 or f16, data f32
// [W, H, IC, N] with any strides -> f32 [(W - 1) s + KW, (H - 1) s + KH, OC, N] contiguous:
// dst[n][oc][iy*s + ky][ix*s + kx] += kernel[ic][oc][ky][kx] * data[n][ic][iy][ix]. params i[0] = s.
//
// An output row (y, oc, n) at a time: for each input row iy and tap ky with iy*s + ky = y, and each
// input channel, every kx adds w * the input row into the output at stride s from kx. The kernel is
// converted to f32 once (scratch, shared) so the inner loop reads floats.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "cpu/kernels/kernels.h"

namespace mb {

bool conv_transpose_2d_supported(const Tensor& dst) {
    const Tensor* w = dst.src[0];
    const Tensor* x = dst.src[1];
    if (dst.op != Op::CONV_TRANSPOSE_2D || !w || !x || (w->type != Type::F32 && w->type != Type::F16) ||
        x->type != Type::F32 || dst.type != Type::F32 || !dst.is_contiguous()) {
        return false;
    }
    const int64_t s = dst.op_params[0];
    return s > 0 && w->ne[3] == x->ne[2] && dst.ne[2] == w->ne[2] && dst.ne[3] == x->ne[3] && x->ne[0] > 0 &&
           x->ne[1] > 0 && dst.ne[0] == (x->ne[0] - 1) * s + w->ne[0] && dst.ne[1] == (x->ne[1] - 1) * s + w->ne[1];
}

// The kernel as packed f32 [IC][OC][KH][KW].
size_t conv_transpose_2d_work_size(const Tensor& dst, int) { return size_t(dst.src[0]->nelements()) * sizeof(float); }

void compute_conv_transpose_2d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const int64_t s = dst.op_params[0];
    const int64_t KW = w.ne[0], KH = w.ne[1], OC = w.ne[2], IC = w.ne[3];
    const int64_t IW = x.ne[0], IH = x.ne[1], OW = dst.ne[0], OH = dst.ne[1];
    float* wf = reinterpret_cast<float*>(p.wdata);
    {
        int64_t e0, e1;
        split_range(w.nelements(), p.ith, p.nth, &e0, &e1);
        for (int64_t e = e0; e < e1; ++e) {
            const int64_t kx = e % KW, ky = (e / KW) % KH, oc = (e / (KW * KH)) % OC, ic = e / (KW * KH * OC);
            const uint8_t* src = host_data(w) + size_t(kx) * w.nb[0] + size_t(ky) * w.nb[1] + size_t(oc) * w.nb[2] +
                                 size_t(ic) * w.nb[3];
            if (w.type == Type::F16) {
                uint16_t h;
                std::memcpy(&h, src, sizeof h);
                wf[e] = fp16_to_fp32(h);
            } else {
                std::memcpy(&wf[e], src, sizeof(float));
            }
        }
    }
    p.barrier();
    const bool packed_rows = x.nb[0] == sizeof(float);
    int64_t r0, r1;
    split_range(OH * OC * dst.ne[3], p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t y = r % OH, oc = (r / OH) % OC, n = r / (OH * OC);
        float* out = reinterpret_cast<float*>(host_data(dst) + size_t(y) * dst.nb[1] + size_t(oc) * dst.nb[2] +
                                              size_t(n) * dst.nb[3]);
        std::fill(out, out + OW, 0.0f);
        for (int64_t iy = std::min(y / s, IH - 1); iy >= 0; --iy) {
            const int64_t ky = y - iy * s;
            if (ky >= KH) break;
            for (int64_t ic = 0; ic < IC; ++ic) {
                const uint8_t* row = host_data(x) + size_t(iy) * x.nb[1] + size_t(ic) * x.nb[2] + size_t(n) * x.nb[3];
                const float* taps = wf + ((ic * OC + oc) * KH + ky) * KW;
                for (int64_t kx = 0; kx < KW; ++kx) {
                    const float t = taps[kx];
                    float* o = out + kx;
                    if (packed_rows) {
                        const float* xr = reinterpret_cast<const float*>(row);
                        for (int64_t ix = 0; ix < IW; ++ix) o[ix * s] += t * xr[ix];
                    } else {
                        for (int64_t ix = 0; ix < IW; ++ix) {
                            float v;
                            std::memcpy(&v, row + size_t(ix) * x.nb[0], sizeof v);
                            o[ix * s] += t * v;
                        }
                    }
                }
            }
        }
    }
}

}  // namespace mb
