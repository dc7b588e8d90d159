#include "metal/checked_runtime.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"

namespace mb::metal {

namespace {

// Limits Metal documents but does not report.
constexpr uint32_t kMaxBufferSlots = 31;       // the buffer argument table
constexpr uint32_t kMaxThreadgroupSlots = 31;  // threadgroup memory arguments
constexpr size_t kMaxSetBytes = 4096;          // setBytes:length:atIndex:

// The narrowed limits (DispatchLimits), shared with the pipelines made before a change.
struct Limits {
    std::atomic<uint32_t> max_threads_per_threadgroup{0};
    std::atomic<size_t> max_threadgroup_memory{0};
};

// A runtime's pipeline whose thread maximum is capped by the narrowed limit.
class CheckedPipeline final : public Pipeline {
public:
    CheckedPipeline(std::shared_ptr<Pipeline> inner, std::shared_ptr<const Limits> limits)
        : inner_(std::move(inner)), limits_(std::move(limits)) {}
    const std::string& name() const override { return inner_->name(); }
    uint32_t max_threads_per_threadgroup() const override {
        const uint32_t own = inner_->max_threads_per_threadgroup();
        const uint32_t cap = limits_->max_threads_per_threadgroup.load(std::memory_order_relaxed);
        return cap ? std::min(own, cap) : own;
    }
    uint32_t thread_execution_width() const override { return inner_->thread_execution_width(); }
    const Pipeline& inner() const { return *inner_; }

private:
    std::shared_ptr<Pipeline> inner_;
    std::shared_ptr<const Limits> limits_;
};

class CheckedEncoder final : public ComputeEncoder {
public:
    CheckedEncoder(ComputeEncoder& inner, size_t max_threadgroup_memory, std::string& invalid)
        : inner_(inner), max_threadgroup_memory_(max_threadgroup_memory), invalid_(invalid) {}

    // Every pipeline comes from CheckedRuntime::pipeline; the runtime below gets its own.
    void set_pipeline(const Pipeline& p) override {
        pipeline_ = &static_cast<const CheckedPipeline&>(p);
        inner_.set_pipeline(pipeline_->inner());
    }
    void set_args(const void* data, size_t size) override {
        if (size > kMaxSetBytes)
            return reject("args struct of " + std::to_string(size) + " bytes exceeds setBytes' 4096");
        inner_.set_args(data, size);
    }
    void set_buffer(const RtBuffer& buf, size_t offset, uint32_t index) override {
        if (index >= kMaxBufferSlots)
            fail<InvalidArgumentError>("Metal::set_buffer", "buffer index ", index, " out of range");
        if (offset > buf.size()) {
            return reject("buffer " + std::to_string(index) + " offset " + std::to_string(offset) +
                          " is past its end (" + std::to_string(buf.size()) + " bytes)");
        }
        inner_.set_buffer(buf, offset, index);
    }
    void set_threadgroup_memory(size_t size, uint32_t index) override {
        if (index >= kMaxThreadgroupSlots) {
            fail<InvalidArgumentError>("Metal::set_threadgroup_memory", "index ", index, " out of range");
        }
        threadgroup_memory_[index] = size;
        inner_.set_threadgroup_memory(size, index);
    }
    void dispatch(Size3 groups, Size3 threads) override {
        if (!pipeline_) fail<InvalidArgumentError>("Metal::dispatch", "no pipeline set");
        const uint64_t n = uint64_t(threads.x) * threads.y * threads.z;
        const uint32_t most = pipeline_->max_threads_per_threadgroup();
        if (n == 0 || n > most) {
            return reject(pipeline_->name() + ": " + std::to_string(n) + " threads per threadgroup (" +
                          std::to_string(threads.x) + "x" + std::to_string(threads.y) + "x" +
                          std::to_string(threads.z) + "), at most " + std::to_string(most));
        }
        size_t shared = 0;
        for (size_t s : threadgroup_memory_) shared += s;
        if (shared > max_threadgroup_memory_) {
            return reject(pipeline_->name() + ": threadgroup memory of " + std::to_string(shared) +
                          " bytes exceeds " + std::to_string(max_threadgroup_memory_));
        }
        // Kernels take thread_position_in_grid as uint: past 2^32 threads in a dimension it wraps.
        constexpr uint64_t kMaxGridSpan = uint64_t(1) << 32;
        const uint32_t group_counts[3] = {groups.x, groups.y, groups.z};
        const uint32_t group_sizes[3] = {threads.x, threads.y, threads.z};
        for (int d = 0; d < 3; ++d) {
            const uint64_t span = uint64_t(group_counts[d]) * group_sizes[d];
            if (span > kMaxGridSpan) {
                return reject(pipeline_->name() + ": a grid of " + std::to_string(group_counts[d]) + " x " +
                              std::to_string(group_sizes[d]) + " = " + std::to_string(span) + " threads in dimension " +
                              "xyz"[d] + ", at most " + std::to_string(kMaxGridSpan) + " (32-bit thread positions)");
            }
        }
        // An empty grid is no work, and Metal's validation rejects it.
        if (groups.x == 0 || groups.y == 0 || groups.z == 0) return;
        inner_.dispatch(groups, threads);
    }
    void memory_barrier() override { inner_.memory_barrier(); }

private:
    void reject(const std::string& why) {
        if (invalid_.empty()) invalid_ = "[Metal::dispatch] " + why;
    }

