#include "core/device.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/buffer_type.h"
#include "core/errors.h"
#include "core/tensor.h"

namespace mb {

bool Device::supports_buft(const BufferType& buft) const { return &buft.device() == this; }

void Device::set_prop(const std::string& key, int64_t) {
    fail<InvalidArgumentError>("Device::set_prop", "device '", name(), "' has no settable prop '", key, "'");
}

void Device::set_prop_text(const std::string& key, const std::string&) {
    fail<InvalidArgumentError>("Device::set_prop", "device '", name(), "' has no settable text prop '", key, "'");
}

std::shared_ptr<Buffer> Device::buffer_from_host_ptr(void*, size_t, size_t, std::shared_ptr<void>) {
    fail<UnsupportedOpError>("Device::buffer_from_host_ptr", "device '", name(), "' cannot wrap host memory");
}

void fail_cannot_run(const char* who, const std::string& device, const Tensor& node) {
    std::string srcs;
    for (const Tensor* s : node.src) {
        if (s) srcs += (srcs.empty() ? "" : ", ") + s->describe();
    }
    fail<UnsupportedOpError>(who, device, " cannot run ", op_name(node.op),
                             " -> ", node.describe(), " from (", srcs, ")");
}

}  // namespace mb
