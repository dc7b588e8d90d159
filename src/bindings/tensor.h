// Helpers shared by the tensor, ops and graph bindings.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bindings/bindings.h"
#include "core/context.h"
#include "core/tensor.h"

namespace mb {
class BufferType;
}

namespace mb::bindings {

// Python handles to tensors share ownership of the tensor's Context, so a handle never dangles.
using TensorHandle = std::shared_ptr<Tensor>;
TensorHandle handle(Tensor* t);
inline TensorHandle handle_or_none(Tensor* t) { return t ? handle(t) : TensorHandle(); }

// numpy-order shape <-> ggml ne (n_dims = len(shape)); raises for more than 4 dims or negatives.
void shape_to_ne(py::handle shape, const char* who, int64_t ne[kMaxDims], int* n_dims);
py::tuple ne_to_shape(const Tensor& t);

// A Backend, Device or BufferType given where memory is to be placed -> the buffer type to use.
std::shared_ptr<BufferType> buffer_type_of(py::handle target, const char* who);
// `data` as the tensor's stored bytes: raw bytes-like of exactly nbytes, or numbers converted.
std::vector<uint8_t> tensor_bytes_from(const Tensor& t, py::handle data, const char* who);

}  // namespace mb::bindings
