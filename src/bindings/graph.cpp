// Graphs, graph allocation, and computing graphs on backends.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings/gil.h"
#include "bindings/tensor.h"
#include "core/allocation.h"
#include "core/backend.h"
#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/graph.h"
#include "core/scheduler.h"

namespace mb::bindings {

namespace {

std::shared_ptr<Graph> make_graph(py::args outputs) {
    std::vector<Tensor*> outs;
    for (py::handle o : outputs) {
        if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
            for (py::handle x : o) outs.push_back(x.cast<TensorHandle>().get());
        } else {
            outs.push_back(o.cast<TensorHandle>().get());
        }
    }
    return std::make_shared<Graph>(std::move(outs));
}

std::vector<TensorHandle> handles(const std::vector<Tensor*>& ts) {
    std::vector<TensorHandle> out;
    out.reserve(ts.size());
    for (Tensor* t : ts) out.push_back(handle(t));
    return out;
}

struct PlanEntry {
    TensorHandle node;
    std::shared_ptr<Backend> backend;
    std::string reason;
};

// A reference to a Python object that may be dropped on any thread, with or without the GIL (a
// backend drops what it holds after a synchronize or when it goes).
std::shared_ptr<py::object> py_owner(py::object obj) {
    return std::shared_ptr<py::object>(new py::object(std::move(obj)), [](py::object* p) {
        if (gil_forbidden()) return;  // the interpreter is exiting: its objects go with it
        HeldGil gil;
        exit_safe([p]() { delete p; });
    });
}

// Runs compute without the GIL; a Python abort callback takes the GIL when asked. A compute that
// waits also completes every copy queued before it, so what those copies held can go.
Status compute(Backend& b, Graph& g, bool wait) {
    std::vector<std::shared_ptr<void>> done;
    if (wait) done = b.take_held();
    ReleasedGil nogil;
    return wait ? b.graph_compute(g) : b.graph_compute_async(g);
}

}  // namespace

