// Registry "Metal" (Apple only): the Metal device over the system's default GPU, with the shader
// library built into the module. Headless and virtualised Macs may have no GPU: the registry is then
// present with no devices, so the CPU and everything else stay usable.
#include <memory>

#include "core/registry.h"
#include "core/errors.h"
#include "metal/metal_device.h"
#include "metal/apple/runtime_metal.h"

namespace mb {

std::shared_ptr<Registry> make_metal_registry() {
    auto reg = std::make_shared<Registry>();
    reg->name = "Metal";
    reg->features = {{"EMBED_LIBRARY", "1"}};
    @autoreleasepool {
        id<MTLDevice> device = MTLCreateSystemDefaultDevice();
        if (device) {
            // Registries are made once per process, on first use; a GPU that fails here is left out
            // with the reason, rather than making every registry unreachable.
            try {
                reg->devices.push_back(
                    std::make_shared<metal::MetalDevice>("Metal", metal::make_metal_runtime(device)));
            } catch (const Error& e) {
                reg->features["DEVICE_ERROR"] = e.what();
            }
        }
    }
    return reg;
}

}  // namespace mb
