// A Device (ggml_backend_device): one piece of hardware with its memory, its buffer types, and the
// backends that compute on it. Devices are created once by their registry and live for the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mb {

class Backend;
class Buffer;
class BufferType;
struct Tensor;

enum class DeviceType { CPU, GPU, ACCEL };

struct DeviceCaps {
    bool async = false;                 // asynchronous compute and tensor copies
    bool host_buffer = false;           // has a pinned host buffer type
    bool buffer_from_host_ptr = false;  // can wrap caller memory without copy
    bool events = false;                // cross-backend synchronisation events
};

struct DeviceMemory {
    size_t free = 0;
    size_t total = 0;
};

class Device : public std::enable_shared_from_this<Device> {
public:
    virtual ~Device() = default;

    virtual std::string name() const = 0;
    virtual std::string description() const = 0;
    virtual DeviceType type() const = 0;
    virtual DeviceMemory memory() const = 0;
    virtual DeviceCaps caps() const = 0;
    // Device-specific facts beyond the common props (GPU family, simdgroup support...), as strings.
    virtual std::map<std::string, std::string> extra_props() const { return {}; }
    // Changes one of those facts where the device allows it (e.g. turning simdgroup support off to
    // test fallbacks). Throws InvalidArgumentError for unknown or read-only keys and bad values.
    virtual void set_prop(const std::string& key, int64_t value);
    // The same for a prop whose value is text (e.g. a list of names).
    virtual void set_prop_text(const std::string& key, const std::string& value);
    // Devices that compile shaders (Metal): each shader family and its state ("not compiled",
    // "compiling", "compiled in N ms", "failed: <the compiler's message>"), in name order; with
    // `compile_all`, every family is compiled (or waited for) first. Empty elsewhere.
    virtual std::vector<std::pair<std::string, std::string>> shader_families(bool compile_all) { return {}; }

    virtual std::shared_ptr<BufferType> default_buffer_type() = 0;
    virtual std::vector<std::shared_ptr<BufferType>> buffer_types() = 0;
    virtual bool supports_buft(const BufferType& buft) const;
    // Whether a backend of this device can compute `node` (its op with these types and layouts).
    // Exact: a device never claims a node it cannot run.
    virtual bool supports_op(const Tensor& node) const = 0;
    // Whether it pays to run `node` here even though its weights live in host memory (ggml's
    // offload_op: large batches only).
    virtual bool offload_op(const Tensor& node) const { return false; }

    // Wraps caller memory [ptr, ptr + size) without copy. `owner` keeps that memory alive for as long
    // as the returned buffer's storage lives. Throws UnsupportedOpError where caps() says no.
    virtual std::shared_ptr<Buffer> buffer_from_host_ptr(void* ptr, size_t size, size_t max_tensor_size,
                                                         std::shared_ptr<void> owner);

    // `params`: comma-separated key=value options (e.g. "n_threads=4"); unknown keys raise.
    virtual std::shared_ptr<Backend> init_backend(const std::string& params) = 0;
};

// Raises UnsupportedOpError for a node `device` does not run, naming the op, the node and its sources.
[[noreturn]] void fail_cannot_run(const char* who, const std::string& device, const Tensor& node);

}  // namespace mb
