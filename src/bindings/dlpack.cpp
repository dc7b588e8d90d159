// DLPack: Tensor.__dlpack__ / __dlpack_device__ (export) and from_dlpack (import), so tensors trade
// memory with numpy, torch, JAX and other array libraries without copies. Only host-visible memory is
// exported in place (CPU buffers, Metal and MetalSim shared and mapped buffers: kDLCPU, as Apple
// silicon's memory is unified); device-private memory only as a copy, on request.
//
// The structs below are the DLPack ABI (dlpack.h v1.0), declared here from the specification.
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings/gil.h"
#include "bindings/host_view.h"
#include "bindings/tensor.h"
#include "core/allocation.h"
#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/ops.h"
#include "core/pending_access.h"
#include "core/storage.h"

namespace mb::bindings {

namespace {

// ---- the DLPack ABI ----------------------------------------------------------------------------------
constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLMetal = 8;
constexpr uint8_t kDLInt = 0;
constexpr uint8_t kDLUInt = 1;
constexpr uint8_t kDLFloat = 2;
constexpr uint8_t kDLBfloat = 4;
constexpr uint64_t kFlagReadOnly = 1u << 0;
constexpr uint64_t kFlagIsCopied = 1u << 1;

struct DLDevice {
    int32_t device_type;
    int32_t device_id;
};
struct DLDataType {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
};
struct DLTensor {
    void* data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t* shape;
    int64_t* strides;
    uint64_t byte_offset;
};
struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion {
    uint32_t major;
    uint32_t minor;
};
struct DLManagedTensorVersioned {
    DLPackVersion version;
    void* manager_ctx;
    void (*deleter)(DLManagedTensorVersioned* self);
    uint64_t flags;
    DLTensor dl_tensor;
};

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kUsedLegacyName = "used_dltensor";
constexpr const char* kUsedVersionedName = "used_dltensor_versioned";

// -> mb.DLPackError (MetalBackendError, BufferError): the data cannot be exported or imported as DLPack
// (its type, its memory, its strides); BufferError is what the DLPack protocol asks producers to raise.
struct DLPackError : Error {
    using Error::Error;
};

// ---- export ------------------------------------------------------------------------------------------

// Owns everything a capsule points into: the memory (the Storage, which keeps the buffer's memory valid
// even after Buffer.free()), or the copy, and the shape and strides arrays.
struct ExportContext {
    std::shared_ptr<Storage> storage;
    std::vector<uint8_t> copy;
    int64_t shape[kMaxDims] = {};
    int64_t strides[kMaxDims] = {};
    DLManagedTensor legacy{};
    DLManagedTensorVersioned versioned{};
};

bool dl_dtype_of(Type type, DLDataType* out) {
    switch (type) {
        case Type::F32: *out = {kDLFloat, 32, 1}; return true;
        case Type::F16: *out = {kDLFloat, 16, 1}; return true;
        case Type::BF16: *out = {kDLBfloat, 16, 1}; return true;
        case Type::I32: *out = {kDLInt, 32, 1}; return true;
        default: return false;
    }
}

// A dimension of more than one element with stride 0 makes elements alias: writing one writes several
// (numpy's broadcast views are read-only for the same reason).
bool has_aliasing_dims(const Tensor& t) {
    for (int i = 0; i < kMaxDims; ++i) {
        if (t.ne[i] > 1 && t.nb[i] == 0) return true;
    }
    return false;
}

void legacy_capsule_destructor(PyObject* capsule) {
    if (!PyCapsule_IsValid(capsule, kLegacyName)) return;  // consumed: the consumer owns it now
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kLegacyName));
    if (m && m->deleter) m->deleter(m);
}

void versioned_capsule_destructor(PyObject* capsule) {
    if (!PyCapsule_IsValid(capsule, kVersionedName)) return;
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedName));
    if (m && m->deleter) m->deleter(m);
}

// Copies the tensor's elements (any strides, any memory) into `out`, packed in numpy order.
void gather(const Tensor& t, Buffer& buf, std::vector<uint8_t>& out) {
    const size_t es = type_traits(t.type).type_size;
    std::vector<uint8_t> span(t.nbytes());
    buf.get(span.data(), t.data_offset(), span.size());
    out.resize(static_cast<size_t>(t.nelements()) * es);
    if (t.is_contiguous()) {
        std::memcpy(out.data(), span.data(), out.size());
        return;
    }
    uint8_t* o = out.data();
    for (int64_t i3 = 0; i3 < t.ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t.ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t.ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t.ne[0]; ++i0, o += es)
                    std::memcpy(o, span.data() + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3], es);
}

