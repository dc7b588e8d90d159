#include "cpu/cpu_device.h"
#include "cpu/kernels/gemm_q8_0.h"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/buffer.h"
#include "core/errors.h"
#include "core/registry.h"
#include "core/types.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_ops.h"
#include "cpu/host_info.h"
#include "cpu/kernels/gemm_bf16.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"

namespace mb {

namespace {

// 64 bytes: one cache line, and the widest vector load (AVX-512) of the kernels.
constexpr size_t kHostAlignment = 64;

const char* isa_name(CpuIsa isa) {
#if defined(MB_SIMD_NEON)
    (void)isa;
    return "neon";
#else
    switch (isa) {
        case CpuIsa::Avx512: return "avx512";
        case CpuIsa::Avx2: return "avx2";
        case CpuIsa::Portable: break;
    }
    return "portable";
#endif
}

// What the quantized-weight dot products use now for their byte products.
const char* q8_dot_name() {
    if (cpu_isa_in_use() == CpuIsa::Portable) return isa_name(CpuIsa::Portable);
    return by_byte_dot(isa_name(CpuIsa::Avx2), "avxvnni", "avx512vnni");
}

size_t page_size() {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : 4096;
}

class HostBufferType final : public BufferType {
public:
    HostBufferType(Device* device, std::string name, size_t alignment)
        : BufferType(device, std::move(name), alignment, SIZE_MAX, /*is_host=*/true) {}

protected:
    std::shared_ptr<Storage> allocate_storage(size_t size) override {
        return std::make_shared<HostStorage>(size, alignment());
    }
};

}  // namespace

CpuDevice::CpuDevice()
    : description_(host_cpu_name()),
      memory_total_(host_memory_total()),
      host_(std::make_shared<HostBufferType>(this, "CPU", kHostAlignment)),
      // Mapped buffers wrap caller memory; allocating one gives page-aligned host memory to wrap.
      mapped_(std::make_shared<HostBufferType>(this, "CPU_Mapped", page_size())) {}

DeviceMemory CpuDevice::memory() const {
    size_t free = host_memory_available();
    return {free < memory_total_ ? free : memory_total_, memory_total_};
}

DeviceCaps CpuDevice::caps() const {
    DeviceCaps c;
    c.async = false;
    c.host_buffer = false;
    c.buffer_from_host_ptr = true;
    c.events = false;
    return c;
}

std::shared_ptr<Buffer> CpuDevice::buffer_from_host_ptr(void* ptr, size_t size, size_t max_tensor_size,
                                                        std::shared_ptr<void> owner) {
    if (ptr == nullptr && size != 0) {
        fail<InvalidArgumentError>("CpuDevice::buffer_from_host_ptr", "null pointer with size ", size);
    }
    if (max_tensor_size > size) {
        fail<InvalidArgumentError>("CpuDevice::buffer_from_host_ptr", "max_tensor_size ", max_tensor_size,
                                   " exceeds the wrapped size ", size);
    }
    auto storage = std::make_shared<BorrowedStorage>(ptr, size, std::move(owner));
    return std::make_shared<Buffer>(mapped_, std::move(storage), mapped_->name());
}

bool CpuDevice::supports_op(const Tensor& node) const { return cpu_supports_op(node); }

std::map<std::string, std::string> CpuDevice::extra_props() const {
    return {{"isa", isa_name(cpu_isa_in_use())},
            {"isa_hardware", isa_name(cpu_isa_hardware())},
            {"max_isa", std::to_string(int(cpu_isa_cap()))},
            {"q8_dot", q8_dot_name()},
            // From this many tokens, int8 products with q8_0 weights take the int8 GEMM (gemm_q8_0.h);
            // 0 where it is not built (the matrix-vector kernels take every count).
            {"int8_gemm_min_tokens", std::to_string(gemm_q8_0_built() ? gemm_q8_0_min_tokens() : 0)},
            // How bf16 x bf16 products are multiplied (gemm_bf16.h): "avx512bf16" (vdpbf16ps) or "f32".
            {"bf16_dot", gemm_bf16_native() ? "avx512bf16" : "f32"},
            // How the mat-vec tiles read their four weight rows (vec_dot.h): "rows" or "interleaved".
            {"vec_tile_order", vec_tile_order_name(vec_tile_order())},
            // core's f16 and quantized-type conversions (types.cpp), under the same cap; no NEON path.
            {"isa_conversions", conversions_isa() == CpuIsa::Avx2 ? "avx2" : "portable"}};
}

void CpuDevice::set_prop(const std::string& key, int64_t value) {
    if (key != "max_isa") {
        Device::set_prop(key, value);
    }
    if (value < int64_t(CpuIsa::Portable) || value > int64_t(CpuIsa::Avx512)) {
        fail<InvalidArgumentError>("CpuDevice::set_prop", "max_isa must be 0 (portable), 1 (avx2) or 2 (avx512), got ",
                                   value);
    }
    set_cpu_isa_cap(CpuIsa(value));
}

std::shared_ptr<Backend> CpuDevice::init_backend(const std::string& params) {
    auto backend = std::make_shared<CpuBackend>(std::static_pointer_cast<CpuDevice>(shared_from_this()));
    backend->apply_params(params);
    return backend;
}

std::shared_ptr<Registry> make_cpu_registry() {
    auto reg = std::make_shared<Registry>();
    reg->name = "CPU";
    reg->devices.push_back(std::make_shared<CpuDevice>());
    return reg;
}

}  // namespace mb
