// runtime.h over runtime.h: what the device hands a GPU runtime is checked here, once, for real Metal
// and the MSL executor alike, so the checks that CI runs are the ones that guard Apple's GPU. A binding
// or dispatch that a GPU would run with undefined results (an args struct past setBytes' 4 KiB, a
// buffer offset past its end, more threads per threadgroup than the pipeline takes, more threadgroup
// memory than the device has, a blit out of bounds) marks its command buffer failed and is not passed
// on; the failed command buffer is never committed, and reports the first reason as its error, as a
// GPU fault would be reported. Pipelines are cached here by kernel name and constant values.
#pragma once

//
// The limits can be narrowed below the runtime's (MetalDevice's props "max_threads_per_threadgroup"
// and "max_threadgroup_memory"), to see on any machine what an encoder assumes of a larger GPU:
// pipelines then report at most the narrowed thread count, so encoders that size their threadgroups
// from it adapt, and a dispatch that still exceeds a limit fails as it would on that GPU.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "metal/runtime.h"

namespace mb::metal {

// What a dispatch is checked against besides the pipeline's own maximum; 0 leaves that limit at
// the runtime's.
struct DispatchLimits {
    uint32_t max_threads_per_threadgroup = 0;  // caps every pipeline's max_threads_per_threadgroup()
    size_t max_threadgroup_memory = 0;         // below props().max_threadgroup_memory
};

class CheckedRuntime : public Runtime {
public:
    // Applies to pipelines already made and to command buffers made from now on.
    virtual void set_limits(const DispatchLimits& limits) = 0;
};

std::shared_ptr<CheckedRuntime> make_checked_runtime(std::shared_ptr<Runtime> runtime);

}  // namespace mb::metal
