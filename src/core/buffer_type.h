// A BufferType: a kind of memory of one device (ggml_backend_buffer_type). It validates requests and
// leaves the allocation itself to the device's storage.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "core/storage.h"

namespace mb {

class Buffer;
class Device;
struct Tensor;

class BufferType : public std::enable_shared_from_this<BufferType> {
public:
    // `device` outlives every buffer type: devices live as long as the process (see registry.h).
    BufferType(Device* device, std::string name, size_t alignment, size_t max_size, bool is_host)
        : device_(device), name_(std::move(name)), alignment_(alignment), max_size_(max_size), is_host_(is_host) {}
    virtual ~BufferType() = default;

    const std::string& name() const { return name_; }
    size_t alignment() const { return alignment_; }
    virtual size_t max_size() const { return max_size_; }
    bool is_host() const { return is_host_; }
    Device& device() const { return *device_; }

    // Bytes a tensor needs in a buffer of this type: its data plus any scratch the device's kernels
    // keep behind it (Metal's MUL_MAT_ID and FLASH_ATTN_EXT). Allocators call this.
    virtual size_t alloc_size(const Tensor& t) const;

    // Allocates `size` bytes (0 is legal). Throws OutOfMemoryError, with the sizes involved, when the
    // request exceeds max_size or the device's memory, or when the allocation itself fails.
    std::shared_ptr<Buffer> alloc(size_t size);

protected:
    virtual std::shared_ptr<Storage> allocate_storage(size_t size) = 0;

private:
    Device* device_;
    std::string name_;
    size_t alignment_;
    size_t max_size_;
    bool is_host_;
};

}  // namespace mb
