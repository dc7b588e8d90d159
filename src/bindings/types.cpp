// Element types (mb.f32, mb.q4_0, ...) and the array <-> bytes conversions mb.quantize / mb.dequantize,
// which produce and read exactly the bytes ggml stores for each type.
#include <pybind11/numpy.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bindings/gil.h"
#include "bindings/bindings.h"
#include "core/errors.h"
#include "core/types.h"

namespace mb::bindings {

namespace {

std::string shape_text(const std::vector<py::ssize_t>& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
        s += std::to_string(shape[i]);
        s += shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : "");
    }
    return s + ")";
}

// Elements of a shape; a 0-d shape is one element.
size_t element_count(const std::vector<py::ssize_t>& shape, const char* who) {
    size_t n = 1;
    for (py::ssize_t d : shape) {
        if (__builtin_mul_overflow(n, static_cast<size_t>(d), &n)) {
            fail<OutOfRangeError>(who, "shape ", shape_text(shape), " has too many elements");
        }
    }
    return n;
}

// Bytes that `shape` takes in type t; InvalidArgumentError when its last dimension is not a multiple
// of the block size.
size_t stored_size(Type t, const std::vector<py::ssize_t>& shape, const char* who) {
    const TypeTraits& tr = type_traits(t);
    const int64_t ne0 = shape.empty() ? 1 : static_cast<int64_t>(shape.back());
    if (ne0 % tr.block_size != 0) {
        fail<InvalidArgumentError>(who, "last dimension ", ne0, " of shape ", shape_text(shape),
                                   " is not a multiple of the ", tr.name, " block size ", tr.block_size);
    }
    const size_t n = element_count(shape, who);
    size_t nbytes = 0;
    if (__builtin_mul_overflow(n / static_cast<size_t>(tr.block_size), tr.type_size, &nbytes)) {
        fail<OutOfRangeError>(who, "shape ", shape_text(shape), " of ", tr.name, " is too large");
    }
    return nbytes;
}

std::vector<py::ssize_t> shape_from(py::handle shape, const char* who) {
    std::vector<py::ssize_t> out;
    if (PyLong_Check(shape.ptr())) {
        out.push_back(static_cast<py::ssize_t>(to_size(shape, who, "shape")));
        return out;
    }
    if (!PySequence_Check(shape.ptr()) || PyUnicode_Check(shape.ptr()) || PyBytes_Check(shape.ptr())) {
        throw py::type_error(std::string("[") + who + "] shape must be an int or a sequence of ints, got " +
                             std::string(py::str(py::type::handle_of(shape).attr("__name__"))));
    }
    for (py::handle d : py::reinterpret_borrow<py::sequence>(shape)) {
        const size_t v = to_size(d, who, "shape dimension");
        if (v > static_cast<size_t>(PY_SSIZE_T_MAX)) {
            fail<OutOfRangeError>(who, "shape dimension ", v, " is out of range");
        }
        out.push_back(static_cast<py::ssize_t>(v));
    }
    return out;
}

py::bytes quantize(py::handle array, Type t) {
    const char* who = "quantize";
    type_traits(t);
    using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
    // Raises numpy's own error for input that is not numeric.
    FloatArray src(py::reinterpret_borrow<py::object>(array));
    const std::vector<py::ssize_t> shape(src.shape(), src.shape() + src.ndim());
    const size_t nbytes = stored_size(t, shape, who);
    py::bytes out(nullptr, static_cast<py::ssize_t>(nbytes));
    // A fresh bytes object is private to us until returned, so it may be filled in place.
    char* dst = PyBytes_AsString(out.ptr());
    const float* data = src.data();
    const auto n = static_cast<int64_t>(src.size());
    {
        ReleasedGil nogil;
        quantize_row(t, data, dst, n);
    }
    return out;
}

py::array_t<float> dequantize(py::buffer data, Type t, py::handle shape_arg) {
    const char* who = "dequantize";
    const TypeTraits& tr = type_traits(t);
    const std::vector<py::ssize_t> shape = shape_from(shape_arg, who);
    const size_t nbytes = stored_size(t, shape, who);
    py::buffer_info info = data.request();
    require_plain_data(data, info.format.c_str(), who);
    if (!PyBuffer_IsContiguous(info.view(), 'C')) {
        fail<InvalidArgumentError>(who, "data must be C-contiguous");
    }
    const size_t have = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
    if (have != nbytes) {
        fail<InvalidArgumentError>(who, "data has ", have, " bytes but shape ", shape_text(shape), " of ", tr.name,
                                   " takes ", nbytes);
    }
    py::array_t<float> out(shape);
    const void* src = info.ptr;
    float* dst = out.mutable_data();
    const auto n = static_cast<int64_t>(element_count(shape, who));
    {
        ReleasedGil nogil;
        dequantize_row(t, src, dst, n);
    }
    return out;
}

std::string type_repr(Type t) {
    const int32_t id = static_cast<int32_t>(t);
    try {
        return std::string("mb.") + type_traits(t).name;
    } catch (const InvalidArgumentError&) {
        return "mb.Type(" + std::to_string(id) + ")";
    }
}

}  // namespace

void init_types(py::module_& m) {
    py::enum_<Type> type(m, "Type",
                         "An element type with ggml's id and byte layout. The instances are mb.f32, mb.f16, "
                         "mb.bf16, mb.i32 and the block-quantized mb.q4_0, mb.q4_1, mb.q5_0, mb.q5_1, mb.q8_0 "
                         "(blocks of 32 values); mb.types lists them all.");
    for (Type t : all_types()) {
        type.value(type_traits(t).name, t);
    }
    type.def_property_readonly(
            "id", [](Type t) { return static_cast<int32_t>(t); }, "ggml's type id, as stored in model files.")
        .def_property_readonly(
            "block_size", [](Type t) { return type_traits(t).block_size; },
            "Elements per block: 32 for the quantized types, 1 otherwise.")
        .def_property_readonly(
            "type_size", [](Type t) { return type_traits(t).type_size; }, "Bytes per block.")
        .def_property_readonly(
            "is_quantized", [](Type t) { return type_traits(t).is_quantized; },
            "Whether values are stored in quantized blocks.")
        .def(
            "row_size", [](Type t, int64_t n) { return row_size(t, n); }, py::arg("n"),
            "Bytes taken by n consecutive elements (n a multiple of block_size).");
    // Assigned rather than def()'d so these replace pybind11's enum defaults instead of being
    // appended as overloads that would never be reached.
    type.attr("__repr__") = py::cpp_function(&type_repr, py::is_method(type), py::name("__repr__"));
    type.attr("__str__") = py::cpp_function(&type_repr, py::is_method(type), py::name("__str__"));

    py::tuple types(all_types().size());
    for (size_t i = 0; i < all_types().size(); ++i) {
        const Type t = all_types()[i];
        py::object obj = type.attr(type_traits(t).name);
        m.attr(type_traits(t).name) = obj;
        types[i] = obj;
    }
    m.attr("types") = types;

    m.def("quantize", &quantize, py::arg("array"), py::arg("type"),
          "Converts an array of numbers (converted to float32 first) to the bytes ggml stores for `type`.\n\n"
          "The last dimension must be a multiple of type.block_size. Quantized types use ggml's reference "
          "quantizers bit for bit; f16 and bf16 round to nearest even; i32 truncates toward zero.");
    m.def("dequantize", &dequantize, py::arg("data"), py::arg("type"), py::arg("shape"),
          "Converts bytes stored as `type` (any C-contiguous buffer) to a float32 array of `shape`.\n\n"
          "len(data) must be exactly the size that shape takes in type.");
}

}  // namespace mb::bindings