    ComputeEncoder& inner_;
    size_t max_threadgroup_memory_;
    std::string& invalid_;
    const CheckedPipeline* pipeline_ = nullptr;
    std::array<size_t, kMaxThreadgroupSlots> threadgroup_memory_{};
};

class CheckedCommandBuffer final : public CommandBuffer {
public:
    CheckedCommandBuffer(std::unique_ptr<CommandBuffer> inner, size_t max_threadgroup_memory)
        : inner_(std::move(inner)), max_threadgroup_memory_(max_threadgroup_memory) {}

    ComputeEncoder& compute(bool concurrent) override {
        require_open("compute");
        encoder_ = std::make_unique<CheckedEncoder>(inner_->compute(concurrent), max_threadgroup_memory_, invalid_);
        return *encoder_;
    }
    void copy(const RtBuffer& src, size_t src_offset, const RtBuffer& dst, size_t dst_offset, size_t n) override {
        require_open("copy");
        if (src_offset > src.size() || n > src.size() - src_offset || dst_offset > dst.size() ||
            n > dst.size() - dst_offset) {
            return reject("copy of " + std::to_string(n) + " bytes is out of bounds");
        }
        if (n) inner_->copy(src, src_offset, dst, dst_offset, n);
    }
    void fill(const RtBuffer& dst, size_t offset, size_t n, uint8_t value) override {
        require_open("fill");
        if (offset > dst.size() || n > dst.size() - offset) {
            return reject("fill of " + std::to_string(n) + " bytes is out of bounds");
        }
        if (n) inner_->fill(dst, offset, n, value);
    }
    void commit() override {
        require_open("commit");
        committed_ = true;
        encoder_.reset();
        // A command buffer with a rejected command fails as a whole.
        if (invalid_.empty()) inner_->commit();
    }
    void wait() override {
        if (committed_ && invalid_.empty()) inner_->wait();
    }
    CommandStatus status() const override {
        if (committed_ && !invalid_.empty()) return CommandStatus::Error;
        return inner_->status();
    }
    std::string error() const override { return invalid_.empty() ? inner_->error() : invalid_; }
    void set_label(const std::string& label) override { inner_->set_label(label); }
    void time_dispatches() override { inner_->time_dispatches(); }
    // Dispatches of an empty grid were not passed on: the runtime's entries are those it ran.
    DeviceTiming timing() const override { return invalid_.empty() ? inner_->timing() : DeviceTiming{}; }

private:
    void require_open(const char* what) const {
        if (committed_) fail<InvalidArgumentError>("Metal::command_buffer", what, " after commit");
    }
    void reject(const std::string& why) {
        if (invalid_.empty()) invalid_ = "[Metal::blit] " + why;
    }

