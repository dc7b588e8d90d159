// Contexts and tensors: metadata, views, and data transfer between numpy and tensor memory.
#include "bindings/gil.h"
#include "bindings/tensor.h"
#include "bindings/host_view.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/allocation.h"
#include "core/backend.h"
#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/ops.h"

namespace mb::bindings {

TensorHandle handle(Tensor* t) { return TensorHandle(t->ctx->shared_from_this(), t); }

void shape_to_ne(py::handle shape, const char* who, int64_t ne[kMaxDims], int* n_dims) {
    std::vector<int64_t> dims;
    if (PyLong_Check(shape.ptr()) || (!PyBool_Check(shape.ptr()) && PyIndex_Check(shape.ptr()))) {
        dims.push_back(to_int64(shape, who, "shape entry"));
    } else {
        if (!PyObject_HasAttrString(shape.ptr(), "__iter__") && !PySequence_Check(shape.ptr())) {
            throw py::type_error(std::string("[") + who + "] shape must be an int or a sequence of ints, got " +
                                 std::string(py::repr(shape)));
        }
        for (py::handle d : py::iter(shape)) {
            if (PyBool_Check(d.ptr()) || (!PyLong_Check(d.ptr()) && !PyIndex_Check(d.ptr()))) {
                throw py::type_error(std::string("[") + who + "] shape entries must be ints, got " +
                                     std::string(py::repr(shape)));
            }
            dims.push_back(to_int64(d, who, "shape entry"));
        }
    }
    if (dims.empty() || dims.size() > static_cast<size_t>(kMaxDims)) {
        fail<InvalidArgumentError>(who, "shape must have 1 to 4 dimensions, got ", std::string(py::repr(shape)));
    }
    for (int i = 0; i < kMaxDims; ++i) ne[i] = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] < 0)
            fail<InvalidArgumentError>(who, "shape has a negative dimension: ", std::string(py::repr(shape)));
        ne[dims.size() - 1 - i] = dims[i];
    }
    *n_dims = static_cast<int>(dims.size());
}

py::tuple ne_to_shape(const Tensor& t) {
    py::tuple shape(t.n_dims);
    for (int i = 0; i < t.n_dims; ++i) shape[i] = t.ne[t.n_dims - 1 - i];
    return shape;
}

