#include "core/scheduler.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/allocation.h"
#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/context.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/graph.h"
#include "core/tensor.h"

namespace mb {

namespace {

bool memory_usable(const Backend& b, const Tensor& t) {
    const auto& buf = t.data_buffer();
    return buf && b.device()->supports_buft(*buf->buffer_type());
}

std::string list_srcs(const Tensor& node) {
    std::string out;
    for (const Tensor* s : node.src) {
        if (s) out += (out.empty() ? "" : ", ") + s->describe();
    }
    return out;
}

// A node that writes into memory its split's backend cannot use (a CPY or SET_ROWS into a view of
// GPU memory when the GPU cannot run it) computes into a staging tensor in the backend's memory:
// the node is pointed at it, with its current bytes copied in (ops that write part of it keep the
// rest), and write_back() copies the result into the node's own memory. The node's own layout is
// restored whatever happens.
class Staged {
public:
    Staged(Tensor* node, Context& ctx, Backend& backend) : node_(node) {
        std::vector<uint8_t> bytes(node->nbytes());
        read_packed(*node, bytes.data());
        stage_ = ctx.new_tensor(node->type, node->ne, node->n_dims, node->name + " (staged)");
        alloc_ctx_tensors(ctx, backend.device()->default_buffer_type());
        write_packed(*stage_, bytes.data());
        view_src_ = node->view_src;
        view_offs_ = node->view_offs;
        std::copy(std::begin(node->nb), std::end(node->nb), nb_);
        node->view_src = stage_;
        node->view_offs = 0;
        std::copy(std::begin(stage_->nb), std::end(stage_->nb), node->nb);
    }
    Staged(const Staged&) = delete;
    Staged& operator=(const Staged&) = delete;
    ~Staged() { restore(); }

    void write_back() {
        std::vector<uint8_t> bytes(stage_->nbytes());
        read_packed(*stage_, bytes.data());
        restore();
        write_packed(*node_, bytes.data());
    }

private:
    void restore() {
        if (node_->view_src != stage_) return;
        node_->view_src = view_src_;
        node_->view_offs = view_offs_;
        std::copy(std::begin(nb_), std::end(nb_), node_->nb);
    }

    Tensor* node_;
    Tensor* stage_ = nullptr;
    Tensor* view_src_ = nullptr;
    size_t view_offs_ = 0;
    size_t nb_[kMaxDims] = {};
};

// Restores the sources a split redirected to copies, whatever happens during its compute.
class SourceSwap {
public:
    void redirect(Tensor* node, int i, Tensor* to) {
        saved_.push_back({node, i, node->src[i]});
        node->src[i] = to;
    }
    ~SourceSwap() {
        for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) it->node->src[it->i] = it->original;
    }

private:
    struct Saved {
        Tensor* node;
        int i;
        Tensor* original;
    };
    std::vector<Saved> saved_;
};

// The unplaced nodes each running Scheduler compute (or plan) is placing are marked with its thread
// (Tensor::sched_claim): a node is placed by one compute at a time, the others wait, and a compute's
// intermediates go back (unplaced) before its claim does.
std::mutex claims_mutex;
std::condition_variable claims_changed;

const void* this_thread_token() {
    thread_local char token;
    return &token;
}

class GraphClaim {
public:
    // Waits until no other compute holds a node of the graph, then holds the unplaced ones. A node
    // held by a compute on this thread (an abort callback computing) raises DeviceError, unless the
    // claim only reads placements (plan), which that compute does not change while it is paused.
    GraphClaim(const Graph& graph, const char* who, bool reading) {
        const void* me = this_thread_token();
        std::unique_lock<std::mutex> lock(claims_mutex);
        for (;;) {
            bool busy = false;
            for (Tensor* n : graph.nodes()) {
                const void* owner = n->root().sched_claim;
                if (!owner || (reading && owner == me)) continue;
                if (owner == me) {
                    fail<DeviceError>(who, "node ", n->describe(), " is being computed by a Scheduler compute on "
                                      "this thread (an abort callback); compute it after that compute returns");
                }
                busy = true;
                break;
            }
            if (!busy) break;
            claims_changed.wait(lock);
        }
        for (Tensor* n : graph.nodes()) {
            Tensor& r = n->root();
            if (r.op == Op::NONE || r.sched_claim) continue;  // a view of a leaf, or held already
            if (r.buffer && r.buffer->is_freed()) {
                if (reading) continue;
                r.buffer.reset();  // its memory is gone: the compute places it again
                r.offset = 0;
            }
            if (!r.buffer) {
                r.sched_claim = me;
                held_.push_back(&r);
            }
        }
        std::sort(held_.begin(), held_.end());
    }
    ~GraphClaim() {
        std::lock_guard<std::mutex> lock(claims_mutex);
        for (Tensor* t : scratch_) {
            t->buffer.reset();
            t->offset = 0;
        }
        for (Tensor* t : held_) t->sched_claim = nullptr;
        claims_changed.notify_all();
    }
    GraphClaim(const GraphClaim&) = delete;
    GraphClaim& operator=(const GraphClaim&) = delete;

