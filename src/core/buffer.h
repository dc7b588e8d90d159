// A Buffer: a range of device memory of one BufferType. It checks every access against its size and
// its freed state; the memory itself is a Storage shared with the views handed out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/storage.h"

namespace mb {

class BufferType;

class Buffer {
public:
    Buffer(std::shared_ptr<BufferType> type, std::shared_ptr<Storage> storage, std::string name);
    virtual ~Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    const std::shared_ptr<BufferType>& buffer_type() const { return type_; }
    const std::string& name() const { return name_; }
    size_t size() const { return size_; }
    bool is_host() const;
    bool is_freed() const;

    // The storage, for views and compute. Throws InvalidArgumentError once freed.
    std::shared_ptr<Storage> storage(const char* who) const;
    // Host address of byte 0. Throws if freed or if the host cannot see this memory.
    void* host_ptr(const char* who) const;

    void set(const void* src, size_t offset, size_t n);
    void get(void* dst, size_t offset, size_t n) const;
    void memset(uint8_t value, size_t offset, size_t n);
    void clear(uint8_t value);

    // Drops this buffer's hold on its memory. Views still held keep the memory valid until they go.
    // Freeing twice is harmless; any other use after free raises.
    void free();

    // Keeps the current memory alive for as long as this Buffer object, whether freed or not: for views
    // whose release the buffer cannot observe (Python's memoryview).
    void pin();

    // Throws OutOfRangeError unless [offset, offset + n) lies inside the buffer.
    void check_range(const char* who, size_t offset, size_t n) const;

private:
    std::shared_ptr<BufferType> type_;
    std::string name_;
    size_t size_;
    mutable std::mutex mutex_;
    std::shared_ptr<Storage> storage_;
    std::shared_ptr<Storage> pinned_;
};

}  // namespace mb
