// Backend._profile: the per-node timings of core/profile.h as plain tuples; metal_backend/profile.py
// turns them into a Profile (tables, Chrome trace) and makes Backend.profile.
#include <memory>

#include <pybind11/stl.h>

#include "bindings/gil.h"
#include "bindings/tensor.h"
#include "core/backend.h"
#include "core/graph.h"
#include "core/profile.h"

namespace mb::bindings {

void init_profile(py::module_& m) {
    auto backend = py::reinterpret_borrow<py::class_<Backend, std::shared_ptr<Backend>>>(py::type::of<Backend>());
    backend.def("_profile", [](Backend& b, Graph& g, int repeat) {
        GraphProfile p;
        {
            ReleasedGil nogil;
            p = profile_graph(b, g, repeat);
        }
        py::list nodes;
        for (const NodeProfile& n : p.nodes) {
            nodes.append(py::make_tuple(handle(n.node), n.start_us, n.time_us, n.host_us, n.bytes, n.flops));
        }
        return py::make_tuple(p.backend, p.clock, p.wall_us, nodes, p.aborted);
    }, py::arg("graph"), py::arg("repeat") = 1,
       "(backend, clock, wall_us, [(node, start_us, time_us, host_us, bytes, flops)], aborted): see\n"
       "Backend.profile.");
}

}  // namespace mb::bindings
