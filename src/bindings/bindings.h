// The pybind11 module `metal_backend._core` is assembled from one file per topic; module.cpp calls
// each init_<topic> in dependency order.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>

namespace mb::bindings {

namespace py = pybind11;

void init_errors(py::module_& m);
void init_types(py::module_& m);
void init_device(py::module_& m);
void init_buffer(py::module_& m);
void init_backend(py::module_& m);
void init_tensor(py::module_& m);
void init_ops(py::module_& m);
void init_graph(py::module_& m);
void init_host_view(py::module_& m);  // host_view.cpp
void init_dlpack(py::module_& m);     // dlpack.cpp
void init_profile(py::module_& m);    // profile.cpp
void init_log_softmax_rows(py::module_& m);  // log_softmax_rows.cpp

// A Python int as a byte count or offset: TypeError if not an int, InvalidArgumentError if negative,
// OutOfRangeError if it does not fit (OutOfMemoryError instead when `too_big_is_oom`).
size_t to_size(py::handle value, const char* who, const char* what, bool too_big_is_oom = false);

// Raises InvalidArgumentError naming the dtype when `obj` (a buffer-protocol object whose format is
// `format`, nullptr for raw bytes) holds Python object pointers (numpy dtype=object, or a structured
// dtype with an object field): such bytes must never be copied into or overwritten from device memory.
void require_plain_data(py::handle obj, const char* format, const char* who);
// A Python int (or an object with __index__, not a bool) as int64: TypeError otherwise, OutOfRangeError
// naming the value when it does not fit.
int64_t to_int64(py::handle value, const char* who, const char* what);

}  // namespace mb::bindings
