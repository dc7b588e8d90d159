// Buffer types and buffers, with zero-copy host views (numpy arrays and memoryviews).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings/gil.h"
#include "bindings/bindings.h"
#include "bindings/host_view.h"
#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/device.h"
#include "core/errors.h"

namespace mb::bindings {

namespace {

// A uint8 numpy array over the buffer's memory that keeps the storage alive by itself, so it stays
// valid after the Buffer object is dropped or freed.
py::array numpy_view(const Buffer& buf) {
    void* ptr = buf.host_ptr("Buffer.numpy");
    check_host_read(buf, "Buffer.numpy", "buffer '" + buf.name() + "'", 0, buf.size());
    auto* hold = new std::shared_ptr<Storage>(buf.storage("Buffer.numpy"));
    py::capsule base(hold, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
    py::array view(py::dtype::of<uint8_t>(), {static_cast<py::ssize_t>(buf.size())}, {1}, ptr, base);
    if (pending_read(buf, 0, buf.size())) view.attr("flags").attr("writeable") = false;
    return view;
}

py::buffer_info as_bytes(py::buffer data, const char* who) {
    py::buffer_info info = data.request();
    require_plain_data(data, info.format.c_str(), who);
    if (!PyBuffer_IsContiguous(reinterpret_cast<Py_buffer*>(info.view()), 'C')) {
        fail<InvalidArgumentError>(who, "data must be C-contiguous");
    }
    return info;
}

size_t range_length(const Buffer& buf, size_t offset, py::object size, const char* who) {
    if (!size.is_none()) return to_size(size, who, "size");
    if (offset > buf.size()) {
        fail<OutOfRangeError>(who, "offset ", offset, " is past the end of buffer '", buf.name(), "' of ", buf.size(),
                              " bytes");
    }
    return buf.size() - offset;
}

uint8_t byte_value(py::object value, const char* who) {
    size_t v = to_size(value, who, "value");
    if (v > 255) fail<InvalidArgumentError>(who, "value must be a byte in [0, 255], got ", v);
    return static_cast<uint8_t>(v);
}

// pybind11 reports a failing buffer callback as BufferError("Error getting buffer") and keeps the
// real reason (e.g. "buffer ... was freed") only as __cause__, so str(error) told the user nothing.
// This slot wraps pybind11's and lifts the reason into the BufferError's own message.
getbufferproc g_pybind_getbuffer = nullptr;

extern "C" int buffer_getbuffer_with_reason(PyObject* obj, Py_buffer* view, int flags) {
    if (g_pybind_getbuffer(obj, view, flags) == 0) return 0;
    PyObject* type = nullptr;
    PyObject* value = nullptr;
    PyObject* tb = nullptr;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject* cause = value ? PyException_GetCause(value) : nullptr;
    PyObject* reason = cause ? PyObject_Str(cause) : nullptr;
    if (!reason) {
        PyErr_Clear();
        Py_XDECREF(cause);
        PyErr_Restore(type, value, tb);
        return -1;
    }
    PyObject* lifted = PyObject_CallFunctionObjArgs(PyExc_BufferError, reason, nullptr);
    Py_DECREF(reason);
    if (!lifted) {
        Py_XDECREF(cause);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    PyException_SetCause(lifted, cause);  // steals cause
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_SetObject(PyExc_BufferError, lifted);
    Py_DECREF(lifted);
    return -1;
}

}  // namespace

void init_buffer(py::module_& m) {
    py::class_<BufferType, std::shared_ptr<BufferType>>(m, "BufferType",
                                                        "A kind of device memory (ggml_backend_buffer_type).")
        .def_property_readonly("name", &BufferType::name)
        .def_property_readonly("alignment", &BufferType::alignment, "Alignment of tensor data, in bytes.")
        .def_property_readonly("max_size", &BufferType::max_size, "Largest single allocation, in bytes.")
        .def_property_readonly("is_host", &BufferType::is_host, "Whether the host can address the memory.")
        .def_property_readonly("device", [](const BufferType& b) { return b.device().shared_from_this(); })
        .def("alloc", [](BufferType& b, py::object nbytes) {
            size_t n = to_size(nbytes, "BufferType::alloc", "nbytes", /*too_big_is_oom=*/true);
            ReleasedGil nogil;
            return b.alloc(n);
        }, py::arg("nbytes"), "Allocates a Buffer of `nbytes` bytes (0 is legal). MemoryError when it cannot.")
        .def("__repr__", [](const BufferType& b) { return "<BufferType " + b.name() + ">"; });

    py::class_<Buffer, std::shared_ptr<Buffer>>(m, "Buffer", py::buffer_protocol(),
                                                "A range of device memory. Frees on free(), on leaving a\n"
                                                "`with` block, or when the last reference goes.")
        .def_property_readonly("size", &Buffer::size, "Size in bytes.")
        .def_property_readonly("name", &Buffer::name)
        .def_property_readonly("buffer_type", &Buffer::buffer_type)
        .def_property_readonly("is_host", &Buffer::is_host)
        .def_property_readonly("is_freed", &Buffer::is_freed)
        .def("set", [](Buffer& b, py::buffer data, py::object offset) {
            auto info = as_bytes(data, "Buffer::set");
            size_t off = to_size(offset, "Buffer::set", "offset");
            size_t n = static_cast<size_t>(info.size * info.itemsize);
            check_host_write(b, "Buffer::set", "buffer '" + b.name() + "'", off, n);
            ReleasedGil nogil;
            b.set(info.ptr, off, n);
        }, py::arg("data"), py::arg("offset") = 0, "Copies the bytes of `data` into the buffer at `offset`.")
        .def("get", [](const Buffer& b, py::object offset, py::object size) {
            size_t off = to_size(offset, "Buffer::get", "offset");
            size_t n = range_length(b, off, size, "Buffer::get");
            b.check_range("Buffer::get", off, n);
            check_host_read(b, "Buffer::get", "buffer '" + b.name() + "'", off, n);
            py::bytes out(nullptr, n);
            char* dst = PyBytes_AsString(out.ptr());
            ReleasedGil nogil;
            b.get(dst, off, n);
            return out;
        }, py::arg("offset") = 0, py::arg("size") = py::none(),
           "Copies `size` bytes from `offset` (default: to the end).")
        .def("memset", [](Buffer& b, py::object value, py::object offset, py::object size) {
            uint8_t v = byte_value(value, "Buffer::memset");
            size_t off = to_size(offset, "Buffer::memset", "offset");
            size_t n = range_length(b, off, size, "Buffer::memset");
            check_host_write(b, "Buffer::memset", "buffer '" + b.name() + "'", off, n);
            ReleasedGil nogil;
            b.memset(v, off, n);
        }, py::arg("value"), py::arg("offset") = 0, py::arg("size") = py::none(), "Fills a byte range with `value`.")
        .def("clear", [](Buffer& b, py::object value) {
            uint8_t v = byte_value(value, "Buffer::clear");
            check_host_write(b, "Buffer::clear", "buffer '" + b.name() + "'", 0, b.size());
            ReleasedGil nogil;
            b.clear(v);
        }, py::arg("value") = 0, "Fills the whole buffer with the byte `value`.")
        .def("free", &Buffer::free, "Releases the buffer. Freeing twice is harmless; any other use afterwards\n"
                                    "raises. Host views still held keep their memory until they go.")
        .def("numpy", &numpy_view, "A zero-copy uint8 numpy view of the memory (host-visible buffers only).\n"
                                   "The view keeps the memory alive by itself. Raises PendingWorkError while queued\n"
                                   "async work writes the buffer; read-only while queued work reads it.")
        .def_buffer([](Buffer& b) {
            // memoryview(buf) cannot tell us when it is released, so the buffer pins its memory for
            // as long as the Buffer object lives: free() then only marks it freed.
            void* ptr = b.host_ptr("Buffer.__buffer__");
            check_host_read(b, "Buffer.__buffer__", "buffer '" + b.name() + "'", 0, b.size());
            b.pin();
            return py::buffer_info(ptr, 1, py::format_descriptor<uint8_t>::format(), 1,
                                   {static_cast<py::ssize_t>(b.size())}, {1}, pending_read(b, 0, b.size()));
        })
        .def("__enter__", [](std::shared_ptr<Buffer> b) { return b; })
        .def("__exit__", [](Buffer& b, py::args) { b.free(); })
        .def("__len__", &Buffer::size)
        .def("__repr__", [](const Buffer& b) {
            return "<Buffer " + b.name() + ": " + std::to_string(b.size()) + " bytes" +
                   (b.is_freed() ? ", freed>" : ">");
        });
    auto* buffer_type = reinterpret_cast<PyTypeObject*>(m.attr("Buffer").ptr());
    g_pybind_getbuffer = buffer_type->tp_as_buffer->bf_getbuffer;
    buffer_type->tp_as_buffer->bf_getbuffer = buffer_getbuffer_with_reason;
}

}  // namespace mb::bindings