    std::unique_ptr<CommandBuffer> inner_;
    size_t max_threadgroup_memory_;
    std::unique_ptr<CheckedEncoder> encoder_;
    std::string invalid_;
    bool committed_ = false;
};

class CheckedRuntimeImpl final : public CheckedRuntime {
public:
    explicit CheckedRuntimeImpl(std::shared_ptr<Runtime> inner) : inner_(std::move(inner)) {}

    void set_limits(const DispatchLimits& limits) override {
        limits_->max_threads_per_threadgroup.store(limits.max_threads_per_threadgroup, std::memory_order_relaxed);
        limits_->max_threadgroup_memory.store(limits.max_threadgroup_memory, std::memory_order_relaxed);
    }

    const RuntimeProps& props() const override { return inner_->props(); }
    size_t allocated_size() const override { return inner_->allocated_size(); }
    std::shared_ptr<RtBuffer> alloc(size_t size, StorageMode mode) override { return inner_->alloc(size, mode); }
    std::shared_ptr<RtBuffer> map(void* ptr, size_t size) override { return inner_->map(ptr, size); }

    std::shared_ptr<Pipeline> pipeline(const std::string& name,
                                       const std::vector<FunctionConstant>& constants) override {
        std::string key = name;
        for (const auto& c : constants) {
            // A float is keyed by its bits: printed, distinct small values would share a pipeline.
            uint32_t fbits = 0;
            std::memcpy(&fbits, &c.f, sizeof(fbits));
            key += "|" + std::to_string(c.index) + ":" + std::to_string(static_cast<int>(c.kind)) + "=" +
                   std::to_string(c.i) + "/" + std::to_string(fbits);
        }
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = pipelines_.find(key);
        if (it != pipelines_.end()) return it->second;
        auto p = std::make_shared<CheckedPipeline>(inner_->pipeline(name, constants), limits_);
        pipelines_[key] = p;
        return p;
    }

    std::vector<std::string> shader_families() const override { return inner_->shader_families(); }
    void compile_families(const std::vector<std::string>& families,
                          const std::function<void(const FamilyResult&)>& done) override {
        inner_->compile_families(families, done);
    }
    // A rejected family's pipelines must not outlive it here: the cache starts again.
    bool reject_families(const std::vector<std::string>& families) override {
        if (!inner_->reject_families(families)) return false;
        std::lock_guard<std::mutex> lock(mutex_);
        pipelines_.clear();
        return true;
    }

    bool set_compile_cost(int64_t us_per_kernel) override { return inner_->set_compile_cost(us_per_kernel); }
    bool set_fault_kernels(const std::vector<std::string>& kernels) override {
        return inner_->set_fault_kernels(kernels);
    }
    bool set_profile(const std::string& profile) override { return inner_->set_profile(profile); }

    std::vector<RuntimeOption> options() const override { return inner_->options(); }
    std::unique_ptr<CommandBuffer> command_buffer(const OptionValues& options) override {
        size_t max_threadgroup_memory = props().max_threadgroup_memory;
        const size_t narrowed = limits_->max_threadgroup_memory.load(std::memory_order_relaxed);
        if (narrowed) max_threadgroup_memory = std::min(max_threadgroup_memory, narrowed);
        return std::make_unique<CheckedCommandBuffer>(inner_->command_buffer(options), max_threadgroup_memory);
    }
    void set_use_residency_sets(bool on) override { inner_->set_use_residency_sets(on); }
    bool can_capture() const override { return inner_->can_capture(); }
    void capture_begin() override { inner_->capture_begin(); }
    void capture_end() override { inner_->capture_end(); }

private:
    std::shared_ptr<Runtime> inner_;
    std::shared_ptr<Limits> limits_ = std::make_shared<Limits>();
    std::mutex mutex_;
    std::map<std::string, std::shared_ptr<Pipeline>> pipelines_;
};

}  // namespace

std::shared_ptr<CheckedRuntime> make_checked_runtime(std::shared_ptr<Runtime> runtime) {
    return std::make_shared<CheckedRuntimeImpl>(std::move(runtime));
}

}  // namespace mb::metal
