#include "cpu/cpu_backend.h"

#include <unordered_set>

#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/graph.h"
#include "cpu/cpu_device.h"
#include "cpu/cpu_ops.h"
#include "cpu/host_info.h"

namespace mb {

namespace {

// Resolves Tensor::data for every tensor of a graph for the duration of one compute, holding the
// storages so that a concurrent free() cannot pull memory away mid-compute.
class HostBinding {
public:
    HostBinding(const Graph& graph, const Device& device, const char* who) {
        for (Tensor* t : graph.leafs()) bind(*t, device, who);
        for (Tensor* node : graph.nodes()) {
            if (op_is_view(node->op)) continue;  // computes nothing; its consumers bind it as a source
            bind(*node, device, who);
            for (Tensor* s : node->src) {
                if (s) bind(*s, device, who);
            }
        }
    }
    ~HostBinding() {
        for (Tensor* t : bound_) t->data = nullptr;
    }
    HostBinding(const HostBinding&) = delete;
    HostBinding& operator=(const HostBinding&) = delete;

private:
    void bind(Tensor& t, const Device& device, const char* who) {
        if (!bound_set_.insert(&t).second) return;
        const auto& buf = t.data_buffer();
        if (!buf) {
            fail<InvalidArgumentError>(who, "tensor ", t.describe(), " (op ", op_name(t.op),
                                       ") is not allocated: place it with mb.alloc_ctx_tensors or a GraphAllocator");
        }
        if (!device.supports_buft(*buf->buffer_type())) {
            fail<InvalidArgumentError>(who, "tensor ", t.describe(), " lives in a '", buf->buffer_type()->name(),
                                       "' buffer, which device '", device.name(), "' cannot compute on");
        }
        auto storage = buf->storage(who);
        size_t off = t.data_offset(), n = t.nbytes();
        if (off > storage->size() || n > storage->size() - off) {
            fail<OutOfRangeError>(who, "tensor ", t.describe(), " at offset ", off, " (", n,
                                  " bytes) does not fit its buffer of ", storage->size(), " bytes");
        }
        t.data = static_cast<uint8_t*>(storage->host_ptr()) + off;
        bound_.push_back(&t);
        if (seen_.insert(storage.get()).second) storages_.push_back(std::move(storage));
    }

    std::vector<Tensor*> bound_;
    std::unordered_set<const Tensor*> bound_set_;
    std::unordered_set<const Storage*> seen_;
    std::vector<std::shared_ptr<Storage>> storages_;
};

// Threads worth waking for a node: below 32K elements an element-wise or row op takes a few
// microseconds on one thread, less than waking a sleeping worker costs. Matrix products and
// attention always use every thread.
int useful_threads(const Tensor& node, int nth) {
    if (node.op == Op::MUL_MAT || node.op == Op::FLASH_ATTN_EXT) return nth;
    return node.nelements() < (1 << 15) ? 1 : nth;
}

}  // namespace

CpuBackend::CpuBackend(std::shared_ptr<CpuDevice> device) : device_(std::move(device)) {
    declare_option("n_threads", host_core_count(), 1, 512);
}

std::shared_ptr<Device> CpuBackend::device() const { return device_; }

void CpuBackend::on_option_changed(const std::string& key) {
    if (key == "n_threads") {
        std::lock_guard<std::mutex> lock(mutex_);
        pool_.reset();  // recreated with the new size at the next compute
    }
}

Status CpuBackend::graph_compute_async(Graph& graph) {
    static const char* who = "CpuBackend::graph_compute";
    std::lock_guard<std::mutex> lock(mutex_);
    for (Tensor* node : graph.nodes()) {
        if (!cpu_supports_op(*node)) fail_cannot_run(who, "the CPU", *node);
    }
    HostBinding binding(graph, *device_, who);
    const int nth = n_threads();
    if (!pool_) pool_ = std::make_unique<ThreadPool>(nth);

    for (Tensor* node : graph.nodes()) {
        CpuKernel kernel = cpu_kernel(node->op);
        if (!kernel || node->is_empty()) continue;
        if (should_abort()) return Status::ABORTED;
        ComputeParams params;
        params.nth = useful_threads(*node, nth);
        params.pool = pool_.get();
        params.wsize = cpu_work_size(*node, params.nth);
        if (params.wsize + 64 > scratch_.size()) scratch_.resize(params.wsize + 64);
        // 64-byte aligned for vector loads.
        auto base = reinterpret_cast<uintptr_t>(scratch_.data());
        params.wdata = scratch_.data() + ((64 - base % 64) % 64);
        pool_->run(params.nth, [&](int ith) {
            ComputeParams mine = params;
            mine.ith = ith;
            kernel(mine, *node);
        });
    }
    return Status::SUCCESS;
}

}  // namespace mb
