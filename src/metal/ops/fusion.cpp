#include "metal/ops/fusion.h"

#include "metal/ops/op_encoder.h"

namespace mb::metal {

namespace {

bool reads(const Tensor& node, const Tensor* t, int from_slot) {
    for (int s = from_slot; s < kMaxSrc; ++s) {
        const Tensor* src = node.src[s];
        if (src && (src == t || src->view_src == t)) return true;
    }
    return false;
}

}  // namespace

bool feeds_only_next(const OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t m) {
    if (m + 1 >= nodes.size()) return false;
    const Tensor* t = nodes[m];
    if ((t->flags & (kTensorInput | kTensorOutput)) || enc.must_keep(*t)) return false;
    const Tensor& next = *nodes[m + 1];
    if (next.src[0] != t || reads(next, t, 1)) return false;
    for (size_t k = 0; k < nodes.size(); ++k) {
        if (k == m || k == m + 1) continue;
        if (nodes[k]->view_src == t || reads(*nodes[k], t, 0)) return false;
    }
    return true;
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