namespace {

std::vector<py::ssize_t> np_shape(const Tensor& t) {
    std::vector<py::ssize_t> s;
    for (int i = t.n_dims - 1; i >= 0; --i) s.push_back(t.ne[i]);
    return s;
}

py::dtype np_dtype(Type type) {
    switch (type) {
        case Type::F32: return py::dtype::of<float>();
        case Type::I32: return py::dtype::of<int32_t>();
        case Type::F16: return py::dtype("float16");
        default: return py::dtype::of<float>();  // bf16 and quantized types come back dequantized
    }
}

Buffer& buffer_of(const Tensor& t, const char* who) {
    const auto& buf = t.data_buffer();
    if (!buf) fail<InvalidArgumentError>(who, "tensor ", t.describe(), " ", unallocated(t));
    return *buf;
}

bool is_raw_bytes(py::handle data) {
    if (PyBytes_Check(data.ptr()) || PyByteArray_Check(data.ptr()) || PyMemoryView_Check(data.ptr())) return true;
    if (py::isinstance<py::array>(data))
        return py::reinterpret_borrow<py::array>(data).dtype().is(py::dtype::of<uint8_t>());
    return false;
}

// numpy's cast to int32 turns NaN, infinities and out-of-range values into INT_MIN or wraps them
// modulo 2^32 without a word; an i32 tensor (indices, positions) must get exactly the values given.
void check_fits_i32(const py::array& arr, const Tensor& t, const char* who) {
    const char kind = arr.dtype().kind();
    if (kind == 'b' || arr.size() == 0) return;
    if (kind == 'f') {
        auto f = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(arr);
        const double* p = f.data();
        for (py::ssize_t i = 0; i < f.size(); ++i) {
            const double v = p[i];
            if (!(v >= -2147483648.0 && v <= 2147483647.0)) {
                fail<InvalidArgumentError>(who, "value ", std::string(py::repr(py::float_(v))), " at flat index ", i,
                                           " cannot be stored in i32 tensor ", t.describe(),
                                           " (not a number in [-2147483648, 2147483647])");
            }
        }
        return;
    }
    if (arr.itemsize() <= 2 || (kind == 'i' && arr.itemsize() == 4)) return;
    const bool is_unsigned = kind == 'u';
    py::array wide = is_unsigned
                         ? py::array(py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(arr))
                         : py::array(py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(arr));
    for (py::ssize_t i = 0; i < wide.size(); ++i) {
        bool ok;
        std::string text;
        if (is_unsigned) {
            const uint64_t v = static_cast<const uint64_t*>(wide.data())[i];
            ok = v <= 2147483647u;
            text = std::to_string(v);
        } else {
            const int64_t v = static_cast<const int64_t*>(wide.data())[i];
            ok = v >= -2147483648LL && v <= 2147483647LL;
            text = std::to_string(v);
        }
        if (!ok) {
            fail<InvalidArgumentError>(who, "value ", text, " at flat index ", i, " does not fit in i32 tensor ",
                                       t.describe(), " ([-2147483648, 2147483647])");
        }
    }
}

// Converts `data` (numpy order, the tensor's shape) to the tensor's stored bytes.
std::vector<uint8_t> encode(const Tensor& t, py::handle data, const char* who) {
    py::array arr = py::array::ensure(data);
    if (!arr) throw py::type_error(std::string("[") + who + "] expected an array-like of numbers or bytes");
    char kind = arr.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b') {
        throw py::type_error(std::string("[") + who + "] cannot convert an array of dtype " +
                             std::string(py::str(arr.dtype())) + " to " + type_traits(t.type).name);
    }
    std::vector<py::ssize_t> want = np_shape(t);
    std::vector<py::ssize_t> got(arr.shape(), arr.shape() + arr.ndim());
    if (got != want) {
        fail<InvalidArgumentError>(who, "array of shape ", std::string(py::str(py::tuple(py::cast(got)))),
                                   " does not match tensor ", t.describe());
    }
    const size_t n = static_cast<size_t>(t.nelements());
    std::vector<uint8_t> out(t.nbytes());
    if (t.type == Type::I32) {
        check_fits_i32(arr, t, who);
        auto a = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(arr);
        if (n) std::memcpy(out.data(), a.data(), n * 4);
        return out;
    }
    // An array already in the tensor's float type is its bytes: copied as they are (a model's f16
    // weights would otherwise be widened to f32 and rounded back, element by element).
    const bool same_f16 = t.type == Type::F16 && kind == 'f' && arr.itemsize() == 2;
    const bool same_f32 = t.type == Type::F32 && kind == 'f' && arr.itemsize() == 4;
    if ((same_f16 || same_f32) && (arr.flags() & py::array::c_style) && arr.dtype().byteorder() != '>') {
        if (n) {
            ReleasedGil nogil;
            std::memcpy(out.data(), arr.data(), out.size());
        }
        return out;
    }
    auto f = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(arr);
    if (n) {
        ReleasedGil nogil;
        const int64_t ne0 = t.ne[0];
        const size_t row = row_size(t.type, ne0);
        for (int64_t r = 0; r < t.nrows(); ++r) quantize_row(t.type, f.data() + r * ne0, out.data() + r * row, ne0);
    }
    return out;
}

