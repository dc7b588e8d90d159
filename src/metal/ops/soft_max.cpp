// SOFT_MAX on the Metal device (shaders/soft_max.metal): one threadgroup per row of f32 with packed
// rows; mask f32 or f16 with packed rows, broadcast over dims 2,3 by modulo; ALiBi slopes from
// max_bias; optional f32 sinks, one per head (dim 2).
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "metal/ops/row_threads.h"
#include "kargs.h"

namespace mb::metal {

namespace {

bool aligned(const Tensor& t, size_t a) {
    return device_ref(t).offset % a == 0 && t.nb[1] % a == 0 && t.nb[2] % a == 0 && t.nb[3] % a == 0;
}

size_t elem_size(Type t) { return t == Type::F16 ? 2 : 4; }

}  // namespace

bool supports_soft_max(const RuntimeProps& props, const Tensor& node) {
    if (node.op != Op::SOFT_MAX || !props.has_simdgroup_reduction) return false;
    const Tensor* a = node.src[0];
    if (!a || a->type != Type::F32 || node.type != Type::F32) return false;
    for (int d = 0; d < kMaxDims; ++d) {
        if (a->ne[d] != node.ne[d]) return false;
    }
    if (a->nb[0] != sizeof(float) || node.nb[0] != sizeof(float) || !fits_i32(node)) return false;
    if (const Tensor* m = node.src[1]) {
        if (m->type != Type::F32 && m->type != Type::F16) return false;
        if (m->nb[0] != elem_size(m->type) || m->ne[0] != a->ne[0] || m->ne[1] < a->ne[1] || !fits_i32(*m)) {
            return false;
        }
        if (m->ne[2] == 0 || m->ne[3] == 0 || a->ne[2] % m->ne[2] != 0 || a->ne[3] % m->ne[3] != 0) return false;
    }
    if (const Tensor* s = node.src[2]) {
        if (s->type != Type::F32 || s->nelements() != a->ne[2] || !s->is_contiguous()) return false;
    }
    return true;
}

size_t encode_soft_max(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& src0 = *dst.src[0];
    const Tensor* mask = dst.src[1];
    const Tensor* sinks = dst.src[2];

    bool vec4 = src0.ne[0] % 4 == 0 && aligned(src0, 16) && aligned(dst, 16);
    if (mask) vec4 = vec4 && aligned(*mask, 4 * elem_size(mask->type));
    const int32_t k = vec4 ? 4 : 1;

    mb_kargs_soft_max args{};
    MB_SET_NE(args, ne0, src0);
    args.nb01 = src0.nb[1];
    args.nb02 = src0.nb[2];
    args.nb03 = src0.nb[3];
    args.ne11 = args.ne12 = args.ne13 = 1;
    if (mask) {
        args.ne11 = int32_t(mask->ne[1]);
        args.ne12 = int32_t(mask->ne[2]);
        args.ne13 = int32_t(mask->ne[3]);
        args.nb11 = mask->nb[1];
        args.nb12 = mask->nb[2];
        args.nb13 = mask->nb[3];
    }
    args.nb1 = dst.nb[1];
    args.nb2 = dst.nb[2];
    args.nb3 = dst.nb[3];
    args.nk = args.ne00 / k;
    args.scale = dst.param_f(0);
    args.max_bias = dst.param_f(1);
    // ALiBi: heads below the largest power of two n_head_log2 <= n_head use m0, the rest m1.
    int32_t n_head_log2 = 1;
    while (int64_t(n_head_log2) * 2 <= src0.ne[2]) n_head_log2 *= 2;
    args.n_head_log2 = n_head_log2;
    args.m0 = std::pow(2.0f, -args.max_bias / float(n_head_log2));
    args.m1 = std::pow(2.0f, -(args.max_bias / 2.0f) / float(n_head_log2));

    const bool f16 = mask && mask->type == Type::F16;
    const char* name = vec4 ? (f16 ? "kernel_soft_max_f16_4" : "kernel_soft_max_f32_4")
                            : (f16 ? "kernel_soft_max_f16" : "kernel_soft_max_f32");
    const Pipeline& p = enc.use(name, {FunctionConstant::boolean(400, mask != nullptr),
                                       FunctionConstant::boolean(401, sinks != nullptr)});
    enc.args(args);
    enc.input(src0, 1);
    enc.output(dst, 2);
    // Absent mask or sinks: src0 is bound in their place and never read.
    enc.input(mask ? *mask : src0, 3);
    enc.input(sinks ? *sinks : src0, 4);
    enc.threadgroup_memory(32 * sizeof(float), 0);
    const uint32_t nth = row_threads(args.nk, p.max_threads_per_threadgroup());
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
