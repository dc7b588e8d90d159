#include "metal/ops/op_encoder.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/buffer.h"
#include "core/errors.h"
#include "metal/metal_storage.h"
#include "metal/ops/ops.h"

namespace mb::metal {

namespace {

// A concurrent pass keeps at most this many ranges since its last barrier; past it, a barrier is
// cheaper than comparing each new dispatch against all of them (and keeps long graphs linear).
constexpr size_t kMaxRangesSinceBarrier = 256;

}  // namespace

OpEncoder::OpEncoder(Runtime& runtime, const RuntimeProps& props, const std::vector<Tensor*>& nodes, bool fusion,
                     bool concurrent, const RtBuffer* error_record, const std::unordered_set<const Tensor*>* keep)
    : runtime_(runtime), props_(props), nodes_(nodes), fusion_(fusion), concurrent_(concurrent),
      error_record_(error_record), keep_(keep) {
    if (!fusion_) return;
    std::unordered_set<const Tensor*> read;
    for (const Tensor* node : nodes_) {
        read.clear();
        if (node->view_src) read.insert(node->view_src);
        for (const Tensor* s : node->src) {
            if (!s) continue;
            read.insert(s);
            if (s->view_src) read.insert(s->view_src);
        }
        for (const Tensor* t : read) ++readers_[t];
    }
}

void OpEncoder::begin(ComputeEncoder& enc) {
    enc_ = &enc;
    bound_.clear();
    since_barrier_.clear();
}

size_t OpEncoder::encode(size_t i) { return encode_node(*this, nodes_, i); }

bool OpEncoder::feeds_only_next(size_t m) const {
    if (!fusion_ || m + 1 >= nodes_.size()) return false;
    const Tensor* t = nodes_[m];
    if ((t->flags & (kTensorInput | kTensorOutput)) || (keep_ && keep_->count(t))) return false;
    const Tensor& next = *nodes_[m + 1];
    if (next.src[0] != t) return false;
    for (int s = 1; s < kMaxSrc; ++s) {
        const Tensor* src = next.src[s];
        if (src && (src == t || src->view_src == t)) return false;
    }
    auto it = readers_.find(t);
    return it != readers_.end() && it->second == 1;  // the next node, and nothing else
}

const Pipeline& OpEncoder::use(const std::string& name, const std::vector<FunctionConstant>& constants) {
    auto p = runtime_.pipeline(name, constants);  // cached by the runtime; lives as long as it
    enc_->set_pipeline(*p);
    bound_.clear();
    return *p;
}

void OpEncoder::error_record(uint32_t index) {
    if (!error_record_) fail<InvalidArgumentError>("OpEncoder::error_record", "this encoder has no error record");
    enc_->set_buffer(*error_record_, 0, index);
    bound_.erase(index);
}

void OpEncoder::bind(const Tensor& t, uint32_t index, size_t extra, bool write) {
    const auto& buf = t.data_buffer();
    if (!buf) fail<InvalidArgumentError>("OpEncoder::bind", "tensor ", t.describe(), " is not allocated");
    auto storage = buf->storage("OpEncoder::bind");
    auto* ms = dynamic_cast<MetalStorage*>(storage.get());
    if (!ms) fail<InvalidArgumentError>("OpEncoder::bind", "tensor ", t.describe(), " is not in Metal memory");
    const size_t n = t.nbytes() + extra;
    DeviceRef ref = ms->locate(t.data_offset(), n);
    enc_->set_buffer(*ref.buffer, ref.offset, index);
    bound_[index] = {ref.buffer, ref.offset, ref.offset + n, write};
}

void OpEncoder::dispatch(Size3 groups, Size3 threads) {
    if (concurrent_) {
        bool conflict = since_barrier_.size() + bound_.size() > kMaxRangesSinceBarrier;
        for (auto b = bound_.begin(); b != bound_.end() && !conflict; ++b) {
            const Range& x = b->second;
            for (const Range& y : since_barrier_) {
                if (x.buffer == y.buffer && x.begin < y.end && y.begin < x.end && (x.write || y.write)) {
                    conflict = true;
                    break;
                }
            }
        }
        if (conflict) {
            enc_->memory_barrier();
            since_barrier_.clear();
        }
        for (const auto& b : bound_) since_barrier_.push_back(b.second);
    }
    enc_->dispatch(groups, threads);
}

}  // namespace mb::metal