// Reads the tensor's elements (any strides) into a fresh numpy array of its dtype (dequantized to f32
// for bf16 and quantized types).
py::array decode(const Tensor& t, const char* who) {
    Buffer& buf = buffer_of(t, who);
    check_host_read(buf, who, "tensor " + t.describe(), t.data_offset(), t.nbytes());
    std::vector<uint8_t> span(t.nbytes());
    {
        ReleasedGil nogil;
        buf.get(span.data(), t.data_offset(), span.size());
    }
    py::array out(np_dtype(t.type), np_shape(t));
    if (t.nelements() == 0) return out;
    const auto& tr = type_traits(t.type);
    const bool plain = t.type == Type::F32 || t.type == Type::I32 || t.type == Type::F16;
    uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
    const size_t out_row = plain ? static_cast<size_t>(t.ne[0]) * tr.type_size : static_cast<size_t>(t.ne[0]) * 4;
    ReleasedGil nogil;
    std::vector<float> tmp;
    size_t r = 0;
    for (int64_t i3 = 0; i3 < t.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < t.ne[1]; ++i1, ++r) {
                const uint8_t* row = span.data() + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
                uint8_t* o = dst + r * out_row;
                if (plain) {
                    if (t.nb[0] == tr.type_size) {
                        std::memcpy(o, row, out_row);
                    } else {
                        for (int64_t i0 = 0; i0 < t.ne[0]; ++i0)
                            std::memcpy(o + i0 * tr.type_size, row + i0 * t.nb[0], tr.type_size);
                    }
                } else {
                    dequantize_row(t.type, row, reinterpret_cast<float*>(o), t.ne[0]);
                }
            }
        }
    }
    return out;
}

void set_data(Tensor& t, py::handle data) {
    static const char* who = "Tensor.set";
    Buffer& buf = buffer_of(t, who);
    if (!t.is_contiguous()) {
        fail<InvalidArgumentError>(who, "tensor ", t.describe(), " is a non-contiguous view; set its source instead");
    }
    if (is_raw_bytes(data)) {
        py::buffer_info info = py::reinterpret_borrow<py::buffer>(data).request();
        require_plain_data(data, info.format.c_str(), who);
        size_t n = static_cast<size_t>(info.size * info.itemsize);
        if (n != t.nbytes()) {
            fail<InvalidArgumentError>(who, "raw data of ", n, " bytes for tensor ", t.describe(),
                                       " of ", t.nbytes(), " bytes");
        }
        if (!PyBuffer_IsContiguous(reinterpret_cast<Py_buffer*>(info.view()), 'C')) {
            fail<InvalidArgumentError>(who, "raw data must be C-contiguous");
        }
        check_host_write(buf, who, "tensor " + t.describe(), t.data_offset(), n);
        ReleasedGil nogil;
        buf.set(info.ptr, t.data_offset(), n);
        return;
    }
    std::vector<uint8_t> bytes = encode(t, data, who);
    check_host_write(buf, who, "tensor " + t.describe(), t.data_offset(), bytes.size());
    ReleasedGil nogil;
    buf.set(bytes.data(), t.data_offset(), bytes.size());
}

py::bytes get_bytes(const Tensor& t) {
    static const char* who = "Tensor.get_bytes";
    Buffer& buf = buffer_of(t, who);
    if (!t.is_contiguous()) fail<InvalidArgumentError>(who, "tensor ", t.describe(), " is not contiguous; use cont()");
    check_host_read(buf, who, "tensor " + t.describe(), t.data_offset(), t.nbytes());
    py::bytes out(nullptr, t.nbytes());
    char* dst = PyBytes_AsString(out.ptr());
    ReleasedGil nogil;
    buf.get(dst, t.data_offset(), t.nbytes());
    return out;
}

