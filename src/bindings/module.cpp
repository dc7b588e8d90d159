#include "bindings/bindings.h"
#include "bindings/gil.h"

PYBIND11_MODULE(_core, m) {
    m.doc() = "metal_backend native core: devices, buffers, tensors, graphs and backends";
    m.attr("__version__") = MB_VERSION;
    mb::bindings::init_gil(m);
    mb::bindings::init_errors(m);
    mb::bindings::init_host_view(m);
    mb::bindings::init_types(m);
    mb::bindings::init_device(m);
    mb::bindings::init_buffer(m);
    mb::bindings::init_backend(m);
    mb::bindings::init_tensor(m);
    mb::bindings::init_ops(m);
    mb::bindings::init_graph(m);
    mb::bindings::init_dlpack(m);
    mb::bindings::init_profile(m);
    mb::bindings::init_log_softmax_rows(m);
}
