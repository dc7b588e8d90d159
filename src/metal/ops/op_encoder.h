// What an op's encode function works with: the compute encoder of the current command buffer, the
// device's props and pipelines, and where each tensor lives on the GPU. Portable C++: the same code
// encodes for real Metal and for the simulated device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/tensor.h"
#include "metal/runtime.h"

namespace mb::metal {

// Where a tensor's first byte is: a GPU buffer and an offset into it.
struct DeviceRef {
    const RtBuffer* buffer = nullptr;
    size_t offset = 0;
};

// Resolves a tensor to its GPU buffer (see metal_storage.h).
DeviceRef device_ref(const Tensor& t);

class OpEncoder {
public:
    // `props`: the device's props (the runtime's, as the user may have narrowed them).
    // `error_record`: 16 zeroed bytes where kernels report bad inputs they find (e.g. a row index out of
    // range: int op, value, limit); the backend reads it at synchronize. May be null (then kernels that
    // report cannot be encoded).
    // `keep`: results that must be written even when fusion could skip them (the graph's outputs).
    OpEncoder(Runtime& runtime, const RuntimeProps& props, ComputeEncoder& enc, bool fusion,
              const RtBuffer* error_record = nullptr, const std::unordered_set<const Tensor*>* keep = nullptr)
        : runtime_(runtime), props_(props), enc_(enc), fusion_(fusion), error_record_(error_record), keep_(keep) {}

    const RuntimeProps& props() const { return props_; }
    bool fusion() const { return fusion_; }
    bool must_keep(const Tensor& t) const { return keep_ && keep_->count(&t) > 0; }
    ComputeEncoder& enc() { return enc_; }

    // Selects the kernel `name` with function constants (compiled once, then cached).
    const Pipeline& use(const std::string& name, const std::vector<FunctionConstant>& constants = {});
    template <typename Args>
    void args(const Args& a) {
        enc_.set_args(&a, sizeof(a));
    }
    // Binds tensor t's data at buffer index `index`; `extra` bytes past its start (scratch).
    void tensor(const Tensor& t, uint32_t index, size_t extra = 0);
    // Binds the command buffer's error record at buffer index `index`.
    void error_record(uint32_t index);
    void threadgroup_memory(size_t size, uint32_t index) { enc_.set_threadgroup_memory((size + 15) / 16 * 16, index); }
    void dispatch(Size3 groups, Size3 threads) { enc_.dispatch(groups, threads); }

private:
    Runtime& runtime_;
    const RuntimeProps& props_;
    ComputeEncoder& enc_;
    bool fusion_;
    const RtBuffer* error_record_;
    const std::unordered_set<const Tensor*>* keep_;
};

}  // namespace mb::metal
