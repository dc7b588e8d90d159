// SSM_SCAN on the Metal device (shaders/ssm_scan.metal): f32 with ggml's layouts (s, dt, A contiguous,
// x, B, C with packed rows), one threadgroup per (head, sequence).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_ssm_scan(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* ids = node.src[6];
    return plain_f32_supports(node, Op::SSM_SCAN, 6) && ids && ids->type == Type::I32 && fits_i32(*ids) &&
           node.nelements() <= INT32_MAX;
}

size_t encode_ssm_scan(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& s = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const Tensor& dt = *dst.src[2];
    const Tensor& A = *dst.src[3];
    const Tensor& B = *dst.src[4];
    const Tensor& C = *dst.src[5];
    const Tensor& ids = *dst.src[6];
    mb_kargs_ssm_scan args{};
    args.nc = int32_t(s.ne[0]);
    args.nr = int32_t(x.ne[0]);
    args.nh = int32_t(x.ne[1]);
    args.ng = int32_t(B.ne[1]);
    args.nt = int32_t(x.ne[2]);
    args.ns = int32_t(x.ne[3]);
    args.ne30 = int32_t(A.ne[0]);
    args.n_states = int32_t(s.ne[3]);
    args.nb03 = s.nb[3];
    args.nb12 = x.nb[2];
    args.nb13 = x.nb[3];
    args.nb21 = dt.nb[1];
    args.nb22 = dt.nb[2];
    args.nb31 = A.nb[1];
    args.nb42 = B.nb[2];
    args.nb43 = B.nb[3];
    args.nb52 = C.nb[2];
    args.nb53 = C.nb[3];
    args.s_off = size_t(x.nelements()) * sizeof(float);
    if (args.ns == 0) return 1;
    const Pipeline& p = enc.use("kernel_ssm_scan_f32", {});
    enc.args(args);
    const Tensor* inputs[] = {&s, &x, &dt, &A, &B, &C, &ids};
    uint32_t index = 1;
    for (const Tensor* t : inputs) enc.input(*t, index++);
    enc.error_record(8);
    enc.output(dst, 9);
    uint32_t nth = 32;
    const uint32_t max_nth = std::min<uint32_t>(256, p.max_threads_per_threadgroup());
    while (nth < x.ne[0] && 2 * nth <= max_nth) nth *= 2;
    enc.dispatch({uint32_t(x.ne[1]), uint32_t(x.ne[3]), 1}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