    bool holds(const Tensor* t) const {
        return std::binary_search(held_.begin(), held_.end(), t, std::less<const Tensor*>());
    }
    void add_scratch(Tensor* t) { scratch_.push_back(t); }

private:
    std::vector<Tensor*> held_;  // sorted
    std::vector<Tensor*> scratch_;
};

// Calls move(byte offset in t's memory, byte offset in the packed block, bytes) for each run of
// t's elements that is contiguous in memory: the whole tensor, its rows, or single elements
// (transposed views), in the packed order.
template <typename Move>
void walk_packed(const Tensor& t, Move move) {
    const size_t base = t.data_offset();
    if (t.is_contiguous()) {
        move(base, 0, t.nbytes());
        return;
    }
    const bool rows = t.rows_contiguous();
    const size_t run = rows ? row_size(t.type, t.ne[0]) : type_traits(t.type).type_size;
    const int64_t per_row = rows ? 1 : t.ne[0];
    size_t packed = 0;
    for (int64_t i3 = 0; i3 < t.ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t.ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t.ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < per_row; ++i0, packed += run)
                    move(base + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3], packed, run);
}

}  // namespace

void read_packed(const Tensor& t, void* dst) {
    const auto& buf = t.data_buffer();
    if (!buf) fail<InvalidArgumentError>("read_packed", "tensor ", t.describe(), " ", unallocated(t));
    auto* out = static_cast<uint8_t*>(dst);
    walk_packed(t, [&](size_t at, size_t packed, size_t n) { buf->get(out + packed, at, n); });
}

void write_packed(Tensor& t, const void* src) {
    const auto& buf = t.data_buffer();
    if (!buf) fail<InvalidArgumentError>("write_packed", "tensor ", t.describe(), " ", unallocated(t));
    const auto* in = static_cast<const uint8_t*>(src);
    walk_packed(t, [&](size_t at, size_t packed, size_t n) { buf->set(in + packed, at, n); });
}

Scheduler::Scheduler(std::vector<std::shared_ptr<Backend>> backends) : backends_(std::move(backends)) {
    if (backends_.empty()) fail<InvalidArgumentError>("Scheduler", "needs at least one backend");
    std::unordered_set<const Backend*> seen;
    for (const auto& b : backends_) {
        if (!b) fail<InvalidArgumentError>("Scheduler", "backend is None");
        if (!seen.insert(b.get()).second)
            fail<InvalidArgumentError>("Scheduler", "backend '", b->name(), "' is listed twice");
    }
    scratch_.resize(backends_.size());
}

Scheduler::~Scheduler() = default;

int Scheduler::backend_of_buffer(const Tensor& t) const {
    for (size_t i = 0; i < backends_.size(); ++i) {
        if (memory_usable(*backends_[i], t)) return static_cast<int>(i);
    }
    return -1;
}

