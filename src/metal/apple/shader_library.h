// The shader library on one GPU: every kernel of shaders/*.metal, compiled from the embedded source at
// first use (so the Command Line Tools are enough to build the module: no offline Metal compiler), and
// pipeline states of its kernels specialised with function constants. An Objective-C++ header: only
// the .mm files include it.
#pragma once

#import <Metal/Metal.h>

#include <string>
#include <vector>

#include "metal/runtime.h"

namespace mb::metal {

class ShaderLibrary {
public:
    explicit ShaderLibrary(id<MTLDevice> device) : device_(device) {}
    // One call at a time (the runtime's pipelines are cached above runtime.h, asked for one by one).
    // Throws DeviceError when the library does not compile or the GPU cannot build the kernel,
    // UnsupportedOpError for an unknown kernel, InvalidArgumentError for constants it does not take.
    id<MTLComputePipelineState> pipeline_state(const std::string& name, const std::vector<FunctionConstant>& constants);

private:
    id<MTLLibrary> library();

    id<MTLDevice> device_;
    id<MTLLibrary> library_ = nil;
};

}  // namespace mb::metal