py::array numpy_view(const Tensor& t) {
    static const char* who = "Tensor.numpy";
    if (t.type != Type::F32 && t.type != Type::F16 && t.type != Type::I32) {
        fail<InvalidArgumentError>(who, "type ", type_traits(t.type).name,
                                   " has no numpy dtype; use get() for a dequantized copy");
    }
    Buffer& buf = buffer_of(t, who);
    void* ptr = static_cast<uint8_t*>(buf.host_ptr(who)) + t.data_offset();
    check_host_read(buf, who, "tensor " + t.describe(), t.data_offset(), t.nbytes());
    auto* hold = new std::shared_ptr<Storage>(buf.storage(who));
    py::capsule base(hold, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
    std::vector<py::ssize_t> strides;
    for (int i = t.n_dims - 1; i >= 0; --i) strides.push_back(static_cast<py::ssize_t>(t.nb[i]));
    py::array view(np_dtype(t.type), np_shape(t), strides, ptr, base);
    if (pending_read(buf, t.data_offset(), t.nbytes())) view.attr("flags").attr("writeable") = false;
    return view;
}

std::shared_ptr<BufferType> buft_of(py::handle target, const char* who) {
    if (py::isinstance<BufferType>(target)) return target.cast<std::shared_ptr<BufferType>>();
    if (py::isinstance<Backend>(target))
        return target.cast<std::shared_ptr<Backend>>()->device()->default_buffer_type();
    if (py::isinstance<Device>(target)) return target.cast<std::shared_ptr<Device>>()->default_buffer_type();
    throw py::type_error(std::string("[") + who + "] expected a Backend, Device or BufferType, got " +
                         std::string(py::str(py::type::handle_of(target).attr("__name__"))));
}

}  // namespace

std::shared_ptr<BufferType> buffer_type_of(py::handle target, const char* who) { return buft_of(target, who); }

std::vector<uint8_t> tensor_bytes_from(const Tensor& t, py::handle data, const char* who) {
    if (!is_raw_bytes(data)) return encode(t, data, who);
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(data).request();
    require_plain_data(data, info.format.c_str(), who);
    size_t n = static_cast<size_t>(info.size * info.itemsize);
    if (n != t.nbytes()) {
        fail<InvalidArgumentError>(who, "raw data of ", n, " bytes for tensor ", t.describe(),
                                   " of ", t.nbytes(), " bytes");
    }
    const auto* p = static_cast<const uint8_t*>(info.ptr);
    return std::vector<uint8_t>(p, p + n);
}