std::vector<Placement> Scheduler::plan(const Graph& graph) const {
    GraphClaim claim(graph, "Scheduler::plan", /*reading=*/true);
    return plan_nodes(graph);
}

std::vector<Placement> Scheduler::plan_nodes(const Graph& graph) const {
    std::vector<Placement> out;
    std::unordered_map<const Tensor*, int> where;
    for (Tensor* node : graph.nodes()) {
        Placement p{node, -1, ""};
        if (op_is_view(node->op)) {
            const Tensor& root = node->root();
            auto it = where.find(&root);
            p.backend = it != where.end() ? it->second : std::max(0, backend_of_buffer(root));
            p.reason = "view: computes nothing";
        } else if (node->is_allocated()) {
            // Its result must land in memory that is already placed: only backends that can use it.
            for (size_t i = 0; i < backends_.size() && p.backend < 0; ++i) {
                if (memory_usable(*backends_[i], *node) && backends_[i]->device()->supports_op(*node)) {
                    p.backend = static_cast<int>(i);
                    p.reason = "writes into its '" + node->data_buffer()->buffer_type()->name() + "' memory";
                }
            }
            // Else the first backend that can run it computes into a staging copy of that memory,
            // which is written back when its split ends (graph_compute's Staged).
            for (size_t i = 0; i < backends_.size() && p.backend < 0; ++i) {
                if (backends_[i]->device()->supports_op(*node)) {
                    p.backend = static_cast<int>(i);
                    p.reason = "fallback: computed in " + backends_[i]->device()->name() +
                               " memory and copied back into its '" + node->data_buffer()->buffer_type()->name() +
                               "' memory";
                }
            }
            if (p.backend < 0) {
                fail<UnsupportedOpError>("Scheduler::plan", "no backend can run ", op_name(node->op), " into the '",
                                         node->data_buffer()->buffer_type()->name(), "' memory of ", node->describe(),
                                         " from (", list_srcs(*node), ")");
            }
        } else {
            // Prefer the backend whose memory holds the weights (src0), unless an earlier backend
            // asks to take the op over (offload_op), then the first backend that supports it.
            const Tensor* w = node->src[0];
            int weights = w && w->op == Op::NONE && w->is_allocated() ? backend_of_buffer(*w) : -1;
            if (weights >= 0 && backends_[weights]->device()->supports_op(*node)) {
                p.backend = weights;
                p.reason = "its weights live in '" + w->data_buffer()->buffer_type()->name() + "' memory";
                for (int i = 0; i < weights; ++i) {
                    auto dev = backends_[i]->device();
                    if (dev->offload_op(*node) && dev->supports_op(*node)) {
                        p.backend = i;
                        p.reason = "offload_op: large enough to run on " + dev->name();
                        break;
                    }
                }
            } else {
                for (size_t i = 0; i < backends_.size() && p.backend < 0; ++i) {
                    if (backends_[i]->device()->supports_op(*node)) {
                        p.backend = static_cast<int>(i);
                        p.reason = i == 0 ? "first backend, supports it"
                                          : "fallback: earlier backends do not support it";
                    }
                }
            }
            if (p.backend < 0) {
                fail<UnsupportedOpError>("Scheduler::plan", "no backend can run ", op_name(node->op), " -> ",
                                         node->describe(), " from (", list_srcs(*node), ")");
            }
        }
        where[node] = p.backend;
        out.push_back(std::move(p));
    }
    return out;
}

