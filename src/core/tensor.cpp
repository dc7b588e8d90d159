#include "core/tensor.h"

#include <cstddef>
#include <cstdint>
#include <sstream>

#include "core/buffer.h"
#include "core/errors.h"

namespace mb {

size_t Tensor::nbytes() const {
    for (int i = 0; i < kMaxDims; ++i) {
        if (ne[i] <= 0) return 0;
    }
    const auto& tr = type_traits(type);
    size_t bytes = 0;
    if (tr.block_size == 1) {
        bytes = tr.type_size;
        for (int i = 0; i < kMaxDims; ++i) bytes += static_cast<size_t>(ne[i] - 1) * nb[i];
    } else {
        bytes = static_cast<size_t>(ne[0]) * nb[0] / static_cast<size_t>(tr.block_size);
        for (int i = 1; i < kMaxDims; ++i) bytes += static_cast<size_t>(ne[i] - 1) * nb[i];
    }
    return bytes;
}

bool Tensor::rows_contiguous() const {
    const auto& tr = type_traits(type);
    return nb[0] == tr.type_size;
}

bool Tensor::is_contiguous() const {
    size_t expect[kMaxDims];
    contiguous_strides(type, ne, expect);
    for (int i = 0; i < kMaxDims; ++i) {
        if (ne[i] != 1 && nb[i] != expect[i]) return false;
    }
    return true;
}

std::string Tensor::shape_str() const {
    std::ostringstream os;
    os << '(';
    for (int i = n_dims - 1; i >= 0; --i) {
        os << ne[i];
        if (i > 0) os << ", ";
    }
    if (n_dims == 1) os << ',';
    os << ')';
    return os.str();
}

std::string Tensor::describe() const {
    std::ostringstream os;
    if (!name.empty()) os << '\'' << name << "' ";
    os << type_traits(type).name << ' ' << shape_str();
    return os.str();
}

void contiguous_strides(Type t, const int64_t ne[kMaxDims], size_t nb[kMaxDims]) {
    const auto& tr = type_traits(t);
    nb[0] = tr.type_size;
    nb[1] = nb[0] * static_cast<size_t>(ne[0] / tr.block_size);
    for (int i = 2; i < kMaxDims; ++i) nb[i] = nb[i - 1] * static_cast<size_t>(ne[i - 1]);
}

std::string unallocated(const Tensor& t) {
    if (!(t.root().flags & kTensorScratch)) return "is not allocated";
    return "is not allocated: it is an intermediate of a Scheduler compute, whose memory went back to the "
           "scheduler when that compute ended; to read it, make it a graph output (mb.Graph(..., t)) or set "
           "is_output before computing; for a backend's own compute, place it with a GraphAllocator";
}

void* tensor_host_data(const Tensor& t, const char* who) {
    const auto& buf = t.data_buffer();
    if (!buf) fail<InvalidArgumentError>(who, "tensor ", t.describe(), " ", unallocated(t));
    return static_cast<uint8_t*>(buf->host_ptr(who)) + t.data_offset();
}

}  // namespace mb
