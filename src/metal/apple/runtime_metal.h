// runtime.h over real Metal (Apple only). An Objective-C++ header: only the .mm files include it.
#pragma once

#import <Metal/Metal.h>

#include <memory>

#include "metal/runtime.h"

namespace mb::metal {

// The runtime of one GPU, with the device's one command queue. Throws DeviceError when the GPU gives
// no command queue.
std::shared_ptr<Runtime> make_metal_runtime(id<MTLDevice> device);

}  // namespace mb::metal
