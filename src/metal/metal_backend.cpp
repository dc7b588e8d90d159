#include "metal/metal_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/graph.h"
#include "core/tensor.h"
#include "metal/metal_device.h"
#include "metal/metal_storage.h"
#include "metal/ops/fusion.h"
#include "metal/ops/op_encoder.h"
#include "metal/ops/ops.h"

namespace mb::metal {

namespace {

// Nodes upstream encodes in the first command buffer, committed before the rest is encoded.
constexpr size_t kFirstCommandBufferNodes = 64;

bool computes(const Tensor& node) { return !op_is_view(node.op) && !node.is_empty(); }

}  // namespace

MetalBackend::MetalBackend(std::shared_ptr<MetalDevice> device) : device_(std::move(device)) {
    declare_option("n_cb", 1, 1, 8);
    declare_option("fusion", 1, 0, 1);
    declare_option("concurrency", 1, 0, 1);
    declare_option("graph_optimize", 1, 0, 1);
    declare_option("debug", 0, 0, 2);
    for (const RuntimeOption& o : device_->runtime().options()) declare_option(o.name, o.default_value, o.min, o.max);
}

MetalBackend::~MetalBackend() {
    // In-flight work may still read memory we hold; let it finish.
    for (auto& cb : in_flight_) cb->wait();
}

std::string MetalBackend::name() const { return device_->name(); }

std::shared_ptr<Device> MetalBackend::device() const { return device_; }

OptionValues MetalBackend::runtime_options() const {
    OptionValues values;
    for (const RuntimeOption& o : device_->runtime().options()) values[o.name] = option(o.name);
    return values;
}

void MetalBackend::commit(std::unique_ptr<CommandBuffer> cb, std::string label) {
    cb->set_label(label);
    cb->commit();
    in_flight_.push_back(std::move(cb));
    labels_.push_back(std::move(label));
}

Status MetalBackend::graph_compute_async(Graph& graph) { return encode_graph(graph, false); }

std::unique_lock<std::mutex> MetalBackend::lock_for(const char* who) {
    reject_reentry(who);
    return std::unique_lock<std::mutex>(mutex_);
}

Status MetalBackend::graph_compute_timed(Graph& graph, DeviceTime& time) {
    static const char* who = "MetalBackend::profile";
    {
        auto lock = lock_for(who);
        timed_ = DeviceTime{};
        timed_clocks_.clear();
    }
    Status s = encode_graph(graph, true);
    synchronize();
    auto lock = lock_for(who);
    time = timed_;
    for (const std::string& c : timed_clocks_) time.clock += (time.clock.empty() ? "" : "; ") + c;
    return s;
}

Status MetalBackend::encode_graph(Graph& graph, bool timed) {
    static const char* who = "MetalBackend::graph_compute";
    auto lock = lock_for(who);
    const RuntimeProps props = device_->props();

    std::vector<Tensor*> nodes;
    std::unordered_set<const Storage*> seen;
    auto hold = [&](const Tensor& t) {
        const auto& buf = t.data_buffer();
        if (!buf) {
            fail<InvalidArgumentError>(who, "tensor ", t.describe(), " (op ", op_name(t.op),
                                       ") is not allocated: place it with mb.alloc_ctx_tensors or a GraphAllocator");
        }
        if (!device_->supports_buft(*buf->buffer_type())) {
            fail<InvalidArgumentError>(who, "tensor ", t.describe(), " lives in a '", buf->buffer_type()->name(),
                                       "' buffer, which device '", device_->name(), "' cannot compute on");
        }
        auto s = buf->storage(who);
        if (seen.insert(s.get()).second) held_.push_back(std::move(s));
    };
    for (Tensor* node : graph.nodes()) {
        if (op_is_view(node->op)) continue;
        // Refused even when empty: what a device supports must not depend on the sizes that day.
        if (!metal::supports_op(props, *node)) fail_cannot_run(who, device_->name(), *node);
        if (!device_->supports_op(*node)) {
            // Its rules allow it: its shader family did not compile.
            fail<UnsupportedOpError>(who, device_->name(), " cannot run ", op_name(node->op), " -> ", node->describe(),
                                     ": its shader family '", shader_family(node->op), "' ",
                                     device_->shader_family_state(node->op));
        }
        if (!computes(*node)) continue;
        hold(*node);
        for (Tensor* s : node->src) {
            if (s) hold(*s);
        }
        nodes.push_back(node);
    }
    if (nodes.empty()) return Status::SUCCESS;
    auto work = std::make_shared<const std::string>("graph_compute_async on " + device_->name());
    for (Tensor* node : nodes) {
        auto mark = [&](const Tensor& t, Access access) {
            size_t begin = t.data_offset();
            marks_.mark(t.data_buffer()->storage(who), begin, begin + t.nbytes(), access, {work, node->op, node->name});
        };
        mark(*node, Access::Write);
        for (Tensor* s : node->src) {
            if (s) mark(*s, Access::Read);
        }
    }

    const bool fusion = option("fusion") != 0;
    const bool concurrent = option("concurrency") != 0;
    const size_t n_cb = static_cast<size_t>(option("n_cb"));
    // Command buffer k encodes nodes [bounds[k], bounds[k+1]).
    std::vector<size_t> bounds = {0};
    size_t first = std::min(kFirstCommandBufferNodes, nodes.size());
    bounds.push_back(first);
    size_t rest = nodes.size() - first;
    for (size_t k = 1; k <= n_cb && rest > 0; ++k) bounds.push_back(first + (rest * k + n_cb - 1) / n_cb);
    bounds.back() = nodes.size();
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());

