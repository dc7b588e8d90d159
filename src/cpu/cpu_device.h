// The CPU device: host memory, and backends that compute graphs on a thread pool. It is the default
// device where no GPU exists and the reference every other device is compared against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer_type.h"
#include "core/device.h"

namespace mb {

class CpuDevice final : public Device {
public:
    CpuDevice();

    std::string name() const override { return "CPU"; }
    std::string description() const override { return description_; }
    DeviceType type() const override { return DeviceType::CPU; }
    DeviceMemory memory() const override;
    DeviceCaps caps() const override;

    std::shared_ptr<BufferType> default_buffer_type() override { return host_; }
    std::vector<std::shared_ptr<BufferType>> buffer_types() override { return {host_, mapped_}; }

    // The CPU computes on any memory the host can address.
    bool supports_buft(const BufferType& buft) const override { return buft.is_host(); }
    bool supports_op(const Tensor& node) const override;

    // "isa": the SIMD set the kernels use now ("avx512", "avx2", "portable"; "neon" on arm64),
    // "isa_hardware": what the CPU offers, "max_isa": the process-wide cap (CpuIsa number),
    // "isa_conversions": what core's f16/quantized conversions use now ("avx2" or "portable").
    std::map<std::string, std::string> extra_props() const override;
    // "max_isa" = 0 (portable), 1 (avx2) or 2 (avx512): caps the kernels of every CPU backend in the
    // process, and core's conversions, from the next compute on (to compare paths, or to rule one out).
    void set_prop(const std::string& key, int64_t value) override;

    std::shared_ptr<Buffer> buffer_from_host_ptr(void* ptr, size_t size, size_t max_tensor_size,
                                                 std::shared_ptr<void> owner) override;
    std::shared_ptr<Backend> init_backend(const std::string& params) override;

private:
    std::string description_;
    size_t memory_total_;
    std::shared_ptr<BufferType> host_;
    std::shared_ptr<BufferType> mapped_;
};

}  // namespace mb
