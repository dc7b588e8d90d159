// The memory behind a Buffer. A Storage is shared by the Buffer and by every host view handed out
// (numpy arrays, memoryviews, tensors computing on it), so freeing a Buffer never pulls memory out
// from under a view the user still holds: the memory goes when the last holder does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "core/pending_access.h"

namespace mb {

class Storage {
public:
    virtual ~Storage() = default;

    size_t size() const { return size_; }
    // nullptr when the host cannot address this memory (GPU-private storage).
    void* host_ptr() const { return host_ptr_; }

    // Copies in/out and fills. Callers have bounds-checked the range. Host storage does plain memory
    // operations; device storage orders them after work already committed to the device.
    virtual void write(size_t offset, const void* src, size_t n);
    virtual void read(size_t offset, void* dst, size_t n) const;
    virtual void fill(size_t offset, uint8_t value, size_t n);

    // Queued device work on these bytes (see pending_access.h).
    PendingAccess& pending() const { return pending_; }

protected:
    Storage(void* host_ptr, size_t size) : host_ptr_(host_ptr), size_(size) {}

private:
    void* host_ptr_;
    size_t size_;
    mutable PendingAccess pending_;
};

// Host memory this library allocated (aligned); released when the storage goes.
class HostStorage final : public Storage {
public:
    // Throws OutOfMemoryError when the allocation fails.
    HostStorage(size_t size, size_t alignment);
    ~HostStorage() override;
    HostStorage(const HostStorage&) = delete;
    HostStorage& operator=(const HostStorage&) = delete;
};

// Memory someone else owns (a numpy array, bytearray, mmap...), used in place. `owner` keeps that
// memory alive and pinned for as long as this storage exists.
class BorrowedStorage final : public Storage {
public:
    BorrowedStorage(void* ptr, size_t size, std::shared_ptr<void> owner)
        : Storage(ptr, size), owner_(std::move(owner)) {}

private:
    std::shared_ptr<void> owner_;
};

}  // namespace mb
