// The GPU's own time of a command buffer's work (CommandBuffer::time_dispatches): timestamp counters
// sampled before and after each dispatch where the GPU samples at dispatch boundaries, converted to
// nanoseconds against CPU/GPU timestamp pairs taken before encoding and after completion; elsewhere
// (Apple silicon samples no dispatch boundaries) GPUEndTime - GPUStartTime of the command buffer.
// An Objective-C++ header: only the .mm files include it.
#pragma once

#import <Metal/Metal.h>

#include "metal/runtime.h"

namespace mb::metal {

// The device's timestamp counter set when it samples counters at dispatch boundaries, else nil.
id<MTLCounterSet> dispatch_timestamps(id<MTLDevice> device);

class GpuTimer {
public:
    // `timestamps` from dispatch_timestamps(); nil (or a sample buffer the device refuses) times the
    // command buffer as a whole.
    GpuTimer(id<MTLDevice> device, id<MTLCounterSet> timestamps);
    // Around each dispatch of a compute encoder of the timed command buffer.
    void before_dispatch(id<MTLComputeCommandEncoder> encoder);
    void after_dispatch(id<MTLComputeCommandEncoder> encoder);
    // After the command buffer completed.
    DeviceTiming read(id<MTLCommandBuffer> cb) const;

private:
    id<MTLDevice> device_;
    id<MTLCounterSampleBuffer> samples_ = nil;
    NSUInteger taken_ = 0;    // samples taken: two per dispatch
    bool open_ = false;       // a dispatch's first sample is taken and its second is due
    bool complete_ = true;    // every dispatch has its two samples
    MTLTimestamp cpu0_ = 0, gpu0_ = 0;
};

}  // namespace mb::metal