    const std::unordered_set<const Tensor*> keep(graph.outputs().begin(), graph.outputs().end());
    auto error_record = device_->runtime().alloc(16, StorageMode::Shared);
    std::memset(error_record->host_ptr(), 0, 16);
    error_records_.push_back(error_record);

    if (capture_next_) device_->runtime().capture_begin();
    OpEncoder op_enc(device_->runtime(), props, nodes, fusion, concurrent, error_record.get(), &keep);
    size_t i = 0;
    for (size_t k = 0; k + 1 < bounds.size() && i < nodes.size(); ++k) {
        auto cb = device_->runtime().command_buffer(runtime_options());
        if (timed) cb->time_dispatches();
        op_enc.begin(cb->compute(concurrent));
        const size_t first_node = i;
        while (i < nodes.size() && (i < bounds[k + 1] || k + 2 == bounds.size())) i += op_enc.encode(i);
        // Asked before every commit: on stop nothing of this graph is committed from here on.
        if (should_abort()) {
            if (capture_next_) device_->runtime().capture_end();
            capture_next_ = false;
            return Status::ABORTED;
        }
        const Tensor& a = *nodes[first_node];
        const Tensor& b = *nodes[i - 1];
        commit(std::move(cb), "graph_compute_async on " + device_->name() + ": nodes " +
                                  std::to_string(first_node) + "-" +
                                  std::to_string(i - 1) + " of " + std::to_string(nodes.size()) +
                                  " ('" + a.name + "' " +
                                  op_name(a.op) + " .. '" + b.name + "' " + op_name(b.op) + ")");
    }
    if (capture_next_) {
        device_->runtime().capture_end();
        capture_next_ = false;
    }
    return Status::SUCCESS;
}

void MetalBackend::synchronize() {
    auto lock = lock_for("MetalBackend::synchronize");
    std::string errors;
    for (size_t k = 0; k < in_flight_.size(); ++k) {
        in_flight_[k]->wait();
        const DeviceTiming t = in_flight_[k]->timing();
        if (!t.clock.empty()) {
            for (double ns : t.ns) timed_.us += ns / 1e3;
            if (std::find(timed_clocks_.begin(), timed_clocks_.end(), t.clock) == timed_clocks_.end()) {
                timed_clocks_.push_back(t.clock);
            }
        }
        if (in_flight_[k]->status() == CommandStatus::Error) {
            errors += (errors.empty() ? "" : "; ") + std::string("command buffer ") + std::to_string(k) + " (" +
                      labels_[k] + "): " + in_flight_[k]->error();
        }
    }
    std::string bad_input;
    for (const auto& rec : error_records_) {
        const auto* e = static_cast<const int32_t*>(rec->host_ptr());
        if (e[0] != 0 && bad_input.empty()) {
            bad_input = std::string(e[0] == 1   ? "GET_ROWS"
                                        : e[0] == 2 ? "SET_ROWS"
                                        : e[0] == 3 ? "MUL_MAT_ID"
                                        : e[0] == 4 ? "ADD_ID"
                                        : e[0] == 5 ? "SSM_SCAN"
                                                    : "a kernel") + " met row index " +
                        std::to_string(e[1]) + ", outside the " + std::to_string(e[2]) +
                        " rows it indexes (that row was skipped)";
        }
    }
    if (errors.empty()) {
        for (const PendingRead& r : reads_) std::memcpy(r.dst, r.staging->host_ptr(), r.n);
    }
    error_records_.clear();
    in_flight_.clear();
    labels_.clear();
    marks_.clear();
    held_.clear();
    staging_.clear();
    reads_.clear();
    // The failed work is gone; the backend stays usable for the next compute.
    if (!errors.empty()) fail<DeviceError>("MetalBackend::synchronize", device_->name(), " reported: ", errors);
    if (!bad_input.empty()) fail<OutOfRangeError>("MetalBackend::synchronize", bad_input);
}

