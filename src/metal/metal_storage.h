// The memory of a Metal buffer: one GPU buffer, or for a large mapped region several overlapping
// views of it. Shared and mapped memory is host-visible (set/get are plain memcpy, not ordered
// against the GPU, as upstream); private memory is reached through blits that wait.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/storage.h"
#include "metal/ops/op_encoder.h"
#include "metal/runtime.h"

namespace mb::metal {

class MetalStorage final : public Storage {
public:
    // Storage offset o of a view lives at buffer offset o + delta, for o in [begin, end).
    struct View {
        std::shared_ptr<RtBuffer> buffer;
        size_t begin;
        size_t end;
        size_t delta;
    };

    MetalStorage(std::shared_ptr<Runtime> runtime, std::vector<View> views, void* host, size_t size, StorageMode mode,
                 std::shared_ptr<void> owner = nullptr);

    StorageMode mode() const { return mode_; }
    const std::vector<View>& views() const { return views_; }
    // The first view holding [offset, offset + n) whole. Throws OutOfRangeError if none does.
    DeviceRef locate(size_t offset, size_t n) const;

    void write(size_t offset, const void* src, size_t n) override;
    void read(size_t offset, void* dst, size_t n) const override;
    void fill(size_t offset, uint8_t value, size_t n) override;

private:
    std::shared_ptr<Runtime> runtime_;
    std::vector<View> views_;
    StorageMode mode_;
    std::shared_ptr<void> owner_;
};

}  // namespace mb::metal
