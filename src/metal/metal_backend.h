// A Metal backend (ggml's Metal context): encodes graphs into command buffers on the device's queue.
// The first nodes go into one command buffer committed at once; the rest are split evenly over n_cb
// command buffers. The abort callback is asked before each commit; nothing half-committed remains.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/pending_access.h"
#include "metal/runtime.h"

namespace mb {
class Storage;
}

namespace mb::metal {

class MetalDevice;

class MetalBackend final : public Backend {
public:
    explicit MetalBackend(std::shared_ptr<MetalDevice> device);
    ~MetalBackend() override;

    std::string name() const override;
    std::shared_ptr<Device> device() const override;

    Status graph_compute_async(Graph& graph) override;
    Status graph_compute_timed(Graph& graph, DeviceTime& time) override;
    void synchronize() override;
    void set_tensor_async(Tensor& t, const void* src, size_t offset, size_t n) override;
    void get_tensor_async(const Tensor& t, void* dst, size_t offset, size_t n) override;
    bool queues_copies() const override { return true; }
    void graph_optimize(Graph& graph) override;
    bool supports_family(int family) const override;
    void capture_next_compute() override;

private:
    struct PendingRead {
        std::shared_ptr<RtBuffer> staging;
        void* dst;
        size_t n;
    };
    void commit(std::unique_ptr<CommandBuffer> cb);
    // The only way to take mutex_: refuses a call from this backend's own abort callback first
    // (that thread's compute holds mutex_, so waiting for it would never end).
    std::unique_lock<std::mutex> lock_for(const char* who);
    Status encode_graph(Graph& graph, bool timed);
    OptionValues runtime_options() const;  // the runtime's own switches, as set on this backend

    std::shared_ptr<MetalDevice> device_;
    std::mutex mutex_;
    std::vector<std::unique_ptr<CommandBuffer>> in_flight_;
    std::vector<std::shared_ptr<Storage>> held_;  // memory in use by in-flight work
    std::vector<std::shared_ptr<RtBuffer>> staging_;
    std::vector<PendingRead> reads_;
    std::vector<std::shared_ptr<RtBuffer>> error_records_;  // one per compute, read at synchronize
    bool capture_next_ = false;
    // The runtime's times of the timed command buffers waited for since graph_compute_timed began.
    DeviceTime timed_;
    std::vector<std::string> timed_clocks_;
    PendingMarks marks_{this};  // what queued work reads and writes, lifted at synchronize
};

}  // namespace mb::metal
