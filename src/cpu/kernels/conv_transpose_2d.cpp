// CONV_TRANSPOSE_2D (ggml_conv_transpose_2d_p0): kernel [KW, KH, OC, IC] f32 or f16, data f32
// [W, H, IC, N] with any strides -> f32 [(W - 1) s + KW, (H - 1) s + KH, OC, N] contiguous:
// dst[n][oc][iy*s + ky][ix*s + kx] += kernel[ic][oc][ky][kx] * data[n][ic][iy][ix]. params i[0] = s.
//
// The GEMM of conv_transpose_gemm.h over the input positions p = iy*W + ix, with the KH*KW taps
// t = ky*KW + kx of a channel as its columns, by tap (a tap's positions consecutive); the scatter adds
// cols[(oc, ky, kx)][p] at dst[n][oc][iy*s + ky][ix*s + kx], a tap's run of positions on one input
// row at a time (consecutive outputs at stride 1, two taps interleaved into consecutive ones at 2).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/conv_transpose_gemm.h"
#include "cpu/kernels/kernels.h"

namespace mb {

namespace {

// One (channel, ky) row of a run of len input positions: out[i*s + kx] += c[kx*ld + i] for every tap
// kx, a tap at a time (stride 1: one contiguous run; stride 2: taps kx, kx + 1 interleaved into one
// contiguous run).
void add_row_taps(float* out, const float* c, int64_t ld, int64_t KW, int64_t s, int64_t len) {
    for (int64_t kx = 0; kx < KW;) {
        const float* c0 = c + kx * ld;
        float* o = out + kx;
        if (s == 1) {
            for (int64_t i = 0; i < len; ++i) o[i] += c0[i];
            kx += 1;
        } else if (s == 2 && kx + 1 < KW) {
            const float* c1 = c0 + ld;
            for (int64_t i = 0; i < len; ++i) {
                o[2 * i] += c0[i];
                o[2 * i + 1] += c1[i];
            }
            kx += 2;
        } else {
            for (int64_t i = 0; i < len; ++i) o[i * s] += c0[i];
            kx += 1;
        }
    }
}

}  // namespace

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
    g.by_tap = true;
    g.scatter = [&](const ConvTransposeBlock& b) {
        float* out_n = reinterpret_cast<float*>(at(dst, 0, 0, 0, b.n));
        // runs of the block's positions on one input row
        for (int64_t l0 = 0; l0 < b.m;) {
            const int64_t pos = b.p0 + l0, iy = pos / IW, ix0 = pos % IW, len = std::min(IW - ix0, b.m - l0);
            for (int64_t q = 0; q < b.nch; ++q) {
                float* row = out_n + size_t(b.oc0 + q) * plane + size_t(iy * s) * size_t(orow) + size_t(ix0 * s);
                const float* c = b.cols + q * KH * KW * b.ld + l0;
                for (int64_t ky = 0; ky < KH; ++ky, row += orow, c += KW * b.ld) add_row_taps(row, c, b.ld, KW, s, len);
            }
            l0 += len;
        }
    };
    conv_transpose_gemm(p, g);
}

}  // namespace mb
