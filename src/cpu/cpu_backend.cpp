#include "cpu/cpu_backend.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/errors.h"
#include "core/graph.h"
#include "cpu/cpu_device.h"
#include "cpu/cpu_ops.h"
#include "cpu/host_binding.h"
#include "cpu/host_info.h"

namespace mb {

namespace {

// Keeps the pool's workers spinning for the length of one graph compute, however it ends.
class Burst {
public:
    explicit Burst(ThreadPool& pool) : pool_(pool) { pool_.begin_burst(); }
    ~Burst() { pool_.end_burst(); }
    Burst(const Burst&) = delete;
    Burst& operator=(const Burst&) = delete;

private:
    ThreadPool& pool_;
};

}  // namespace

CpuBackend::CpuBackend(std::shared_ptr<CpuDevice> device) : device_(std::move(device)) {
    declare_option("n_threads", host_core_count(), 1, 512);
    // Microseconds the idle workers spin after a compute before they sleep (up to 1 s), OpenMP's
    // wait policy as a number: a loop of short computes separated by host work finds them awake if
    // it comes back within this time.
    declare_option("spin_us", ThreadPool::kDefaultSpinAfterBurstUs, 0, 1000000);
}

std::shared_ptr<Device> CpuBackend::device() const { return device_; }

Status CpuBackend::graph_compute_async(Graph& graph) {
    static const char* who = "CpuBackend::graph_compute";
    reject_reentry(who);
    // A copy: the graph may be reordered (graph_optimize on another backend) while this one runs.
    const std::vector<Tensor*> nodes = graph.nodes();
    for (Tensor* node : nodes) {
        if (!cpu_supports_op(*node)) {
            fail_cannot_run(who, "the CPU", *node);
        }
    }
    // Bound before taking the backend: waiting here for another backend's compute must not keep
    // this backend from a thread that would finish that compute.
    HostBinding binding(graph, *device_, who);
    std::lock_guard<std::mutex> lock(mutex_);
    // n_threads is read once per compute; a change (from any thread, or the abort callback) takes
    // effect at the next one.
    const int nth = n_threads();
    if (!pool_ || pool_->size() != nth) pool_ = std::make_unique<ThreadPool>(nth);
    pool_->set_spin_after_burst_us(option("spin_us"));
    Burst burst(*pool_);  // wakes the workers now; they spin until the compute ends

    for (Tensor* node : nodes) {
        const CpuFamily* family = cpu_family(node->op);
        if (!family || node->is_empty()) continue;
        if (should_abort()) return Status::ABORTED;
        ComputeParams params;
        params.nth = cpu_threads(*node, nth);
        params.pool = pool_.get();
        params.wsize = family->work_size ? family->work_size(*node, params.nth) : 0;
        params.wdata = scratch_.reserve(params.wsize);
        if (family->prepare) family->prepare(params, *node);
        pool_->run(params.nth, [&](int ith) {
            ComputeParams mine = params;
            mine.ith = ith;
            family->compute(mine, *node);
        });
        if (!scratch_.guard_intact()) {
            fail<Error>(who, "the CPU kernel of ", op_name(node->op), " for ", node->describe(),
                        " wrote past the ", params.wsize, " scratch bytes its work_size declared for ",
                        params.nth, " threads: a bug in that kernel, please report it");
        }
    }
    return Status::SUCCESS;
}

}  // namespace mb
