#include "metal/metal_storage.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/buffer_type.h"
#include "core/errors.h"

namespace mb::metal {

MetalStorage::MetalStorage(std::shared_ptr<Runtime> runtime, std::vector<View> views, void* host, size_t size,
                           StorageMode mode, std::shared_ptr<void> owner)
    : Storage(mode == StorageMode::Private ? nullptr : host, size),
      runtime_(std::move(runtime)),
      views_(std::move(views)),
      mode_(mode),
      owner_(std::move(owner)) {}

DeviceRef MetalStorage::locate(size_t offset, size_t n) const {
    for (const View& v : views_) {
        if (offset >= v.begin && offset + n <= v.end) return {v.buffer.get(), offset + v.delta};
    }
    fail<OutOfRangeError>("MetalStorage::locate", "no GPU view holds bytes [", offset, ", ", offset + n,
                          ") whole; raise max_tensor_size when wrapping host memory");
}

namespace {

// Runs one blit command buffer to completion; a failure is the device's, reported as DeviceError.
void run_blit(Runtime& rt, const std::function<void(CommandBuffer&)>& record) {
    auto cb = rt.command_buffer();
    record(*cb);
    cb->commit();
    cb->wait();
    if (cb->status() != CommandStatus::Completed) fail<DeviceError>("MetalStorage::blit", cb->error());
}

}  // namespace

void MetalStorage::write(size_t offset, const void* src, size_t n) {
    if (mode_ != StorageMode::Private) return Storage::write(offset, src, n);
    if (n == 0) return;
    DeviceRef ref = locate(offset, n);
    auto staging = runtime_->alloc(n, StorageMode::Shared);
    std::memcpy(staging->host_ptr(), src, n);
    run_blit(*runtime_, [&](CommandBuffer& cb) { cb.copy(*staging, 0, *ref.buffer, ref.offset, n); });
}

void MetalStorage::read(size_t offset, void* dst, size_t n) const {
    if (mode_ != StorageMode::Private) return Storage::read(offset, dst, n);
    if (n == 0) return;
    DeviceRef ref = locate(offset, n);
    auto staging = runtime_->alloc(n, StorageMode::Shared);
    run_blit(*runtime_, [&](CommandBuffer& cb) { cb.copy(*ref.buffer, ref.offset, *staging, 0, n); });
    std::memcpy(dst, staging->host_ptr(), n);
}

void MetalStorage::fill(size_t offset, uint8_t value, size_t n) {
    if (mode_ != StorageMode::Private) return Storage::fill(offset, value, n);
    if (n == 0) return;
    DeviceRef ref = locate(offset, n);
    // Upstream passes offset + size as the length here; the range is exactly n bytes.
    run_blit(*runtime_, [&](CommandBuffer& cb) { cb.fill(*ref.buffer, ref.offset, n, value); });
}

DeviceRef device_ref(const Tensor& t) {
    const auto& buf = t.data_buffer();
    if (!buf) fail<InvalidArgumentError>("metal::device_ref", "tensor ", t.describe(), " is not allocated");
    auto storage = buf->storage("metal::device_ref");
    auto* ms = dynamic_cast<MetalStorage*>(storage.get());
    if (!ms) {
        fail<InvalidArgumentError>("metal::device_ref", "tensor ", t.describe(), " is in a '",
                                   buf->buffer_type()->name(), "' buffer, not in Metal memory");
    }
    return ms->locate(t.data_offset(), t.nbytes());
}

}  // namespace mb::metal
