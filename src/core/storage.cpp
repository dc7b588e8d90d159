#include "core/storage.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/errors.h"

namespace mb {

void Storage::write(size_t offset, const void* src, size_t n) {
    if (n) std::memcpy(static_cast<uint8_t*>(host_ptr_) + offset, src, n);
}

void Storage::read(size_t offset, void* dst, size_t n) const {
    if (n) std::memcpy(dst, static_cast<const uint8_t*>(host_ptr_) + offset, n);
}

void Storage::fill(size_t offset, uint8_t value, size_t n) {
    if (n) std::memset(static_cast<uint8_t*>(host_ptr_) + offset, value, n);
}

static void* aligned_host_alloc(size_t size, size_t alignment) {
    // Round up so that vector kernels may read a whole last vector; size 0 is a legal buffer.
    size_t padded = (size + alignment - 1) / alignment * alignment;
    if (padded < size) fail<OutOfMemoryError>("HostStorage", "size overflows (size=", size, ")");
    if (padded == 0) padded = alignment;
    void* p = nullptr;
    if (posix_memalign(&p, alignment, padded) != 0 || p == nullptr) {
        fail<OutOfMemoryError>("HostStorage", "cannot allocate ", size, " bytes (alignment ", alignment, ")");
    }
    return p;
}

HostStorage::HostStorage(size_t size, size_t alignment)
    : Storage(aligned_host_alloc(size, alignment), size) {}

HostStorage::~HostStorage() { std::free(host_ptr()); }

}  // namespace mb
