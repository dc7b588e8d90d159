// CONV_TRANSPOSE_1D: kernel [K, OC, IC] (f32 or f16), data f32 [L, IC, N] -> f32 [OL, OC, N] with
// out[n][oc][l*s0 + k*d0 - p0] += data[n][ic][l] * kernel[ic][oc][k]. params i[0..2] = s0, p0, d0.
//
// The GEMM of conv_transpose_gemm.h with the K taps of a channel as its columns; the scatter adds
// cols[l][(oc, k)] at out[n][oc][l*s0 + k*d0 - p0] (dropped outside [0, OL): the padding).
#include <cstddef>
#include <cstdint>

#include "cpu/kernels/conv_transpose_gemm.h"
#include "cpu/kernels/kernels.h"

namespace mb {

bool conv_transpose_1d_supported(const Tensor& dst) {
    const Tensor* k = dst.src[0];
    const Tensor* x = dst.src[1];
    return dst.op == Op::CONV_TRANSPOSE_1D && k && x && (k->type == Type::F32 || k->type == Type::F16) &&
           x->type == Type::F32 && dst.type == Type::F32;
}

size_t conv_transpose_1d_work_size(const Tensor& dst, int nth) {
    const Tensor& kern = *dst.src[0];
    return conv_transpose_gemm_work_size(kern.ne[0], kern.ne[1], kern.ne[2], nth);
}

void compute_conv_transpose_1d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& kern = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const int64_t s0 = dst.op_params[0], p0 = dst.op_params[1], d0 = dst.op_params[2];
    const int64_t K = kern.ne[0], OL = dst.ne[0];
    const int64_t step = int64_t(dst.nb[0] / sizeof(float));
    ConvTransposeGemm g;
    g.who = "CONV_TRANSPOSE_1D";
    g.kernel = &kern;
    for (int64_t k = 0; k < K; ++k) g.tap_bytes.push_back(size_t(k) * kern.nb[0]);
    g.kernel_nb_oc = kern.nb[1];
    g.kernel_nb_ic = kern.nb[2];
    g.data = &x;
    g.data_nb_ic = x.nb[1];
    g.data_nb_n = x.nb[2];
    g.OC = kern.ne[1];
    g.IC = kern.ne[2];
    g.P = x.ne[0];
    g.N = dst.ne[2];
    g.position_bytes = [&](int64_t l) { return size_t(l) * x.nb[0]; };
    g.zero = [&](int64_t n, int64_t o0, int64_t o1) {
        for (int64_t oc = o0; oc < o1; ++oc) {
            float* out = reinterpret_cast<float*>(at(dst, 0, oc, n));
            for (int64_t ol = 0; ol < OL; ++ol) out[ol * step] = 0.0f;
        }
    };
    const bool unit = step == 1 && d0 == 1;  // a channel's K taps land on K consecutive floats
    g.scatter = [&](const ConvTransposeBlock& b) {
        const int64_t nj = b.nch * K;
        for (int64_t l = 0; l < b.m; ++l) {
            const float* c = b.cols + l * nj;
            const int64_t base_ol = (b.p0 + l) * s0 - p0;
            const bool inside = base_ol >= 0 && base_ol + (K - 1) * d0 < OL;  // no tap in the padding
            for (int64_t q = 0; q < b.nch; ++q, c += K) {
                float* out = reinterpret_cast<float*>(at(dst, 0, b.oc0 + q, b.n));
                if (inside && unit) {
                    float* o = out + base_ol;
                    for (int64_t k = 0; k < K; ++k) o[k] += c[k];
                    continue;
                }
                for (int64_t k = 0; k < K; ++k) {
                    const int64_t ol = base_ol + k * d0;
                    if (ol >= 0 && ol < OL) out[ol * step] += c[k];
                }
            }
        }
    };
    conv_transpose_gemm(p, g);
}

}  // namespace mb
