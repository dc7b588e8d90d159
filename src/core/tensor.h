// A tensor: ggml's metadata (type, ne/nb, op, sources, op params) plus where its data lives.
// ne[0] is the innermost, fastest dimension; nb[i] is the byte stride of dimension i. Python shows
// shapes in numpy order: the first n_dims entries of ne, reversed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "core/op.h"
#include "core/types.h"

namespace mb {

class Buffer;
class Context;

constexpr int kMaxDims = 4;
constexpr int kMaxSrc = 8;
constexpr int kMaxOpParams = 16;

enum TensorFlags : uint32_t {
    kTensorInput = 1u << 0,   // set by the user before compute; allocators never reuse its memory
    kTensorOutput = 1u << 1,  // read by the user after compute; allocators never reuse its memory
    // A Scheduler's intermediate: placed in the scheduler's scratch memory for each compute and
    // unplaced when it ends (alloc_ctx_tensors leaves it to the scheduler).
    kTensorScratch = 1u << 2,
};

struct Tensor {
    Type type = Type::F32;
    int n_dims = 1;  // 1..4: how many dims the user gave (Python shape length)
    int64_t ne[kMaxDims] = {1, 1, 1, 1};
    size_t nb[kMaxDims] = {0, 0, 0, 0};

    Op op = Op::NONE;
    int32_t op_params[kMaxOpParams] = {};
    Tensor* src[kMaxSrc] = {};

    // Views alias the memory of view_src (always a non-view root) at byte offset view_offs.
    Tensor* view_src = nullptr;
    size_t view_offs = 0;

    // Set on roots when allocated; views resolve through view_src (see storage_of / data_offset).
    std::shared_ptr<Buffer> buffer;
    size_t offset = 0;

    // Host address of the data while at least one CPU compute uses the tensor (so kernels need not
    // look up buffers per access); nullptr when none does. Set and cleared only by cpu/host_binding,
    // under its lock, and never changed while a compute uses it, so kernels read it freely.
    void* data = nullptr;
    // Guarded by that lock: computes that resolved `data`, and (on roots) computes that read or
    // write the memory; several may read, one may write, and never both at once.
    int32_t host_binds = 0;
    int32_t host_readers = 0;
    int32_t host_writers = 0;
    // The thread whose Scheduler compute is placing this (unplaced) node, or nullptr; read and
    // written only under the scheduler's claims lock (core/scheduler.cpp).
    const void* sched_claim = nullptr;

    std::string name;
    Context* ctx = nullptr;
    uint32_t flags = 0;

    int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
    // Bytes spanned by the data, ggml's formula (holds for views with any strides).
    size_t nbytes() const;
    bool is_contiguous() const;   // rows packed in order, no gaps
    bool rows_contiguous() const; // each row packed (nb[0] == element size), rows anywhere
    bool is_empty() const { return nelements() == 0; }
    bool is_view() const { return view_src != nullptr; }
    const Tensor& root() const { return view_src ? *view_src : *this; }
    Tensor& root() { return view_src ? *view_src : *this; }

    bool is_allocated() const { return root().buffer != nullptr; }
    const std::shared_ptr<Buffer>& data_buffer() const { return root().buffer; }
    size_t data_offset() const { return root().offset + view_offs; }

    float param_f(int i) const {
        float v;
        std::memcpy(&v, &op_params[i], sizeof(v));
        return v;
    }
    void set_param_f(int i, float v) { std::memcpy(&op_params[i], &v, sizeof(v)); }

    std::string shape_str() const;  // numpy order, e.g. "(3, 4)"
    std::string describe() const;   // "'name' f32 (3, 4)"
};

// Contiguous strides for `ne` of type `t` (nb[0] = element/block size).
void contiguous_strides(Type t, const int64_t ne[kMaxDims], size_t nb[kMaxDims]);

// Why an unallocated tensor has no memory, for error messages: "is not allocated", with what to do
// when it is a Scheduler's intermediate.
std::string unallocated(const Tensor& t);

// Host address of the tensor's first byte. Throws InvalidArgumentError when the tensor is not
// allocated, its buffer was freed, or the host cannot address it.
void* tensor_host_data(const Tensor& t, const char* who);

}  // namespace mb