std::pair<int32_t, int32_t> dlpack_device(const Tensor& t) {
    const auto& buf = t.data_buffer();
    if (!buf) fail<InvalidArgumentError>("Tensor.__dlpack_device__", "tensor ", t.describe(), " is not allocated");
    auto storage = buf->storage("Tensor.__dlpack_device__");
    // Device-private memory lives on the GPU; it is exported only as a host copy (copy=True).
    return {storage->host_ptr() ? kDLCPU : kDLMetal, 0};
}

// A (major, minor) or (device type, id) argument: a tuple of two ints. Another type raises TypeError,
// another length or an int beyond 64 bits InvalidArgumentError, each naming the argument.
std::pair<int64_t, int64_t> int_pair(py::handle v, const char* name, const char* what, const char* who) {
    const std::string got = std::string(py::repr(v));
    if (!PyTuple_Check(v.ptr())) {
        throw py::type_error(std::string("[") + who + "] " + name + " must be None or a " + what +
                             " tuple, got " + got);
    }
    if (PyTuple_GET_SIZE(v.ptr()) != 2) fail<InvalidArgumentError>(who, name, " must be a ", what, " tuple, got ", got);
    int64_t out[2];
    for (int i = 0; i < 2; ++i) {
        PyObject* x = PyTuple_GET_ITEM(v.ptr(), i);
        if (!PyLong_Check(x) || PyBool_Check(x)) {
            throw py::type_error(std::string("[") + who + "] " + name + " must hold two integers, got " + got);
        }
        int overflow = 0;
        out[i] = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow) fail<InvalidArgumentError>(who, name, " holds an integer beyond 64 bits: ", got);
    }
    return {out[0], out[1]};
}

bool want_versioned(py::handle max_version, const char* who) {
    if (max_version.is_none()) return false;
    return int_pair(max_version, "max_version", "(major, minor)", who).first >= 1;
}

py::object export_dlpack(const TensorHandle& th, py::handle stream, py::handle max_version, py::handle dl_device,
                         py::handle copy) {
    static const char* who = "Tensor.__dlpack__";
    const Tensor& t = *th;
    if (!stream.is_none()) {
        fail<InvalidArgumentError>(who, "stream must be None for host memory (kDLCPU), got ",
                                   std::string(py::repr(stream)));
    }
    const bool versioned = want_versioned(max_version, who);
    if (!dl_device.is_none()) {
        auto dev = int_pair(dl_device, "dl_device", "(device type, device id)", who);
        if (dev.first != kDLCPU || dev.second != 0) {
            fail<DLPackError>(who, "tensor ", t.describe(), " can be exported to (kDLCPU=1, 0) only, not dl_device=",
                              std::string(py::repr(dl_device)));
        }
    }
    if (!copy.is_none() && !PyBool_Check(copy.ptr())) {
        throw py::type_error(std::string("[") + who + "] copy must be None, True or False, got " +
                             std::string(py::repr(copy)));
    }
    const bool must_copy = copy.is(py::bool_(true));

    DLDataType dtype;
    if (!dl_dtype_of(t.type, &dtype)) {
        fail<DLPackError>(who, "tensor ", t.describe(), " has type ", type_traits(t.type).name,
                          ", which DLPack cannot describe (quantized blocks of ", type_traits(t.type).block_size,
                          " values); export get() (dequantized float32) instead");
    }
    const auto& bufp = t.data_buffer();
    if (!bufp) fail<InvalidArgumentError>(who, "tensor ", t.describe(), " is not allocated");
    Buffer& buf = *bufp;
    auto storage = buf.storage(who);
    const std::string what = "tensor " + t.describe();
    const size_t es = type_traits(t.type).type_size;

    auto ctx = std::make_unique<ExportContext>();
    uint64_t flags = 0;
    void* data = nullptr;
    for (int i = 0; i < t.n_dims; ++i) ctx->shape[i] = t.ne[t.n_dims - 1 - i];
    if (must_copy) {
        check_host_read(buf, who, what, t.data_offset(), t.nbytes());
        {
            ReleasedGil nogil;
            gather(t, buf, ctx->copy);
        }
        int64_t stride = 1;
        for (int i = t.n_dims - 1; i >= 0; --i) {
            ctx->strides[i] = stride;
            stride *= ctx->shape[i];
        }
        data = ctx->copy.data();
        flags |= kFlagIsCopied;
    } else {
        if (!storage->host_ptr()) {
            fail<DLPackError>(who, "tensor ", t.describe(), " lives in buffer '", buf.name(), "' of type '",
                              buf.buffer_type()->name(),
                              "', which the host cannot see; pass copy=True for a host copy");
        }
        check_host_read(buf, who, what, t.data_offset(), t.nbytes());
        for (int i = 0; i < t.n_dims; ++i) {
            size_t nb = t.nb[t.n_dims - 1 - i];
            if (nb % es != 0) {
                fail<DLPackError>(who, "tensor ", t.describe(), " has a byte stride of ", nb,
                                  ", not a multiple of its ",
                                  es, "-byte elements; DLPack strides count elements (pass copy=True)");
            }
            ctx->strides[i] = static_cast<int64_t>(nb / es);
        }
        data = static_cast<uint8_t*>(storage->host_ptr()) + t.data_offset();
        ctx->storage = storage;
        if (has_aliasing_dims(t) || pending_read(buf, t.data_offset(), t.nbytes())) flags |= kFlagReadOnly;
    }

    DLTensor dl{data, {kDLCPU, 0}, t.n_dims, dtype, ctx->shape, ctx->strides, 0};
    ExportContext* raw = ctx.get();
    if (versioned) {
        raw->versioned.version = {1, 0};
        raw->versioned.manager_ctx = raw;
        raw->versioned.deleter = [](DLManagedTensorVersioned* m) {
            delete static_cast<ExportContext*>(m->manager_ctx);
        };
        raw->versioned.flags = flags;
        raw->versioned.dl_tensor = dl;
        PyObject* cap = PyCapsule_New(&raw->versioned, kVersionedName, versioned_capsule_destructor);
        if (!cap) throw py::error_already_set();
        ctx.release();
        return py::reinterpret_steal<py::object>(cap);
    }
    if (flags & kFlagReadOnly) {
        fail<DLPackError>(who, "tensor ", t.describe(), " must not be written (",
                          has_aliasing_dims(t) ? "a stride-0 dimension aliases its elements"
                                               : "queued async work reads it",
                          "), and a legacy DLPack capsule cannot say read-only; ask for max_version=(1, 0)");
    }
    raw->legacy.manager_ctx = raw;
    raw->legacy.deleter = [](DLManagedTensor* m) { delete static_cast<ExportContext*>(m->manager_ctx); };
    raw->legacy.dl_tensor = dl;
    PyObject* cap = PyCapsule_New(&raw->legacy, kLegacyName, legacy_capsule_destructor);
    if (!cap) throw py::error_already_set();
    ctx.release();
    return py::reinterpret_steal<py::object>(cap);
}

