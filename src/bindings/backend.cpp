// Backends and their options.
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings/gil.h"
#include "bindings/bindings.h"
#include "core/backend.h"
#include "core/device.h"
#include "core/errors.h"

namespace mb::bindings {

namespace {

// backend.options: a live mapping over the backend's named options; assignment validates.
struct BackendOptions {
    std::shared_ptr<Backend> backend;
};

int64_t option_value(py::handle value, const std::string& key) {
    if (!PyLong_Check(value.ptr())) {
        throw py::type_error("[Backend::options] option '" + key + "' takes an int or bool, got " +
                             std::string(py::str(py::type::handle_of(value).attr("__name__"))));
    }
    if (PyBool_Check(value.ptr())) return value.ptr() == Py_True ? 1 : 0;
    return to_int64(value, "Backend::options", ("option '" + key + "'").c_str());
}

}  // namespace

void init_backend(py::module_& m) {
    py::class_<BackendOptions>(m, "BackendOptions",
                               "The named options of a backend, readable and settable like a dict.")
        .def("__getitem__", [](const BackendOptions& o, const std::string& key) {
            try {
                return o.backend->option(key);
            } catch (const InvalidArgumentError& e) {
                throw py::key_error(e.what());
            }
        })
        .def("__setitem__", [](BackendOptions& o, const std::string& key, py::handle value) {
            o.backend->set_option(key, option_value(value, key));
        })
        .def("__contains__", [](const BackendOptions& o, const std::string& key) {
            return o.backend->options().count(key) > 0;
        })
        .def("__iter__",
             [](const BackendOptions& o) { return py::iter(py::cast(o.backend->options()).attr("keys")()); })
        .def("__len__", [](const BackendOptions& o) { return o.backend->options().size(); })
        .def("keys", [](const BackendOptions& o) { return py::cast(o.backend->options()).attr("keys")(); })
        .def("items", [](const BackendOptions& o) { return py::cast(o.backend->options()).attr("items")(); })
        .def("to_dict", [](const BackendOptions& o) { return o.backend->options(); }, "A copy as a plain dict.")
        .def("__repr__", [](const BackendOptions& o) { return std::string(py::repr(py::cast(o.backend->options()))); });

    py::class_<Backend, std::shared_ptr<Backend>>(m, "Backend", "A stream of work on one device (ggml_backend).")
        .def_property_readonly("name", &Backend::name)
        .def_property_readonly("device", &Backend::device)
        .def_property(
            "options", [](std::shared_ptr<Backend> b) { return BackendOptions{std::move(b)}; },
            [](std::shared_ptr<Backend> b, const py::dict& values) {
                // All or nothing: every value is converted first, and a bad key or range puts back
                // the entries applied before it.
                std::vector<std::pair<std::string, int64_t>> todo;
                for (auto kv : values) {
                    std::string key = py::str(kv.first);
                    todo.emplace_back(key, option_value(kv.second, key));
                }
                const std::map<std::string, int64_t> before = b->options();
                size_t applied = 0;
                try {
                    for (; applied < todo.size(); ++applied) b->set_option(todo[applied].first, todo[applied].second);
                } catch (...) {
                    for (size_t i = 0; i < applied; ++i) b->set_option(todo[i].first, before.at(todo[i].first));
                    throw;
                }
            },
            "Named integer options (n_threads, fusion, concurrency...). Assign a dict to set several: all\n"
            "are applied, or none (a bad entry raises and leaves every option as it was).")
        .def("synchronize", [](Backend& b) {
            // Taken before waiting: everything held then belongs to copies the wait completes.
            std::vector<std::shared_ptr<void>> done = b.take_held();
            ReleasedGil nogil;
            b.synchronize();
        }, "Waits for all queued work; raises DeviceError for work that failed.")
        .def("__repr__", [](const Backend& b) { return "<Backend " + b.name() + ">"; });
}

}  // namespace mb::bindings
