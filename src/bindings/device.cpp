// Registries, devices and their props.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "bindings/gil.h"
#include "bindings/bindings.h"
#include "core/backend.h"
#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/registry.h"

namespace mb::bindings {

namespace {

// Holds a Python buffer-protocol export for as long as a mapped buffer's storage uses its memory.
// Holding the export also pins the memory: a bytearray cannot be resized while it is exported.
struct PyBufferOwner {
    Py_buffer view{};
    ~PyBufferOwner() {
        if (gil_forbidden()) return;  // the interpreter is exiting: its objects go with it
        HeldGil gil;
        exit_safe([this]() { PyBuffer_Release(&view); });
    }
};

struct DeviceProps {
    std::string name, description;
    DeviceType type;
    size_t memory_free, memory_total;
    DeviceCaps caps;
    std::map<std::string, std::string> extra;
};

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

std::shared_ptr<Buffer> buffer_from_host_ptr(Device& dev, py::object obj, py::object max_tensor_size) {
    auto owner = std::make_shared<PyBufferOwner>();
    if (PyObject_GetBuffer(obj.ptr(), &owner->view, PyBUF_STRIDES | PyBUF_FORMAT) != 0) {
        PyErr_Clear();
        throw py::type_error("[Device::buffer_from_host_ptr] expected a writable, C-contiguous buffer-protocol "
                             "object (numpy array, bytearray, memoryview, mmap), got " + type_name(obj));
    }
    // From here on `owner` releases the export if anything below throws.
    require_plain_data(obj, owner->view.format, "Device::buffer_from_host_ptr");
    if (owner->view.readonly) {
        fail<InvalidArgumentError>("Device::buffer_from_host_ptr", "the ", type_name(obj),
                                   " is read-only; the buffer would write to it");
    }
    if (!PyBuffer_IsContiguous(&owner->view, 'C')) {
        fail<InvalidArgumentError>("Device::buffer_from_host_ptr", "the ", type_name(obj),
                                   " is not C-contiguous; wrap a contiguous copy instead");
    }
    size_t size = static_cast<size_t>(owner->view.len);
    size_t max_tensor = max_tensor_size.is_none()
                            ? size
                            : to_size(max_tensor_size, "Device::buffer_from_host_ptr", "max_tensor_size");
    void* ptr = owner->view.buf;
    ReleasedGil nogil;
    return dev.buffer_from_host_ptr(ptr, size, max_tensor, std::move(owner));
}

}  // namespace

void init_device(py::module_& m) {
    py::enum_<DeviceType>(m, "DeviceType", "Kind of device: CPU, GPU or ACCEL (accelerator).")
        .value("CPU", DeviceType::CPU)
        .value("GPU", DeviceType::GPU)
        .value("ACCEL", DeviceType::ACCEL);

    py::class_<DeviceCaps>(m, "DeviceCaps", "What a device can do (ggml_backend_dev_caps).")
        .def_readonly("async_", &DeviceCaps::async, "Asynchronous compute and tensor copies.")
        .def_readonly("host_buffer", &DeviceCaps::host_buffer, "Has a pinned host buffer type.")
        .def_readonly("buffer_from_host_ptr", &DeviceCaps::buffer_from_host_ptr,
                      "Can wrap caller memory without copy (Device.buffer_from_host_ptr).")
        .def_readonly("events", &DeviceCaps::events, "Supports cross-backend events.")
        .def("__repr__", [](const DeviceCaps& c) {
            return "DeviceCaps(async_=" + std::string(c.async ? "True" : "False") +
                   ", host_buffer=" + (c.host_buffer ? "True" : "False") +
                   ", buffer_from_host_ptr=" + (c.buffer_from_host_ptr ? "True" : "False") +
                   ", events=" + (c.events ? "True" : "False") + ")";
        });

    py::class_<DeviceProps>(m, "DeviceProps", "A snapshot of a device's properties (ggml_backend_dev_props).")
        .def_readonly("name", &DeviceProps::name)
        .def_readonly("description", &DeviceProps::description)
        .def_readonly("type", &DeviceProps::type)
        .def_readonly("memory_free", &DeviceProps::memory_free)
        .def_readonly("memory_total", &DeviceProps::memory_total)
        .def_readonly("caps", &DeviceProps::caps)
        .def_readonly("extra", &DeviceProps::extra, "Device-specific facts (GPU family, simdgroup support...).")
        .def("__repr__", [](const DeviceProps& p) {
            return "DeviceProps(name='" + p.name + "', description='" + p.description +
                   "', memory_free=" + std::to_string(p.memory_free) +
                   ", memory_total=" + std::to_string(p.memory_total) + ")";
        });

    py::class_<Device, std::shared_ptr<Device>>(m, "Device", "A compute device: its memory, buffer types and backends.")
        .def_property_readonly("name", &Device::name, "Short name: 'CPU', 'Metal', 'MetalSim'.")
        .def_property_readonly("description", &Device::description, "Hardware name, e.g. the CPU model.")
        .def_property_readonly("type", &Device::type, "DeviceType.CPU, GPU or ACCEL.")
        .def_property_readonly("memory", [](const Device& d) {
            auto mem = d.memory();
            return py::make_tuple(mem.free, mem.total);
        }, "(free_bytes, total_bytes).")
        .def_property_readonly("props", [](const Device& d) {
            auto mem = d.memory();
            return DeviceProps{d.name(), d.description(), d.type(), mem.free, mem.total, d.caps(), d.extra_props()};
        }, "All properties at once, as a DeviceProps snapshot.")
        .def_property_readonly("buffer_type", &Device::default_buffer_type, "The default BufferType.")
        .def_property_readonly("buffer_types", &Device::buffer_types, "Every BufferType of this device.")
        .def("supports_buft", &Device::supports_buft, py::arg("buft"),
             "Whether backends of this device can compute on tensors in buffers of `buft`.")
        .def("buffer_from_host_ptr", &buffer_from_host_ptr, py::arg("obj"), py::arg("max_tensor_size") = py::none(),
             "Wraps a writable, C-contiguous buffer-protocol object (numpy array, bytearray, memoryview,\n"
             "mmap) as a 'mapped' Buffer without copying. The buffer keeps `obj` alive and sees its writes.")
        .def("set_prop", [](Device& d, const std::string& key, py::handle value) {
            if (PyUnicode_Check(value.ptr())) return d.set_prop_text(key, value.cast<std::string>());
            if (!PyLong_Check(value.ptr())) throw py::type_error("[Device.set_prop] value must be an int, bool or str");
            d.set_prop(key, value.cast<int64_t>());
        }, py::arg("key"), py::arg("value"),
           "Changes a settable device prop (see props.extra), e.g. dev.set_prop('has_simdgroup_mm', False)\n"
           "to test fallbacks. Props can be narrowed below what the hardware has, never widened past it.\n"
           "Text props take a str: dev.set_prop('reject_shader_families', 'soft_max,rope') (MetalSim).")
        .def_property_readonly("shader_families", [](Device& d) {
            py::dict out;
            for (const auto& [family, state] : d.shader_families(false)) out[py::str(family)] = state;
            return out;
        }, "Metal devices: each shader family (shaders/<family>.metal, one library each) and its state:\n"
           "'not compiled', 'compiling', 'compiled in N ms' or 'failed: <the compiler's message>'. A\n"
           "family that failed makes only its ops unsupported. Empty for devices without shaders.")
        .def("compile_shader_families", [](Device& d) {
            std::vector<std::pair<std::string, std::string>> states;
            {
                ReleasedGil released;
                states = d.shader_families(true);
            }
            py::dict out;
            for (const auto& [family, state] : states) out[py::str(family)] = state;
            return out;
        }, "Compiles every shader family not compiled yet (waits for those compiling) and returns\n"
           "shader_families. Families otherwise compile when the device is first used.")
        .def("init_backend", [](Device& d, const std::string& params) { return d.init_backend(params); },
             py::arg("params") = "", "Creates a Backend on this device. `params`: 'key=value,...' options.")
        .def("__repr__", [](const Device& d) { return "<Device " + d.name() + ": " + d.description() + ">"; });

    py::class_<Registry, std::shared_ptr<Registry>>(m, "Registry", "A device registry (ggml_backend_reg).")
        .def_readonly("name", &Registry::name)
        .def_readonly("devices", &Registry::devices)
        .def_property_readonly("device_count", [](const Registry& r) { return r.devices.size(); })
        .def_readonly("features", &Registry::features, "Build features, e.g. {'EMBED_LIBRARY': '1'}.")
        .def("device", [](const Registry& r, py::object index) {
            if (!PyLong_Check(index.ptr())) throw py::type_error("[Registry::device] index must be an int");
            long long i = index.cast<long long>();
            if (i < 0 || static_cast<size_t>(i) >= r.devices.size()) {
                fail<OutOfRangeError>("Registry::device", "index ", i, " out of range: registry '", r.name,
                                      "' has ", r.devices.size(), " device(s)");
            }
            return r.devices[static_cast<size_t>(i)];
        }, py::arg("index"), "The device at `index`; IndexError when out of range.")
        .def("__repr__", [](const Registry& r) {
            return "<Registry " + r.name + ": " + std::to_string(r.devices.size()) + " device(s)>";
        });

    m.def("registries", &registries,
          "Every registry built into this module: 'CPU' always, 'Metal' on Apple, 'MetalSim' where built.");
}

}  // namespace mb::bindings