// ---- import ------------------------------------------------------------------------------------------

// Holds a consumed DLPack tensor (and its producer object) for as long as a mapped buffer uses its memory;
// the producer's deleter runs when the buffer's storage goes.
struct ImportOwner {
    DLManagedTensor* legacy = nullptr;
    DLManagedTensorVersioned* versioned = nullptr;
    PyObject* producer = nullptr;
    ~ImportOwner() {
        if (gil_forbidden()) return;  // the interpreter is exiting: its objects go with it
        HeldGil gil;
        exit_safe([this]() {
            if (versioned && versioned->deleter) versioned->deleter(versioned);
            if (legacy && legacy->deleter) legacy->deleter(legacy);
            Py_XDECREF(producer);
        });
    }
};

std::string dtype_name(const DLDataType& d) {
    const char* code = d.code == kDLInt ? "int" : d.code == kDLUInt ? "uint" : d.code == kDLFloat ? "float"
                     : d.code == kDLBfloat ? "bfloat" : nullptr;
    std::string out = code ? std::string(code) + std::to_string(d.bits)
                      : "code " + std::to_string(d.code) + " bits " + std::to_string(d.bits);
    if (d.lanes != 1) out += " x" + std::to_string(d.lanes) + " lanes";
    return out;
}

Type type_of(const DLDataType& d, const char* who) {
    if (d.lanes == 1) {
        if (d.code == kDLFloat && d.bits == 32) return Type::F32;
        if (d.code == kDLFloat && d.bits == 16) return Type::F16;
        if (d.code == kDLBfloat && d.bits == 16) return Type::BF16;
        if (d.code == kDLInt && d.bits == 32) return Type::I32;
    }
    fail<DLPackError>(who, "DLPack dtype ", dtype_name(d),
                      " has no tensor type; supported: float32, float16, bfloat16, int32");
}

