#include "cpu/host_binding.h"

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <mutex>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/op.h"
#include "core/storage.h"

namespace mb {

namespace {

// One lock for all bookkeeping: it is held for a few microseconds per compute (claiming and
// releasing), never while kernels run. Never destroyed: at interpreter exit a daemon thread may be
// parked inside a compute (bindings/gil.h) while another waits here for its tensors, and
// destroying a condition variable that has a waiter blocks the exiting thread forever.
std::mutex& g_lock = *new std::mutex;
std::condition_variable& g_released = *new std::condition_variable;
// Bindings this thread holds (more than one only from inside an abort callback).
thread_local int t_held = 0;

}  // namespace

HostBinding::HostBinding(const Graph& graph, const Device& device, const char* who) {
    for (Tensor* node : graph.nodes()) {
        if (op_is_view(node->op)) continue;  // computes nothing; its consumers bind it as a source
        add(*node, true, device, who);
    }
    for (Tensor* t : graph.leafs()) add(*t, false, device, who);
    for (Tensor* node : graph.nodes()) {
        if (op_is_view(node->op)) continue;
        for (Tensor* s : node->src) {
            if (s) add(*s, false, device, who);
        }
    }
    // Each root once, as written if any node writes it (sorted vectors: cheaper than a hash set for
    // the few hundred roots of a graph).
    std::sort(written_roots_.begin(), written_roots_.end(), std::less<Tensor*>());
    written_roots_.erase(std::unique(written_roots_.begin(), written_roots_.end()), written_roots_.end());
    std::sort(read_roots_.begin(), read_roots_.end(), std::less<Tensor*>());
    read_roots_.erase(std::unique(read_roots_.begin(), read_roots_.end()), read_roots_.end());
    std::vector<Tensor*> reads;
    reads.reserve(read_roots_.size());
    std::set_difference(read_roots_.begin(), read_roots_.end(), written_roots_.begin(), written_roots_.end(),
                        std::back_inserter(reads), std::less<Tensor*>());
    read_roots_ = std::move(reads);

    std::unique_lock<std::mutex> lock(g_lock);
    while (const Tensor* busy = conflict()) {
        if (t_held > 0) {
            fail<DeviceError>(who, "tensor ", busy->describe(),
                              " is in use by another compute, and this thread is itself inside a compute (an abort "
                              "callback); waiting for it could wait for this thread's own compute");
        }
        g_released.wait(lock);
    }
    for (Tensor* r : written_roots_) ++r->host_writers;
    for (Tensor* r : read_roots_) ++r->host_readers;
    for (const Bound& b : bound_) {
        if (b.tensor->host_binds++ == 0) b.tensor->data = b.data;
    }
    ++t_held;
}

HostBinding::~HostBinding() {
    {
        std::lock_guard<std::mutex> lock(g_lock);
        for (Tensor* r : written_roots_) --r->host_writers;
        for (Tensor* r : read_roots_) --r->host_readers;
        for (const Bound& b : bound_) {
            if (--b.tensor->host_binds == 0) b.tensor->data = nullptr;
        }
        --t_held;
    }
    g_released.notify_all();
}

const Tensor* HostBinding::conflict() const {
    for (Tensor* r : written_roots_) {
        if (r->host_writers > 0 || r->host_readers > 0) return r;
    }
    for (Tensor* r : read_roots_) {
        if (r->host_writers > 0) return r;
    }
    // Moved to other memory since a running compute resolved it (re-placed by an allocator).
    for (const Bound& b : bound_) {
        if (b.tensor->host_binds > 0 && b.tensor->data != b.data) return b.tensor;
    }
    return nullptr;
}

void HostBinding::add(Tensor& t, bool written, const Device& device, const char* who) {
    if (written) written_roots_.push_back(&t.root());
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
    bound_.push_back({&t, static_cast<uint8_t*>(storage->host_ptr()) + off});
    if (!written) read_roots_.push_back(&t.root());
    if (seen_storages_.insert(storage.get()).second) storages_.push_back(std::move(storage));
}

}  // namespace mb