void MetalBackend::set_tensor_async(Tensor& t, const void* src, size_t offset, size_t n) {
    if (offset > t.nbytes() || n > t.nbytes() - offset) {
        fail<OutOfRangeError>("MetalBackend::set_tensor_async", "range [", offset, ", ", offset + n,
                              ") is outside tensor ", t.describe(), " of ", t.nbytes(), " bytes");
    }
    DeviceRef ref = device_ref(t);
    auto lock = lock_for("MetalBackend::set_tensor_async");
    // The source is copied now, so the caller may reuse it at once.
    auto staging = device_->runtime().alloc(n, StorageMode::Shared);
    if (n) std::memcpy(staging->host_ptr(), src, n);
    auto cb = device_->runtime().command_buffer(runtime_options());
    cb->copy(*staging, 0, *ref.buffer, ref.offset + offset, n);
    held_.push_back(t.data_buffer()->storage("MetalBackend::set_tensor_async"));
    marks_.mark(held_.back(), t.data_offset() + offset, t.data_offset() + offset + n, Access::Write,
                PendingWork{std::make_shared<const std::string>("set_tensor_async on " + device_->name() +
                                                                " of " + t.describe()),
                            Op::NONE, {}});
    staging_.push_back(std::move(staging));
    commit(std::move(cb), "set_tensor_async on " + device_->name() + " of " + t.describe());
}

void MetalBackend::get_tensor_async(const Tensor& t, void* dst, size_t offset, size_t n) {
    if (offset > t.nbytes() || n > t.nbytes() - offset) {
        fail<OutOfRangeError>("MetalBackend::get_tensor_async", "range [", offset, ", ", offset + n,
                              ") is outside tensor ", t.describe(), " of ", t.nbytes(), " bytes");
    }
    DeviceRef ref = device_ref(t);
    auto lock = lock_for("MetalBackend::get_tensor_async");
    auto staging = device_->runtime().alloc(n, StorageMode::Shared);
    auto cb = device_->runtime().command_buffer(runtime_options());
    cb->copy(*ref.buffer, ref.offset + offset, *staging, 0, n);
    held_.push_back(t.data_buffer()->storage("MetalBackend::get_tensor_async"));
    marks_.mark(held_.back(), t.data_offset() + offset, t.data_offset() + offset + n, Access::Read,
                PendingWork{std::make_shared<const std::string>("get_tensor_async on " + device_->name() +
                                                                " of " + t.describe()),
                            Op::NONE, {}});
    reads_.push_back({staging, dst, n});
    commit(std::move(cb), "get_tensor_async on " + device_->name() + " of " + t.describe());
}

void MetalBackend::graph_optimize(Graph& graph) {
    if (option("graph_optimize") == 0) return;
    // Units: a node plus the nodes fused into it; a unit's level is one more than the deepest unit
    // it reads from. Sorting by level (stably) groups independent units so they can run concurrently.
    const auto& nodes = graph.nodes();
    const RuntimeProps props = device_->props();
    std::vector<std::vector<Tensor*>> units;
    for (size_t i = 0; i < nodes.size();) {
        size_t span = computes(*nodes[i]) ? fusable_after(props, nodes, i) : 0;
        units.emplace_back(nodes.begin() + i, nodes.begin() + i + span + 1);
        i += span + 1;
    }
    std::unordered_map<const Tensor*, int> level_of;
    std::vector<int> level(units.size(), 0);
    for (size_t u = 0; u < units.size(); ++u) {
        int lv = 0;
        for (Tensor* n : units[u]) {
            for (int s = 0; s <= kMaxSrc; ++s) {
                const Tensor* src = s < kMaxSrc ? n->src[s] : n->view_src;
                auto it = src ? level_of.find(src) : level_of.end();
                if (it != level_of.end()) lv = std::max(lv, it->second + 1);
            }
        }
        level[u] = lv;
        for (Tensor* n : units[u]) level_of[n] = lv;
    }
    std::vector<size_t> order(units.size());
    for (size_t u = 0; u < units.size(); ++u) order[u] = u;
    // Stable: units of one level keep their order (std::stable_sort's buffer API is deprecated in C++17).
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return level[a] != level[b] ? level[a] < level[b] : a < b;
    });
    std::vector<Tensor*> reordered;
    for (size_t u : order) reordered.insert(reordered.end(), units[u].begin(), units[u].end());
    graph.reorder(std::move(reordered));
}

bool MetalBackend::supports_family(int family) const { return device_->supports_family(family); }

void MetalBackend::capture_next_compute() {
    if (!device_->runtime().can_capture()) {
        fail<UnsupportedOpError>("MetalBackend::capture_next_compute", "GPU trace capture needs Metal on Apple; ",
                                 device_->name(), " cannot capture");
    }
    auto lock = lock_for("MetalBackend::capture_next_compute");
    capture_next_ = true;
}

}  // namespace mb::metal