void init_graph(py::module_& m) {
    py::enum_<Status>(m, "Status", "Outcome of a graph compute.")
        .value("SUCCESS", Status::SUCCESS)
        .value("ABORTED", Status::ABORTED)
        .value("FAILED", Status::FAILED)
        .value("ALLOC_FAILED", Status::ALLOC_FAILED);

    py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph", "The nodes that compute some outputs, sources first.")
        .def(py::init(&make_graph), "Graph(*outputs): every node the outputs need, in topological order.")
        .def_property_readonly("nodes", [](const Graph& g) { return handles(g.nodes()); })
        .def_property_readonly("leafs", [](const Graph& g) { return handles(g.leafs()); })
        .def_property_readonly("outputs", [](const Graph& g) { return handles(g.outputs()); })
        .def("__len__", [](const Graph& g) { return g.nodes().size(); })
        .def("__repr__", [](const Graph& g) {
            return "<Graph: " + std::to_string(g.nodes().size()) +
                   " node(s), " + std::to_string(g.leafs().size()) + " leaf(s)>";
        });
    py::type::of<Context>().attr("build_graph") = py::cpp_function(
        [](py::object, py::args outputs) { return make_graph(outputs); }, py::is_method(py::type::of<Context>()),
        py::name("build_graph"), "ctx.build_graph(*outputs) -> Graph.");

    py::class_<GraphAllocator>(m, "GraphAllocator",
                               "Places a graph's unallocated tensors in one buffer, reusing memory of tensors no\n"
                               "longer needed within the graph; inputs, leafs and outputs are never overwritten, and\n"
                               "a later alloc_graph never reuses memory a tensor of an earlier graph still holds.")
        .def(py::init([](py::handle target) {
            return std::make_unique<GraphAllocator>(buffer_type_of(target, "GraphAllocator"));
        }), py::arg("target"), "target: a Backend, Device or BufferType.")
        .def("alloc_graph", [](GraphAllocator& a, Graph& g) {
            ReleasedGil nogil;
            return a.alloc_graph(g);
        }, py::arg("graph"), "Plans and places; returns the peak bytes of the plan.")
        .def_property_readonly("peak_bytes", &GraphAllocator::peak_bytes)
        .def_property_readonly("unshared_bytes", &GraphAllocator::unshared_bytes,
                               "Bytes the placed tensors would take without reuse.")
        .def_property_readonly("buffer", &GraphAllocator::buffer)
        .def_property_readonly("buffer_type", &GraphAllocator::buffer_type);

    py::class_<PlanEntry>(m, "PlanEntry", "Where the scheduler runs one node, and why.")
        .def_readonly("node", &PlanEntry::node)
        .def_readonly("backend", &PlanEntry::backend)
        .def_readonly("reason", &PlanEntry::reason)
        .def("__repr__", [](const PlanEntry& e) {
            return "<PlanEntry " + std::string(op_name(e.node->op)) + " " + e.node->describe() + " -> " +
                   e.backend->name() + ": " + e.reason + ">";
        });

    py::class_<Scheduler>(m, "Scheduler",
                          "Runs graphs over several backends: each node on the first backend that supports it\n"
                          "(or where its weights live), falling back to later ones; put the CPU last.")
        .def(py::init([](std::vector<std::shared_ptr<Backend>> backends) {
            return std::make_unique<Scheduler>(std::move(backends));
        }), py::arg("backends"))
        .def_property_readonly("backends", &Scheduler::backends)
        .def("plan", [](const Scheduler& s, const Graph& g) {
            std::vector<PlanEntry> out;
            for (const auto& p : s.plan(g)) out.push_back({handle(p.node), s.backends()[p.backend], p.reason});
            return out;
        }, py::arg("graph"), "Per node: the backend chosen and why (raises UnsupportedOpError if none can run it).")
        .def("graph_compute", [](Scheduler& s, Graph& g) {
            ReleasedGil nogil;
            return s.graph_compute(g);
        }, py::arg("graph"),
           "Places the graph's unplaced nodes, copies across backends, computes split by split, waits. Outputs\n"
           "(and tensors flagged is_output) get memory of their own, valid until the graph is computed again;\n"
           "other nodes are scratch for this compute only (unplaced after).")
        .def_property_readonly("n_splits", &Scheduler::n_splits, "Splits of the last compute.")
        .def_property_readonly("n_copies", &Scheduler::n_copies, "Tensors copied across backends in the last compute.");

    auto backend = py::reinterpret_borrow<py::class_<Backend, std::shared_ptr<Backend>>>(py::type::of<Backend>());
    backend
        .def("graph_compute", [](Backend& b, Graph& g) { return compute(b, g, true); }, py::arg("graph"),
             "Computes the graph and waits. Returns Status.SUCCESS or Status.ABORTED; raises on errors.")
        .def("graph_compute_async", [](Backend& b, Graph& g) { return compute(b, g, false); }, py::arg("graph"),
             "Queues the graph; synchronize() waits for it.")
        .def("set_tensor_async", [](Backend& b, Tensor& t, py::handle data) {
            auto bytes = tensor_bytes_from(t, data, "Backend.set_tensor_async");
            ReleasedGil nogil;
            b.set_tensor_async(t, bytes.data(), 0, bytes.size());
        }, py::arg("tensor"), py::arg("data"), "Copies data into the tensor after queued work (done at synchronize).")
        .def("get_tensor_async", [](Backend& b, const Tensor& t, py::buffer out) {
            py::buffer_info info = out.request(/*writable=*/true);
            require_plain_data(out, info.format.c_str(), "Backend.get_tensor_async");
            size_t n = static_cast<size_t>(info.size * info.itemsize);
            if (n != t.nbytes()) {
                fail<InvalidArgumentError>("Backend.get_tensor_async", "destination of ", n, " bytes for tensor ",
                                           t.describe(), " of ", t.nbytes(), " bytes");
            }
            if (!PyBuffer_IsContiguous(static_cast<Py_buffer*>(info.view()), 'C')) {
                fail<InvalidArgumentError>("Backend.get_tensor_async", "destination must be C-contiguous");
            }
            {
                ReleasedGil nogil;
                b.get_tensor_async(t, info.ptr, 0, n);
            }
            // Held after queuing, so that a synchronize() on another thread that takes what is held
            // has the copy queued before it.
            if (b.queues_copies()) b.hold(py_owner(out));
        }, py::arg("tensor"), py::arg("out"),
           "Copies the tensor's raw bytes into `out` after queued work, complete at synchronize(); the\n"
           "backend keeps `out` alive until then.")
        .def("set_abort_callback", [](Backend& b, py::object fn) {
            if (fn.is_none()) {
                b.set_abort_callback(nullptr);
                return;
            }
            if (!PyCallable_Check(fn.ptr()))
                throw py::type_error("[Backend.set_abort_callback] expected a callable or None");
            auto holder = py_owner(fn);
            b.set_abort_callback([holder]() {
                if (gil_forbidden()) return true;  // the interpreter is exiting: stop the compute
                HeldGil gil;
                // Called through the C API inside exit_safe: nothing of C++ between it and CPython.
                const int stop = exit_safe([&holder]() {
                    PyObject* r = PyObject_CallNoArgs(holder->ptr());
                    const int v = r ? PyObject_IsTrue(r) : -1;
                    Py_XDECREF(r);
                    return v;
                });
                if (stop < 0) throw py::error_already_set();
                return stop != 0;
            });
        }, py::arg("fn"), "fn() -> bool, asked between units of work; True stops the compute (Status.ABORTED).")
        .def("graph_optimize", &Backend::graph_optimize, py::arg("graph"), "Reorders independent nodes (Metal).")
        .def("supports_family", &Backend::supports_family, py::arg("family"), "Metal GPU family query (Apple N).")
        .def("capture_next_compute", &Backend::capture_next_compute, py::call_guard<ReleasedGil>(),
             "Records a GPU trace of the next compute (Metal).");

    auto device = py::reinterpret_borrow<py::class_<Device, std::shared_ptr<Device>>>(py::type::of<Device>());
    device
        .def("supports_op", [](const Device& d, const Tensor& t) { return d.supports_op(t); }, py::arg("tensor"),
             "Whether this device can compute the tensor's op with its types and layouts.")
        .def("offload_op", [](const Device& d, const Tensor& t) { return d.offload_op(t); }, py::arg("tensor"),
             "Whether to run the op here even when its weights live in host memory.");
    py::type::of<BufferType>().attr("alloc_size") = py::cpp_function(
        [](const BufferType& b, const Tensor& t) { return b.alloc_size(t); }, py::is_method(py::type::of<BufferType>()),
        py::name("alloc_size"), py::arg("tensor"), "Bytes the tensor needs in this buffer type (data + op scratch).");
}

}  // namespace mb::bindings
