// The exception classes of the API. Each derives from MetalBackendError and from the Python built-in
// a caller would naturally catch, so `except MemoryError` works as well as `except mb.OutOfMemoryError`.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <limits>
#include <string>

#include "bindings/bindings.h"
#include "core/errors.h"

namespace mb::bindings {

namespace {

PyObject* g_base = nullptr;
PyObject* g_oom = nullptr;
PyObject* g_invalid = nullptr;
PyObject* g_range = nullptr;
PyObject* g_unsupported = nullptr;
PyObject* g_device = nullptr;

PyObject* make_class(py::module_& m, const char* name, const char* doc, std::initializer_list<PyObject*> bases) {
    py::tuple base_tuple(bases.size());
    size_t i = 0;
    for (PyObject* b : bases) base_tuple[i++] = py::reinterpret_borrow<py::object>(b);
    std::string qualified = std::string("metal_backend.") + name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
    if (!cls) throw py::error_already_set();
    m.attr(name) = py::reinterpret_borrow<py::object>(cls);
    return cls;
}

}  // namespace

void init_errors(py::module_& m) {
    g_base = make_class(m, "MetalBackendError", "Base class of every metal_backend error.", {PyExc_RuntimeError});
    g_oom = make_class(m, "OutOfMemoryError",
                       "An allocation larger than the device or buffer type allows, or one that failed.",
                       {g_base, PyExc_MemoryError});
    g_invalid = make_class(m, "InvalidArgumentError", "An argument has the wrong value, shape, type or state.",
                           {g_base, PyExc_ValueError});
    g_range = make_class(m, "OutOfRangeError", "An index, offset or length outside the valid range.",
                         {g_invalid, PyExc_IndexError});
    g_unsupported = make_class(m, "UnsupportedOpError", "The device or backend cannot run this operation.",
                               {g_base, PyExc_NotImplementedError});
    g_device = make_class(m, "DeviceError", "A device command failed; the message says what and where.", {g_base});

    // Most derived first: the translator tries each catch in order.
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const OutOfRangeError& e) {
            PyErr_SetString(g_range, e.what());
        } catch (const InvalidArgumentError& e) {
            PyErr_SetString(g_invalid, e.what());
        } catch (const OutOfMemoryError& e) {
            PyErr_SetString(g_oom, e.what());
        } catch (const UnsupportedOpError& e) {
            PyErr_SetString(g_unsupported, e.what());
        } catch (const DeviceError& e) {
            PyErr_SetString(g_device, e.what());
        } catch (const Error& e) {
            PyErr_SetString(g_base, e.what());
        }
    });
}

size_t to_size(py::handle value, const char* who, const char* what, bool too_big_is_oom) {
    if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
        throw py::type_error(std::string("[") + who + "] " + what + " must be an int, got " +
                             std::string(py::str(py::type::handle_of(value).attr("__name__"))));
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow < 0 || (overflow == 0 && v < 0)) {
        fail<InvalidArgumentError>(who, what, " must be >= 0, got ", std::string(py::str(value)));
    }
    if (overflow > 0 || static_cast<unsigned long long>(v) > std::numeric_limits<size_t>::max()) {
        if (too_big_is_oom)
            fail<OutOfMemoryError>(who, what, " ", std::string(py::str(value)), " is larger than any memory");
        fail<OutOfRangeError>(who, what, " ", std::string(py::str(value)), " is out of range");
    }
    return static_cast<size_t>(v);
}

int64_t to_int64(py::handle value, const char* who, const char* what) {
    py::object index;
    if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
        index = py::reinterpret_borrow<py::object>(value);
    } else if (!PyBool_Check(value.ptr()) && PyIndex_Check(value.ptr())) {
        PyObject* i = PyNumber_Index(value.ptr());
        if (!i) throw py::error_already_set();
        index = py::reinterpret_steal<py::object>(i);
    } else {
        throw py::type_error(std::string("[") + who + "] " + what + " must be an int, got " +
                             std::string(py::str(py::type::handle_of(value).attr("__name__"))));
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow != 0) {
        fail<OutOfRangeError>(who, what, " ", std::string(py::str(index)), " does not fit in a signed 64-bit integer");
    }
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return static_cast<int64_t>(v);
}

}  // namespace mb::bindings
