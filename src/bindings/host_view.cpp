#include "bindings/host_view.h"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <string>

#include "core/buffer.h"
#include "core/errors.h"
#include "core/pending_access.h"
#include "core/storage.h"

namespace mb::bindings {

void check_host_read(const Buffer& buf, const char* who, const std::string& what, size_t offset, size_t n) {
    auto storage = buf.storage(who);
    if (!storage->host_ptr()) return;
    check_no_pending_write(*storage, who, what, offset, n);
}

void check_host_write(const Buffer& buf, const char* who, const std::string& what, size_t offset, size_t n) {
    check_no_pending_access(*buf.storage(who), who, what, offset, n);
}

bool pending_read(const Buffer& buf, size_t offset, size_t n) {
    return buf.storage("pending_read")->pending().read_in(offset, offset + std::max<size_t>(n, 1));
}

void init_host_view(py::module_& m) {
    static PyObject* cls = nullptr;
    py::object base = m.attr("MetalBackendError");
    cls = PyErr_NewExceptionWithDoc(
        "metal_backend.PendingWorkError",
        "Host access (a numpy view, memoryview, DLPack export or read) to memory that queued async work\n"
        "(graph_compute_async, set_tensor_async) writes: the message names the work. Call that backend's\n"
        "synchronize() first.",
        base.ptr(), nullptr);
    if (!cls) throw py::error_already_set();
    m.attr("PendingWorkError") = py::reinterpret_borrow<py::object>(cls);
    // Registered after init_errors, so tried before its catch-all for mb::Error.
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const PendingWorkError& e) {
            PyErr_SetString(cls, e.what());
        }
    });
}

}  // namespace mb::bindings
