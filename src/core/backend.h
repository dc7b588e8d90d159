// A Backend (ggml_backend): a stream of work on one device. Options are named integers that the
// user can read and set from Python; every environment-style switch of ggml is one of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mb {

class Device;
class Graph;
struct Tensor;

enum class Status : int32_t { SUCCESS = 0, ABORTED = 1, FAILED = -1, ALLOC_FAILED = -2 };

// Asked between units of work (nodes on the CPU, command buffers on Metal); true stops the compute.
using AbortCallback = std::function<bool()>;

// The device's own time of one compute (per-node profiles).
struct DeviceTime {
    std::string clock;  // which clock, in words; empty: the backend has none
    double us = 0;
};

class Backend {
public:
    virtual ~Backend() = default;

    virtual std::string name() const = 0;
    virtual std::shared_ptr<Device> device() const = 0;
    // Waits for all queued work; raises DeviceError for work that failed.
    virtual void synchronize() {}

    // Computes the graph and waits. Raises InvalidArgumentError for unallocated tensors or tensors in
    // buffers this device cannot use, UnsupportedOpError for a node it cannot run.
    Status graph_compute(Graph& graph);
    // Queues the graph; synchronize() waits. Backends without async compute run it here.
    virtual Status graph_compute_async(Graph& graph) = 0;
    // graph_compute that also measures the device's own time of the work, where the backend has a
    // device clock (Metal: the GPU's; MetalSim: the executor's). The default has none and leaves
    // `time` empty, so profiles fall back to the host's wall time.
    virtual Status graph_compute_timed(Graph& graph, DeviceTime& time);
    // Copies into/out of a tensor's bytes [offset, offset + n), ordered after queued work; complete
    // at synchronize(). The defaults are synchronous.
    virtual void set_tensor_async(Tensor& t, const void* src, size_t offset, size_t n);
    virtual void get_tensor_async(const Tensor& t, void* dst, size_t offset, size_t n);
    // Reorders independent nodes for concurrency (Metal); a no-op elsewhere.
    virtual void graph_optimize(Graph& graph) {}
    // Metal only: GPU family queries and trace capture; elsewhere UnsupportedOpError.
    virtual bool supports_family(int family) const;
    virtual void capture_next_compute();

    void set_abort_callback(AbortCallback cb);

    // Options may be read and set from any thread, also while a compute runs (it reads them when it
    // starts) and from the backend's own abort callback.
    std::map<std::string, int64_t> options() const;  // a copy
    bool has_option(const std::string& key) const;
    int64_t option(const std::string& key) const;
    // Throws InvalidArgumentError for an unknown key or a value the backend refuses.
    void set_option(const std::string& key, int64_t value);
    // Applies "key=value,key=value" (init_backend's params string).
    void apply_params(const std::string& params);

    // Whether set_tensor_async/get_tensor_async return before the copy is done (their memory must
    // then stay valid until synchronize()).
    virtual bool queues_copies() const { return false; }
    // Keeps `owner` (what a queued copy reads or writes, e.g. a Python array) alive; take_held()
    // hands back everything held so far, to be dropped once a synchronize() that follows it returns.
    void hold(std::shared_ptr<void> owner);
    std::vector<std::shared_ptr<void>> take_held();

    // Throws DeviceError naming the backend and `who` when called from inside this backend's own
    // abort callback on this thread: the compute that asked is still running and holds the
    // backend, so re-entering it (compute, synchronize, queued copies) cannot work.
    void reject_reentry(const char* who) const;

protected:
    // Registers an option with its default; subclasses do this in their constructor.
    void declare_option(const std::string& key, int64_t default_value, int64_t min_value, int64_t max_value);
    // Called after an option changed, so the backend can react (e.g. resize its thread pool).
    virtual void on_option_changed(const std::string& key) {}
    // Asks the abort callback, marking this thread as inside it (see reject_reentry).
    bool should_abort() const;

private:
    mutable std::mutex options_mutex_;
    std::map<std::string, int64_t> options_;
    std::map<std::string, std::pair<int64_t, int64_t>> limits_;
    mutable std::mutex callback_mutex_;
    std::shared_ptr<const AbortCallback> abort_callback_;
    std::mutex held_mutex_;
    std::vector<std::shared_ptr<void>> held_;
};

}  // namespace mb
