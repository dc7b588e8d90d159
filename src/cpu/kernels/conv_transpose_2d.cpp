// CONV_TRANSPOSE_2D (ggml_conv_transpose_2d_p0): kernel [KW, KH, OC, IC] f32 or f16, data f32
// [W, H, IC, N] with any strides -> f32 [(W - 1) s + KW, (H - 1) s + KH, OC, N] contiguous:
// dst[n][oc][iy*s + ky][ix*s + kx] += kernel[ic][oc][ky][kx] * data[n][ic][iy][ix]. params i[0] = s.
//
// The GEMM of conv_transpose_gemm.h over the input positions p = iy*W + ix, with the KH*KW taps
// t = ky*KW + kx of a channel as its columns; the scatter adds cols[p][(oc, ky, kx)] at
// dst[n][oc][iy*s + ky][ix*s + kx], one (oc, ky) row's KW taps on consecutive outputs.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/conv_transpose_gemm.h"
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

size_t conv_transpose_2d_work_size(const Tensor& dst, int nth) {
    const Tensor& kern = *dst.src[0];
    return conv_transpose_gemm_work_size(kern.ne[0] * kern.ne[1], kern.ne[2], kern.ne[3], nth);
}

void compute_conv_transpose_2d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& kern = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const int64_t s = dst.op_params[0];
    const int64_t KW = kern.ne[0], KH = kern.ne[1], IW = x.ne[0];
    const size_t plane = size_t(dst.ne[0] * dst.ne[1]);  // floats of one output channel (dst is contiguous)
    const int64_t orow = dst.ne[0];
    ConvTransposeGemm g;
    g.who = "CONV_TRANSPOSE_2D";
    g.kernel = &kern;
    for (int64_t ky = 0; ky < KH; ++ky) {
        for (int64_t kx = 0; kx < KW; ++kx) g.tap_bytes.push_back(size_t(ky) * kern.nb[1] + size_t(kx) * kern.nb[0]);
    }
    g.kernel_nb_oc = kern.nb[2];
    g.kernel_nb_ic = kern.nb[3];
    g.data = &x;
    g.data_nb_ic = x.nb[2];
    g.data_nb_n = x.nb[3];
    g.OC = kern.ne[2];
    g.IC = kern.ne[3];
    g.P = IW * x.ne[1];
    g.N = dst.ne[3];
    g.position_bytes = [&](int64_t q) { return size_t(q / IW) * x.nb[1] + size_t(q % IW) * x.nb[0]; };
    g.zero = [&](int64_t n, int64_t o0, int64_t o1) {
        float* out_n = reinterpret_cast<float*>(at(dst, 0, 0, 0, n));
        std::memset(out_n + size_t(o0) * plane, 0, size_t(o1 - o0) * plane * sizeof(float));
    };
    g.scatter = [&](const ConvTransposeBlock& b) {
        float* out_n = reinterpret_cast<float*>(at(dst, 0, 0, 0, b.n));
        const float* c = b.cols;
        int64_t iy = b.p0 / IW, ix = b.p0 % IW;
        for (int64_t l = 0; l < b.m; ++l) {
            float* row = out_n + size_t(b.oc0) * plane + size_t(iy * s) * size_t(orow) + size_t(ix * s);
            for (int64_t q = 0; q < b.nch; ++q, row += plane) {
                float* r = row;
                for (int64_t ky = 0; ky < KH; ++ky, r += orow, c += KW) {
                    for (int64_t kx = 0; kx < KW; ++kx) r[kx] += c[kx];
                }
            }
            if (++ix == IW) {
                ix = 0;
                ++iy;
            }
        }
    };
    conv_transpose_gemm(p, g);
}

}  // namespace mb
