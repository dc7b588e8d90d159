#include "core/buffer.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "core/buffer_type.h"
#include "core/errors.h"

namespace mb {

Buffer::Buffer(std::shared_ptr<BufferType> type, std::shared_ptr<Storage> storage, std::string name)
    : type_(std::move(type)), name_(std::move(name)), size_(storage->size()), storage_(std::move(storage)) {}

bool Buffer::is_host() const { return type_->is_host(); }

bool Buffer::is_freed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return storage_ == nullptr;
}

std::shared_ptr<Storage> Buffer::storage(const char* who) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!storage_) fail<InvalidArgumentError>(who, "buffer '", name_, "' of ", size_, " bytes was freed");
    return storage_;
}

void* Buffer::host_ptr(const char* who) const {
    auto s = storage(who);
    if (!s->host_ptr()) {
        fail<InvalidArgumentError>(who, "buffer '", name_, "' is not visible to the host (buffer type ",
                                   type_->name(), ")");
    }
    return s->host_ptr();
}

void Buffer::check_range(const char* who, size_t offset, size_t n) const {
    if (offset > size_ || n > size_ - offset) {
        fail<OutOfRangeError>(who, "range [", offset, ", ", offset, " + ", n, ") is outside buffer '", name_,
                              "' of ", size_, " bytes");
    }
}

void Buffer::set(const void* src, size_t offset, size_t n) {
    auto s = storage("Buffer::set");
    check_range("Buffer::set", offset, n);
    s->write(offset, src, n);
}

void Buffer::get(void* dst, size_t offset, size_t n) const {
    auto s = storage("Buffer::get");
    check_range("Buffer::get", offset, n);
    s->read(offset, dst, n);
}

void Buffer::memset(uint8_t value, size_t offset, size_t n) {
    auto s = storage("Buffer::memset");
    check_range("Buffer::memset", offset, n);
    s->fill(offset, value, n);
}

void Buffer::clear(uint8_t value) {
    auto s = storage("Buffer::clear");
    s->fill(0, value, size_);
}

void Buffer::pin() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (storage_) pinned_ = storage_;
}

void Buffer::free() {
    std::shared_ptr<Storage> dropped;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        dropped.swap(storage_);
    }
    // `dropped` goes out of scope outside the lock: releasing borrowed memory may run Python code.
}

}  // namespace mb
