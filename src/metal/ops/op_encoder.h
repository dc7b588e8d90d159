// The one encoder of the Metal device's graphs: each op family's encode function selects a kernel,
// binds the args struct and each input and output, and dispatches through it. Because every binding
// says whether it is read or written, the encoder itself puts a memory barrier before a dispatch
// (concurrent passes) that touches memory an earlier dispatch since the last barrier wrote, or writes
// memory one read. Portable C++: the same code encodes for real Metal and for the simulated device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
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
    // `nodes`: the computing nodes of one graph, in order; encode(i) works on them.
    // `props`: the device's props (the runtime's, as the user may have narrowed them).
    // `error_record`: 16 zeroed bytes where kernels report bad inputs they find (e.g. a row index out of
    // range: int op, value, limit); the backend reads it at synchronize. May be null (then kernels that
    // report cannot be encoded).
    // `keep`: results that must be written even when fusion could skip them (the graph's outputs).
    OpEncoder(Runtime& runtime, const RuntimeProps& props, const std::vector<Tensor*>& nodes, bool fusion,
              bool concurrent, const RtBuffer* error_record = nullptr,
              const std::unordered_set<const Tensor*>* keep = nullptr);

    // Starts encoding into the compute pass of the next command buffer.
    void begin(ComputeEncoder& enc);
    // Encodes nodes[i] and the nodes its kernel fuses; returns how many it consumed (>= 1).
    size_t encode(size_t i);

    const RuntimeProps& props() const { return props_; }
    bool fusion() const { return fusion_; }
    // Whether nodes[m]'s result is read by nodes[m + 1] as src0 only, by no other node, and is not
    // a result anyone reads after compute: then a kernel computing nodes[m + 1] may skip writing it.
    bool feeds_only_next(size_t m) const;

    // Selects the kernel `name` with function constants (compiled once, then cached); bindings of
    // the previous kernel are forgotten.
    const Pipeline& use(const std::string& name, const std::vector<FunctionConstant>& constants = {});
    template <typename Args>
    void args(const Args& a) {
        enc_->set_args(&a, sizeof(a));
    }
    // Binds tensor t's data at buffer index `index` for the kernel to read (input) or write (output,
    // which it may also read); `extra` bytes past its end belong to it (scratch).
    void input(const Tensor& t, uint32_t index, size_t extra = 0) { bind(t, index, extra, false); }
    void output(const Tensor& t, uint32_t index, size_t extra = 0) { bind(t, index, extra, true); }
    // Binds the command buffer's error record at buffer index `index`. Kernels only ever set it to the
    // first bad input they meet, in any order, so it orders no dispatch.
    void error_record(uint32_t index);
    void threadgroup_memory(size_t size, uint32_t index) { enc_->set_threadgroup_memory((size + 15) / 16 * 16, index); }
    void dispatch(Size3 groups, Size3 threads);

private:
    struct Range {
        const RtBuffer* buffer;
        size_t begin, end;
        bool write;
    };
    void bind(const Tensor& t, uint32_t index, size_t extra, bool write);

    Runtime& runtime_;
    const RuntimeProps& props_;
    const std::vector<Tensor*>& nodes_;
    bool fusion_, concurrent_;
    const RtBuffer* error_record_;
    const std::unordered_set<const Tensor*>* keep_;
    // How many nodes read each tensor (directly, as a source, or through a view of it): counted once,
    // so that fusion asks in constant time whether a result has readers besides the next node.
    std::unordered_map<const Tensor*, uint32_t> readers_;
    ComputeEncoder* enc_ = nullptr;
    std::map<uint32_t, Range> bound_;      // the current kernel's bindings, by index
    std::vector<Range> since_barrier_;     // what dispatches since the last barrier touched
};

}  // namespace mb::metal
