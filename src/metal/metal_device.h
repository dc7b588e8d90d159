// A Metal device (ggml's Metal device and its three buffer types) over any runtime.h: real Metal as
// registry "Metal", the MSL executor as registry "MetalSim". Props come from the runtime and can be
// narrowed from Python (to test fallbacks) but never widened past what the runtime has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer_type.h"
#include "core/device.h"
#include "metal/checked_runtime.h"
#include "metal/runtime.h"
#include "metal/shader_families.h"

namespace mb::metal {

class MetalDevice final : public Device {
public:
    MetalDevice(std::string name, std::shared_ptr<Runtime> runtime);

    std::string name() const override { return name_; }
    std::string description() const override { return runtime_->props().name; }
    DeviceType type() const override { return DeviceType::GPU; }
    DeviceMemory memory() const override;
    DeviceCaps caps() const override;
    std::map<std::string, std::string> extra_props() const override;
    void set_prop(const std::string& key, int64_t value) override;
    void set_prop_text(const std::string& key, const std::string& value) override;
    std::vector<std::pair<std::string, std::string>> shader_families(bool compile_all) override;

    std::shared_ptr<BufferType> default_buffer_type() override;
    std::vector<std::shared_ptr<BufferType>> buffer_types() override { return {shared_, private_, mapped_}; }
    bool supports_buft(const BufferType& buft) const override;
    bool supports_op(const Tensor& node) const override;
    bool offload_op(const Tensor& node) const override;

    std::shared_ptr<Buffer> buffer_from_host_ptr(void* ptr, size_t size, size_t max_tensor_size,
                                                 std::shared_ptr<void> owner) override;
    std::shared_ptr<Backend> init_backend(const std::string& params) override;

    // A snapshot of the props in force (the runtime's, as narrowed by set_prop).
    RuntimeProps props() const;
    bool supports_family(int family) const;
    // The device's first use (a backend made, an op asked about): starts the shader families
    // compiling as the "shader_compile" prop says.
    void first_use() const { families_->first_use(); }
    // The state of the shader family that runs `op` ("compiled in N ms", "failed: <message>", ...).
    std::string shader_family_state(Op op) const;
    Runtime& runtime() const { return *runtime_; }
    std::shared_ptr<Runtime> runtime_ptr() const { return runtime_; }

private:
    std::string name_;
    std::shared_ptr<CheckedRuntime> runtime_;
    std::unique_ptr<ShaderFamilies> families_;  // the state of each shader family's library
    std::string rejected_families_;            // MetalSim's reject_shader_families, as set
    int64_t compile_us_per_kernel_ = 0;        // MetalSim's modeled compile time
    std::string fault_kernels_;                // MetalSim's fault_kernels, as set
    std::string profile_;                      // MetalSim's device profile ("" its own)
    mutable std::mutex mutex_;
    RuntimeProps props_;
    bool use_shared_buffers_;
    bool use_residency_sets_;
    int64_t offload_min_batch_ = 32;
    uint32_t max_threads_per_threadgroup_;
    std::shared_ptr<BufferType> shared_, private_, mapped_;
};

}  // namespace mb::metal