void init_tensor(py::module_& m) {
    py::class_<Context, std::shared_ptr<Context>>(m, "Context",
                                                  "Holds tensor metadata (ggml_context's role); tensors keep it alive.")
        .def(py::init<>())
        .def("tensor", [](Context& c, Type type, py::object shape, const std::string& name) {
            int64_t ne[kMaxDims];
            int n_dims;
            shape_to_ne(shape, "Context.tensor", ne, &n_dims);
            return handle(c.new_tensor(type, ne, n_dims, name));
        }, py::arg("type"), py::arg("shape"), py::arg("name") = "",
           "A new tensor of `type` and numpy-order `shape` (1 to 4 dims), not yet allocated.")
        .def_property_readonly("tensors", [](Context& c) {
            std::vector<TensorHandle> out;
            for (const auto& t : c.tensors()) out.push_back(handle(t.get()));
            return out;
        }, "Every tensor of this context, in creation order.")
        .def("__len__", &Context::size)
        .def("__repr__", [](const Context& c) { return "<Context: " + std::to_string(c.size()) + " tensor(s)>"; });

    py::class_<Tensor, TensorHandle>(m, "Tensor", "A tensor: ggml metadata plus where its data lives.")
        .def_property_readonly("type", [](const Tensor& t) { return t.type; })
        .def_property_readonly("shape", &ne_to_shape, "numpy-order shape.")
        .def_property_readonly("ne", [](const Tensor& t) { return py::make_tuple(t.ne[0], t.ne[1], t.ne[2], t.ne[3]); },
                               "ggml-order element counts (ne[0] innermost), always 4 entries.")
        .def_property_readonly("nb", [](const Tensor& t) { return py::make_tuple(t.nb[0], t.nb[1], t.nb[2], t.nb[3]); },
                               "ggml-order byte strides, always 4 entries.")
        .def_property_readonly("ndim", [](const Tensor& t) { return t.n_dims; })
        .def_property_readonly("nbytes", &Tensor::nbytes)
        .def_property_readonly("nelements", &Tensor::nelements)
        .def_property("name", [](const Tensor& t) { return t.name; },
                      [](Tensor& t, std::string n) { t.name = std::move(n); })
        .def_property_readonly("op", [](const Tensor& t) { return std::string(op_name(t.op)); },
                               "ggml op name ('NONE' for leafs).")
        .def_property_readonly("op_params", [](const Tensor& t) {
            return std::vector<int32_t>(t.op_params, t.op_params + kMaxOpParams);
        })
        .def_property_readonly("src", [](const Tensor& t) {
            std::vector<TensorHandle> out;
            for (Tensor* s : t.src) out.push_back(handle_or_none(s));
            while (!out.empty() && !out.back()) out.pop_back();
            return out;
        }, "Source tensors (None for absent optional sources).")
        .def_property_readonly("view_src", [](const Tensor& t) { return handle_or_none(t.view_src); })
        .def_property_readonly("view_offs", [](const Tensor& t) { return t.view_offs; })
        .def_property_readonly("buffer", [](const Tensor& t) { return t.data_buffer(); },
                               "The Buffer holding the data, or None.")
        .def_property_readonly("offset", &Tensor::data_offset, "Byte offset of the data in its buffer.")
        .def_property_readonly("context", [](const Tensor& t) { return t.ctx->shared_from_this(); })
        .def_property("is_input", [](const Tensor& t) { return (t.flags & kTensorInput) != 0; },
                      [](Tensor& t, bool v) { t.flags = v ? (t.flags | kTensorInput) : (t.flags & ~kTensorInput); },
                      "Marked as set by the user: graph allocators never reuse its memory.")
        .def_property("is_output", [](const Tensor& t) { return (t.flags & kTensorOutput) != 0; },
                      [](Tensor& t, bool v) { t.flags = v ? (t.flags | kTensorOutput) : (t.flags & ~kTensorOutput); },
                      "Marked as read by the user: graph allocators never reuse its memory.")
        .def("place", [](Tensor& t, std::shared_ptr<Buffer> buffer, py::object offset) {
            place_tensor(t, buffer, to_size(offset, "Tensor.place", "offset"));
        }, py::arg("buffer"), py::arg("offset") = 0,
           "Places this tensor at a byte offset of an existing buffer (e.g. weights inside a mapped file).")
        .def("is_contiguous", &Tensor::is_contiguous)
        .def("is_allocated", &Tensor::is_allocated)
        .def("set", &set_data, py::arg("data"),
             "Writes data synchronously. A float/int array of the tensor's shape is converted to its type\n"
             "(quantized types are quantized); bytes-like data or a uint8 array of exactly nbytes is copied raw.")
        .def("get", [](const Tensor& t) { return decode(t, "Tensor.get"); },
             "A copy as numpy: f32/f16/i32 as themselves, bf16 and quantized types dequantized to float32.\n"
             "Raises PendingWorkError while queued async work writes host-visible memory of the tensor.")
        .def("get_bytes", &get_bytes, "The raw stored bytes (ggml layout) of a contiguous tensor.")
        .def("numpy", &numpy_view,
             "A zero-copy numpy view (host-visible f32/f16/i32 tensors); keeps the memory alive.\n"
             "Raises PendingWorkError while queued async work writes the tensor's bytes (call\n"
             "synchronize() first); read-only while queued work reads them.")
        .def("__repr__", [](const Tensor& t) {
            return "<Tensor " + t.describe() + " op=" + op_name(t.op) + (t.is_allocated() ? "" : " unallocated") + ">";
        });

    m.def("alloc_ctx_tensors", [](Context& ctx, py::handle target) {
        auto buft = buft_of(target, "alloc_ctx_tensors");
        ReleasedGil nogil;
        return alloc_ctx_tensors(ctx, buft);
    }, py::arg("ctx"), py::arg("target"),
       "Places every unallocated tensor of ctx in one new Buffer of target's buffer type (a Backend, Device or\n"
       "BufferType) and returns it (None when nothing needed memory).");
}

}  // namespace mb::bindings