Status Scheduler::graph_compute(Graph& graph) {
    if (computing_thread_.load() == std::this_thread::get_id()) {
        fail<DeviceError>("Scheduler::graph_compute", "called from inside a compute of the same scheduler (a backend's "
                          "abort callback); it cannot compute again until that compute returns");
    }
    // Claimed before this scheduler's turn: a compute waiting for the nodes holds no turn meanwhile.
    GraphClaim claim(graph, "Scheduler::graph_compute", /*reading=*/false);
    std::lock_guard<std::mutex> lock(compute_mutex_);
    struct Owner {
        std::atomic<std::thread::id>& id;
        explicit Owner(std::atomic<std::thread::id>& i) : id(i) { id.store(std::this_thread::get_id()); }
        ~Owner() { id.store(std::thread::id()); }
    } owner(computing_thread_);
    std::vector<Placement> placements = plan_nodes(graph);
    for (Tensor* leaf : graph.leafs()) {
        if (!leaf->is_allocated()) {
            fail<InvalidArgumentError>("Scheduler::graph_compute", "input ", leaf->describe(),
                                       " is not allocated: place it with mb.alloc_ctx_tensors first");
        }
    }

    // Which nodes are read by a node on another backend (or by the user): they must outlive their part.
    std::unordered_map<const Tensor*, int> where;
    for (const auto& p : placements) where[p.node] = p.backend;
    std::unordered_set<const Tensor*> outputs(graph.outputs().begin(), graph.outputs().end());
    std::vector<std::vector<Tensor*>> part_nodes(backends_.size()), part_outputs(backends_.size());
    for (const auto& p : placements) {
        part_nodes[p.backend].push_back(p.node);
        for (Tensor* s : p.node->src) {
            if (!s) continue;
            auto it = where.find(&s->root());
            if (it != where.end() && it->second != p.backend) part_outputs[it->second].push_back(&s->root());
        }
        if (outputs.count(p.node)) part_outputs[p.backend].push_back(p.node);
    }
    // Outputs (and nodes flagged input/output) keep memory of their own; the rest is scratch.
    auto kept = [&](const Tensor& t) { return outputs.count(&t) || (t.flags & (kTensorInput | kTensorOutput)); };
    for (const Tensor* t : graph.outputs()) outputs.insert(&t->root());
    for (size_t b = 0; b < backends_.size(); ++b) {
        const auto& buft = backends_[b]->device()->default_buffer_type();
        std::vector<Tensor*> own;
        for (Tensor* n : part_nodes[b]) {
            if (!n->is_view() && claim.holds(n) && kept(*n)) own.push_back(n);
        }
        if (own.empty()) continue;
        size_t total = 0;
        std::vector<size_t> offsets;
        for (Tensor* t : own) {
            offsets.push_back(total);
            total += (std::max<size_t>(buft->alloc_size(*t), 1) + buft->alignment() - 1) / buft->alignment() *
                     buft->alignment();
        }
        auto buffer = buft->alloc(total);
        for (size_t k = 0; k < own.size(); ++k) {
            own[k]->buffer = buffer;
            own[k]->offset = offsets[k];
            own[k]->flags &= ~kTensorScratch;
        }
    }
    // The scratch plans, per backend: the last ones made for this graph when nothing they depend on
    // changed (which nodes run where, which need scratch, the input/output flags, the outputs).
    // Tensors never change shape or sources, and the key's node addresses stay theirs while the
    // graph's Context lives.
    std::vector<std::pair<const Tensor*, uint32_t>> key;
    key.reserve(placements.size() + graph.outputs().size());
    for (const auto& p : placements) {
        const bool scratch = !p.node->is_view() && !p.node->buffer && claim.holds(p.node);
        key.push_back({p.node, uint32_t(p.backend) << 3 | (scratch ? 4u : 0u) | (p.node->flags & 3u)});
    }
    for (const Tensor* t : graph.outputs()) key.push_back({t, ~0u});
    Context* ctx = graph.context();
    const std::vector<MemoryPlan>* plans = nullptr;
    for (auto it = plan_cache_.begin(); it != plan_cache_.end() && !plans; ++it) {
        auto live = it->context.lock();
        if (live && live.get() == ctx && it->key == key) plans = &it->plans;
    }
    if (!plans) {
        std::vector<MemoryPlan> made(backends_.size());
        for (size_t b = 0; b < backends_.size(); ++b) {
            if (part_nodes[b].empty()) continue;
            Graph part(part_nodes[b], {}, part_outputs[b]);
            made[b] = plan_graph_memory(part, *backends_[b]->device()->default_buffer_type(), [&](const Tensor& t) {
                auto w = where.find(&t);
                return w != where.end() && w->second == static_cast<int>(b) && claim.holds(&t);
            });
        }
        // Entries of Contexts that are gone go first; at most 16 graphs are remembered.
        plan_cache_.erase(std::remove_if(plan_cache_.begin(), plan_cache_.end(),
                                         [](const CachedPlans& c) { return c.context.expired(); }),
                          plan_cache_.end());
        if (plan_cache_.size() >= 16) plan_cache_.erase(plan_cache_.begin());
        std::weak_ptr<Context> weak;
        if (ctx) weak = ctx->weak_from_this();
        plan_cache_.push_back({weak, std::move(key), std::move(made)});
        plans = &plan_cache_.back().plans;
    }
    for (size_t b = 0; b < backends_.size(); ++b) {
        const MemoryPlan& scratch = (*plans)[b];
        if (scratch.offsets.empty()) continue;
        auto& buffer = scratch_[b];
        if (!buffer || buffer->is_freed() || buffer->size() < scratch.peak) {
            buffer.reset();  // the old scratch goes before the new one is made
            buffer = backends_[b]->device()->default_buffer_type()->alloc(scratch.peak);
        }
        for (const auto& [t, offset] : scratch.offsets) {
            t->buffer = buffer;
            t->offset = offset;
            t->flags |= kTensorScratch;
            claim.add_scratch(t);
        }
    }

    // The last placement reading each tensor's memory.
    std::unordered_map<const Tensor*, size_t> last_reader;
    for (size_t k = 0; k < placements.size(); ++k) {
        for (Tensor* s : placements[k].node->src) {
            if (s) last_reader[&s->root()] = k;
        }
    }

    // Run split by split; sources in memory the split's backend cannot use are copied in first.
    copies_ctx_ = std::make_shared<Context>();
    n_splits_ = 0;
    n_copies_ = 0;
    size_t i = 0;
    while (i < placements.size()) {
        const int b = placements[i].backend;
        Backend& backend = *backends_[b];
        std::vector<Tensor*> nodes;
        SourceSwap swap;
        std::unordered_map<const Tensor*, Tensor*> copies;
        std::unique_ptr<Staged> staged;
        for (; i < placements.size() && placements[i].backend == b && !staged; ++i) {
            Tensor* node = placements[i].node;
            if (op_is_view(node->op)) continue;
            for (int s = 0; s < kMaxSrc; ++s) {
                Tensor* src = node->src[s];
                if (!src || memory_usable(backend, *src)) continue;
                Tensor*& copy = copies[src];
                if (!copy) {
                    copy = copies_ctx_->new_tensor(src->type, src->ne, src->n_dims, src->name + " (copy)");
                    alloc_ctx_tensors(*copies_ctx_, backend.device()->default_buffer_type());
                    std::vector<uint8_t> bytes(copy->nbytes());
                    read_packed(*src, bytes.data());
                    write_packed(*copy, bytes.data());
                    ++n_copies_;
                }
                swap.redirect(node, s, copy);
            }
            // Its split ends with it: later nodes read its memory after the write-back.
            if (!memory_usable(backend, *node)) staged = std::make_unique<Staged>(node, *copies_ctx_, backend);
            nodes.push_back(node);
        }
        if (nodes.empty()) continue;
        ++n_splits_;
        // Outputs of a split: what the user or a later split reads (so fusion keeps exactly those).
        std::vector<Tensor*> split_outputs;
        for (Tensor* n : nodes) {
            auto last = last_reader.find(&n->root());
            if (outputs.count(n) || (last != last_reader.end() && last->second >= i)) split_outputs.push_back(n);
        }
        Graph split(nodes, {}, split_outputs);
        Status st = backend.graph_compute(split);
        if (st != Status::SUCCESS) return st;
        if (staged) staged->write_back();
    }
    return Status::SUCCESS;
}

}  // namespace mb
