// The shader library on one GPU: one MTLLibrary per shader family (shaders/<family>.metal), each compiled
// from the embedded source when first needed (so the Command Line Tools are enough to build the module:
// no offline Metal compiler), several at once in parallel, and pipeline states of their kernels
// specialised with function constants. A family the compiler rejects keeps the compiler's message and
// costs only its own kernels. An Objective-C++ header: only the .mm files include it.
#pragma once

#import <Metal/Metal.h>

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "metal/runtime.h"

namespace mb::metal {

class ShaderLibrary {
public:
    explicit ShaderLibrary(id<MTLDevice> device);

    std::vector<std::string> families() const;
    // Compiles each of `families` not compiled before as a library of its own, all at once (one block
    // each on a global dispatch queue), and returns when all are done; `done` is called per family
    // from the thread that compiled it. Throws InvalidArgumentError for an unknown family.
    void compile(const std::vector<std::string>& families, const std::function<void(const FamilyResult&)>& done);

    // A pipeline of a kernel of a compiled family; one call at a time (the runtime's pipelines are
    // cached above runtime.h, asked for one by one). Throws DeviceError when the GPU cannot build the
    // kernel, UnsupportedOpError for a kernel in no compiled family, InvalidArgumentError for
    // constants it does not take.
    id<MTLComputePipelineState> pipeline_state(const std::string& name, const std::vector<FunctionConstant>& constants);

private:
    struct Family {
        std::string name;
        const char* source = nullptr;
        bool done = false;  // compiled or rejected
        id<MTLLibrary> library = nil;
        std::string error;
        double compile_ms = 0;
    };
    // Compiles families_[i] (on a dispatch queue's thread) and records how it went.
    FamilyResult compile_one(size_t i);

    id<MTLDevice> device_;
    mutable std::mutex mutex_;
    std::vector<Family> families_;
    std::map<std::string, size_t> kernel_family_;  // kernels of the compiled families -> index
};

}  // namespace mb::metal
