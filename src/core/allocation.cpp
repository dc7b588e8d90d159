#include "core/allocation.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/context.h"
#include "core/errors.h"
#include "core/graph.h"
#include "core/tensor.h"

namespace mb {

namespace {

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

bool needs_memory(const Tensor& t) { return !t.is_view() && !t.buffer; }

// First-fit-by-size (best fit) over free blocks of one growing arena.
class Arena {
public:
    explicit Arena(size_t alignment) : alignment_(alignment) {}

    size_t alloc(size_t size) {
        size = align_up(std::max<size_t>(size, 1), alignment_);
        auto best = free_.end();
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->size >= size && (best == free_.end() || it->size < best->size)) best = it;
        }
        size_t offset;
        if (best != free_.end()) {
            offset = best->offset;
            best->offset += size;
            best->size -= size;
            if (best->size == 0) free_.erase(best);
        } else {
            offset = top_;
            top_ += size;
            peak_ = std::max(peak_, top_);
        }
        return offset;
    }

    void release(size_t offset, size_t size) {
        size = align_up(std::max<size_t>(size, 1), alignment_);
        free_.push_back({offset, size});
        std::sort(free_.begin(), free_.end(), [](const Block& a, const Block& b) { return a.offset < b.offset; });
        std::vector<Block> merged;
        for (const Block& b : free_) {
            if (!merged.empty() && merged.back().offset + merged.back().size == b.offset) {
                merged.back().size += b.size;
            } else {
                merged.push_back(b);
            }
        }
        // A free block at the top gives its memory back to the arena.
        if (!merged.empty() && merged.back().offset + merged.back().size == top_) {
            top_ = merged.back().offset;
            merged.pop_back();
        }
        free_ = std::move(merged);
    }

    size_t peak() const { return peak_; }

private:
    struct Block {
        size_t offset, size;
    };
    size_t alignment_;
    size_t top_ = 0;
    size_t peak_ = 0;
    std::vector<Block> free_;
};

}  // namespace

std::shared_ptr<Buffer> alloc_ctx_tensors(Context& ctx, const std::shared_ptr<BufferType>& buft) {
    std::vector<std::pair<Tensor*, size_t>> placed;
    size_t total = 0;
    for (const auto& t : ctx.tensors()) {
        if (!needs_memory(*t) || (t->flags & kTensorScratch)) continue;
        placed.push_back({t.get(), total});
        total += align_up(std::max<size_t>(buft->alloc_size(*t), 1), buft->alignment());
    }
    if (placed.empty()) return nullptr;
    auto buffer = buft->alloc(total);
    for (auto& [t, offset] : placed) {
        t->buffer = buffer;
        t->offset = offset;
    }
    return buffer;
}

void place_tensor(Tensor& t, const std::shared_ptr<Buffer>& buffer, size_t offset) {
    static const char* who = "Tensor.place";
    if (t.is_view()) fail<InvalidArgumentError>(who, "tensor ", t.describe(), " is a view; place its source instead");
    if (t.buffer) fail<InvalidArgumentError>(who, "tensor ", t.describe(), " is already placed");
    buffer->storage(who);  // raises if freed
    const auto& buft = buffer->buffer_type();
    if (offset % buft->alignment() != 0) {
        fail<InvalidArgumentError>(who, "offset ", offset, " is not a multiple of the '", buft->name(), "' alignment ",
                                   buft->alignment());
    }
    buffer->check_range(who, offset, buft->alloc_size(t));
    t.buffer = buffer;
    t.offset = offset;
}

MemoryPlan plan_graph_memory(const Graph& graph, const BufferType& buft,
                             const std::function<bool(const Tensor&)>& select) {
    std::unordered_map<Tensor*, int> uses;
    for (Tensor* node : graph.nodes()) {
        if (op_is_view(node->op)) continue;  // a view reads nothing; its consumers read its root
        for (Tensor* s : node->src) {
            if (s) ++uses[&s->root()];
        }
    }
    std::unordered_map<Tensor*, bool> keep;
    for (Tensor* t : graph.leafs()) keep[t] = true;
    for (Tensor* t : graph.outputs()) keep[&t->root()] = true;
    for (Tensor* t : graph.all_tensors()) {
        if (t->flags & (kTensorInput | kTensorOutput)) keep[&t->root()] = true;
    }

    Arena arena(buft.alignment());
    std::unordered_map<Tensor*, size_t> offsets;
    MemoryPlan plan;
    auto place = [&](Tensor* t) {
        if (!needs_memory(*t) || offsets.count(t) || (select && !select(*t))) return;
        size_t size = buft.alloc_size(*t);
        offsets[t] = arena.alloc(size);
        plan.offsets.push_back({t, offsets[t]});
        plan.unshared += align_up(std::max<size_t>(size, 1), buft.alignment());
    };
    for (Tensor* leaf : graph.leafs()) place(leaf);
    for (Tensor* node : graph.nodes()) {
        if (node->is_view()) place(&node->root());
        place(node);
        if (op_is_view(node->op)) continue;
        for (Tensor* s : node->src) {
            if (!s) continue;
            Tensor* r = &s->root();
            auto u = uses.find(r);
            if (u == uses.end() || --u->second > 0 || keep.count(r)) continue;
            auto o = offsets.find(r);
            if (o != offsets.end()) arena.release(o->second, buft.alloc_size(*r));
        }
    }
    plan.peak = arena.peak();
    return plan;
}

size_t GraphAllocator::alloc_graph(Graph& graph) {
    MemoryPlan plan = plan_graph_memory(graph, *buft_);
    peak_ = plan.peak;
    unshared_ = plan.unshared;
    if (plan.offsets.empty()) return 0;
    // The previous buffer is reused only when no tensor (nor any other holder) is left in it.
    const bool reusable = buffer_ && buffer_.use_count() == 1 && !buffer_->is_freed() && buffer_->size() >= peak_;
    if (!reusable) buffer_ = buft_->alloc(peak_);
    for (auto& [t, offset] : plan.offsets) {
        t->buffer = buffer_;
        t->offset = offset;
    }
    return peak_;
}

}  // namespace mb