TensorHandle import_dlpack(py::object obj, std::shared_ptr<Device> device, const std::string& name,
                           std::shared_ptr<Context> into) {
    static const char* who = "from_dlpack";
    if (!py::hasattr(obj, "__dlpack__")) {
        throw py::type_error(std::string("[") + who + "] expected an object with __dlpack__ "
                             "(a numpy array, torch tensor...), got " +
                             std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
    }
    if (py::hasattr(obj, "__dlpack_device__")) {
        auto dev = obj.attr("__dlpack_device__")().cast<std::pair<int64_t, int64_t>>();
        if (dev.first != kDLCPU) {
            fail<DLPackError>(who, "the ", std::string(py::str(py::type::handle_of(obj).attr("__name__"))),
                              " lives on DLPack device type ", dev.first,
                              ", not host memory (kDLCPU=1); move it to the CPU first");
        }
    }
    py::object cap;
    try {
        cap = obj.attr("__dlpack__")(py::arg("max_version") = py::make_tuple(1, 0));
    } catch (py::error_already_set& e) {
        // Producers older than DLPack 1.0 take no max_version.
        if (!e.matches(PyExc_TypeError)) throw;
        cap = obj.attr("__dlpack__")();
    }
    auto owner = std::make_shared<ImportOwner>();
    DLTensor* dl = nullptr;
    bool read_only = false;
    if (PyCapsule_IsValid(cap.ptr(), kVersionedName)) {
        owner->versioned = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap.ptr(), kVersionedName));
        if (PyCapsule_SetName(cap.ptr(), kUsedVersionedName) != 0) throw py::error_already_set();
        if (owner->versioned->version.major != 1) {
            fail<DLPackError>(who, "DLPack major version ", owner->versioned->version.major,
                              " is not supported (1 is)");
        }
        dl = &owner->versioned->dl_tensor;
        read_only = (owner->versioned->flags & kFlagReadOnly) != 0;
    } else if (PyCapsule_IsValid(cap.ptr(), kLegacyName)) {
        owner->legacy = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), kLegacyName));
        if (PyCapsule_SetName(cap.ptr(), kUsedLegacyName) != 0) throw py::error_already_set();
        dl = &owner->legacy->dl_tensor;
    } else {
        throw py::type_error(std::string("[") + who + "] __dlpack__ returned " + std::string(py::repr(cap)) +
                             ", not an unconsumed DLPack capsule");
    }
    // From here on `owner` runs the producer's deleter if anything below throws.
    owner->producer = obj.ptr();
    Py_INCREF(owner->producer);

    if (dl->device.device_type != kDLCPU) {
        fail<DLPackError>(who, "the capsule's memory is on DLPack device type ",
                          dl->device.device_type, ", not kDLCPU (1)");
    }
    if (read_only) {
        fail<DLPackError>(who, "the producer marked its memory read-only, and a tensor's memory is written by compute; "
                          "import a writable copy (e.g. numpy.array(x))");
    }
    const Type type = type_of(dl->dtype, who);
    if (dl->ndim < 1 || dl->ndim > kMaxDims) {
        fail<DLPackError>(who, "a tensor has 1 to ", kMaxDims, " dimensions; the array has ", dl->ndim);
    }
    const size_t es = type_traits(type).type_size;
    int64_t ne[kMaxDims] = {1, 1, 1, 1};
    size_t nb[kMaxDims] = {};
    int64_t shape[kMaxDims] = {}, strides[kMaxDims] = {};
    for (int i = 0; i < dl->ndim; ++i) shape[i] = dl->shape[i];
    // No strides means C-contiguous (DLPack); strides count elements.
    int64_t expect = 1;
    for (int i = dl->ndim - 1; i >= 0; --i) {
        if (shape[i] < 0) fail<DLPackError>(who, "negative dimension ", shape[i]);
        strides[i] = dl->strides ? dl->strides[i] : expect;
        expect *= shape[i];
    }
    bool empty = false;
    size_t span_elems = 1;
    for (int i = 0; i < dl->ndim; ++i) {
        if (shape[i] == 0) empty = true;
        if (strides[i] < 0 && shape[i] > 1) {
            fail<DLPackError>(who, "dimension ", i, " has a negative stride (", strides[i],
                              "); tensors need non-negative strides: import a copy (e.g. numpy.ascontiguousarray(x))");
        }
        if (shape[i] > 1) span_elems += static_cast<size_t>(shape[i] - 1) * static_cast<size_t>(strides[i]);
    }
    if (empty) span_elems = 0;
    // ggml order: dim d is numpy axis ndim-1-d. A dimension of one element has no meaningful stride;
    // it gets the packed one, so layout checks (is_contiguous) see what the data is.
    size_t packed = es;
    for (int d = 0; d < kMaxDims; ++d) {
        const int i = dl->ndim - 1 - d;
        if (i >= 0) ne[d] = shape[i];
        nb[d] = (i >= 0 && shape[i] != 1) ? static_cast<size_t>(strides[i]) * es : packed;
        packed *= static_cast<size_t>(ne[d] > 0 ? ne[d] : 1);
    }
    size_t want[kMaxDims];
    contiguous_strides(type, ne, want);
    bool contiguous = true;
    for (int d = 0; d < kMaxDims; ++d) contiguous = contiguous && (ne[d] == 1 || nb[d] == want[d]);

    void* data = static_cast<uint8_t*>(dl->data) + dl->byte_offset;
    const size_t span = span_elems * es;
    std::shared_ptr<Buffer> buffer;
    {
        ReleasedGil nogil;
        buffer = device->buffer_from_host_ptr(data, span, span, owner);
    }
    owner.reset();  // the buffer's storage holds it now
    // Into the caller's Context (so that several imports, and tensors made there, meet in one op),
    // else a Context of its own.
    auto ctx = into ? std::move(into) : std::make_shared<Context>();
    const std::string tname = name.empty() ? std::string("dlpack") : name;
    if (contiguous || empty) {
        // The array's own shape over the same bytes: a plain (non-view) tensor, the most useful to compute on.
        Tensor* t = ctx->new_tensor(type, ne, dl->ndim, tname);
        place_tensor(*t, buffer, 0);
        return handle(t);
    }
    // Strided: a view with the array's strides over a 1-D tensor spanning every byte it reaches.
    const int64_t root_ne[kMaxDims] = {static_cast<int64_t>(span_elems), 1, 1, 1};
    Tensor* root = ctx->new_tensor(type, root_ne, 1, tname + " (memory)");
    place_tensor(*root, buffer, 0);
    Tensor* v = ops::view(root, ne, nb, dl->ndim, 0);
    v->name = tname;
    return handle(v);
}

}  // namespace

