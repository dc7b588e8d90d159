#include "metal/ops/fusion.h"

#include <cstddef>
#include <vector>

#include "kargs.h"
#include "metal/ops/op_encoder.h"
#include "metal/ops/ops.h"

namespace mb::metal {

namespace {

// Whether nodes[j] is op(nodes[j-1], w) that a fused kernel takes: f32 operand, and for the norm's
// MUL and ADD packed rows.
bool follows(const RuntimeProps& props, const std::vector<Tensor*>& nodes, size_t j, Op op, bool packed) {
    if (j >= nodes.size()) return false;
    const Tensor& node = *nodes[j];
    if (node.op != op || node.src[0] != nodes[j - 1] || !supports_binary(props, node)) return false;
    const Tensor& w = *node.src[1];
    return w.type == Type::F32 && (!packed || w.nb[0] == sizeof(float));
}

}  // namespace

size_t fusable_after(const RuntimeProps& props, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& first = *nodes[i];
    size_t k = 0;
    if (first.op == Op::ADD) {
        if (!first.src[1] || first.src[1]->type != Type::F32 || !supports_binary(props, first)) return 0;
        while (k + 1 < MB_BIN_MAX_SRC1 && follows(props, nodes, i + k + 1, Op::ADD, false)) ++k;
    } else if (first.op == Op::NORM || first.op == Op::RMS_NORM) {
        if (follows(props, nodes, i + 1, Op::MUL, true)) {
            k = 1;
            if (follows(props, nodes, i + 2, Op::ADD, true)) k = 2;
        }
    }
    return k;
}

bool disjoint_or_same(const Tensor& dst, const Tensor& src) {
    const DeviceRef d = device_ref(dst);
    const DeviceRef s = device_ref(src);
    if (d.buffer != s.buffer) return true;
    const size_t d_end = d.offset + dst.nbytes(), s_end = s.offset + src.nbytes();
    if (d_end <= s.offset || s_end <= d.offset) return true;
    if (d.offset != s.offset || dst.type != src.type) return false;
    for (int i = 0; i < kMaxDims; ++i) {
        if (dst.ne[i] != src.ne[i] || dst.nb[i] != src.nb[i]) return false;
    }
    return true;
}

}  // namespace mb::metal
