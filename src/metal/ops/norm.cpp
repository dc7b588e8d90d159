// NORM, RMS_NORM and L2_NORM on the Metal device (shaders/norm.metal): one threadgroup per row, f32 rows
// packed (nb0 = 4). With fusion on, a following MUL(norm, w) and then ADD(.., b) are folded in
// (Whisper's layer norm is exactly norm -> mul -> add); w and b f32 with packed rows, broadcast by
// modulo on every dim.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/fusion.h"
#include "metal/ops/ops.h"
#include "metal/ops/row_threads.h"
#include "kargs.h"

namespace mb::metal {

namespace {

// How many of MUL, ADD after nodes[i] to fold: 0, 1 or 2, as the graph's shape allows (fusion.h) and
// while each intermediate is needed by nothing else. The result must not overlap an input it is
// computed from unless it is that input's very memory.
int fused_ops(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    if (!enc.fusion()) return 0;
    const int most = int(fusable_after(enc.props(), nodes, i));
    int f = 0;
    while (f < most && enc.feeds_only_next(i + size_t(f))) ++f;
    for (; f > 0; --f) {
        const Tensor& dst = *nodes[i + f];
        bool safe = disjoint_or_same(dst, *nodes[i]->src[0]);
        for (int k = 1; k <= f && safe; ++k) safe = disjoint_or_same(dst, *nodes[i + k]->src[1]);
        if (safe) break;
    }
    return f;
}

bool aligned16(const Tensor& t) {
    return device_ref(t).offset % 16 == 0 && t.nb[1] % 16 == 0 && t.nb[2] % 16 == 0 && t.nb[3] % 16 == 0;
}

}  // namespace

namespace {

size_t encode_group_norm(OpEncoder& enc, const Tensor& dst) {
    if (dst.is_empty()) return 1;
    const Tensor& src0 = *dst.src[0];
    mb_kargs_group_norm args{};
    args.ne00 = int32_t(src0.ne[0]);
    args.ne01 = int32_t(src0.ne[1]);
    args.ne02 = int32_t(src0.ne[2]);
    args.n_groups = dst.op_params[0];
    MB_SET_NB(args, nb0, src0);
    MB_SET_NB(args, nb, dst);
    args.eps = dst.param_f(1);
    const Pipeline& p = enc.use("kernel_group_norm_f32", {});
    enc.args(args);
    enc.input(src0, 1);
    enc.output(dst, 2);
    enc.threadgroup_memory(32 * sizeof(float), 0);
    const int64_t per = (src0.ne[2] + args.n_groups - 1) / args.n_groups;
    const uint32_t nth = row_threads(src0.ne[0] * src0.ne[1] * per, p.max_threads_per_threadgroup());
    enc.dispatch({uint32_t(args.n_groups), uint32_t(src0.ne[3]), 1}, {nth, 1, 1});
    return 1;
}

}  // namespace

bool supports_norm(const RuntimeProps& props, const Tensor& node) {
    if (node.op == Op::GROUP_NORM) {
        const Tensor* a = node.src[0];
        return props.has_simdgroup_reduction && a && a->type == Type::F32 && node.type == Type::F32 &&
               fits_i32(node) && a->ne[0] * a->ne[1] * a->ne[2] <= INT32_MAX;
    }
    if (node.op != Op::NORM && node.op != Op::RMS_NORM && node.op != Op::L2_NORM) return false;
    const Tensor* a = node.src[0];
    if (!props.has_simdgroup_reduction || !a || a->type != Type::F32 || node.type != Type::F32) return false;
    for (int d = 0; d < kMaxDims; ++d) {
        if (a->ne[d] != node.ne[d]) return false;
    }
    return a->nb[0] == sizeof(float) && node.nb[0] == sizeof(float) && fits_i32(node);
}

size_t encode_norm(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    if (nodes[i]->op == Op::GROUP_NORM) return encode_group_norm(enc, *nodes[i]);
    const int fuse = fused_ops(enc, nodes, i);
    const Tensor& norm = *nodes[i];
    const Tensor& src0 = *norm.src[0];
    const Tensor& dst = *nodes[i + fuse];
    if (dst.is_empty()) return 1 + fuse;
    const Tensor* w = fuse >= 1 ? nodes[i + 1]->src[1] : nullptr;
    const Tensor* b = fuse >= 2 ? nodes[i + 2]->src[1] : nullptr;

    bool vec4 = src0.ne[0] % 4 == 0 && aligned16(src0) && aligned16(dst);
    if (w) vec4 = vec4 && w->ne[0] % 4 == 0 && aligned16(*w);
    if (b) vec4 = vec4 && b->ne[0] % 4 == 0 && aligned16(*b);
    const int32_t k = vec4 ? 4 : 1;

    mb_kargs_norm args{};
    MB_SET_NE(args, ne0, src0);
    args.nb01 = src0.nb[1];
    args.nb02 = src0.nb[2];
    args.nb03 = src0.nb[3];
    args.nb1 = dst.nb[1];
    args.nb2 = dst.nb[2];
    args.nb3 = dst.nb[3];
    args.ne10 = args.ne11 = args.ne12 = args.ne13 = 1;
    args.ne20 = args.ne21 = args.ne22 = args.ne23 = 1;
    if (w) {
        args.ne10 = int32_t(w->ne[0] / k);
        args.ne11 = int32_t(w->ne[1]);
        args.ne12 = int32_t(w->ne[2]);
        args.ne13 = int32_t(w->ne[3]);
        args.nb11 = w->nb[1];
        args.nb12 = w->nb[2];
        args.nb13 = w->nb[3];
    }
    if (b) {
        args.ne20 = int32_t(b->ne[0] / k);
        args.ne21 = int32_t(b->ne[1]);
        args.ne22 = int32_t(b->ne[2]);
        args.ne23 = int32_t(b->ne[3]);
        args.nb21 = b->nb[1];
        args.nb22 = b->nb[2];
        args.nb23 = b->nb[3];
    }
    args.nk = args.ne00 / k;
    args.eps = norm.param_f(0);

    const Pipeline& p = enc.use(vec4 ? "kernel_norm_f32_4" : "kernel_norm_f32",
                                {FunctionConstant::boolean(300, norm.op != Op::NORM),
                                 FunctionConstant::boolean(302, norm.op == Op::L2_NORM),
                                 FunctionConstant::int32(301, fuse)});
    enc.args(args);
    enc.input(src0, 1);
    enc.output(dst, 2);
    // Unused operand slots get src0: bound, never read.
    enc.input(w ? *w : src0, 3);
    enc.input(b ? *b : src0, 4);
    enc.threadgroup_memory(32 * sizeof(float), 0);
    const uint32_t nth = row_threads(args.nk, p.max_threads_per_threadgroup());
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    return 1 + fuse;
}

}  // namespace mb::metal