void init_dlpack(py::module_& m) {
    static PyObject* cls = nullptr;
    py::tuple bases = py::make_tuple(m.attr("MetalBackendError"),
                                     py::reinterpret_borrow<py::object>(PyExc_BufferError));
    cls = PyErr_NewExceptionWithDoc("metal_backend.DLPackError",
                                    "Data that DLPack cannot carry: a quantized type, device-private memory without\n"
                                    "copy=True, byte strides that are not whole elements, a read-only or non-CPU\n"
                                    "producer. Also a BufferError, as the DLPack protocol asks.",
                                    bases.ptr(), nullptr);
    if (!cls) throw py::error_already_set();
    m.attr("DLPackError") = py::reinterpret_borrow<py::object>(cls);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const DLPackError& e) {
            PyErr_SetString(cls, e.what());
        }
    });

    auto tensor = py::reinterpret_borrow<py::class_<Tensor, TensorHandle>>(py::type::of<Tensor>());
    tensor
        .def("__dlpack__", &export_dlpack, py::kw_only(), py::arg("stream") = py::none(),
             py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
             "A DLPack capsule over the tensor's memory (zero-copy; host-visible f32/f16/bf16/i32 tensors, any\n"
             "non-negative strides). max_version >= (1, 0) gives a versioned capsule, flagged read-only where\n"
             "the data must not be written (stride-0 dimensions; queued async work reads it); otherwise a legacy\n"
             "one. copy=True exports a packed host copy, also of device-private memory. The capsule keeps the\n"
             "memory alive. Raises DLPackError (a BufferError) for quantized types and private memory without\n"
             "copy=True, PendingWorkError while queued async work writes the tensor.")
        .def("__dlpack_device__", &dlpack_device,
             "(device_type, device_id): (1, 0) = kDLCPU for host-visible memory (CPU buffers; Metal and MetalSim\n"
             "shared and mapped buffers: unified memory); (8, 0) = kDLMetal for device-private memory.");

    m.def("from_dlpack", &import_dlpack, py::arg("obj"), py::arg("device"), py::arg("name") = "",
          py::arg("ctx") = py::none(),
          "A tensor over `obj`'s memory without a copy (a mapped buffer of `device`), in `ctx` (default: a new\n"
          "Context), for any object with\n"
          "__dlpack__ in host memory: float32, float16, bfloat16 or int32, 1 to 4 dims, non-negative strides\n"
          "(a strided array becomes a view). Writes through either side are seen by the other; the tensor keeps\n"
          "the producer alive. Raises DLPackError for other dtypes, read-only or non-CPU producers.");
}

}  // namespace mb::bindings
