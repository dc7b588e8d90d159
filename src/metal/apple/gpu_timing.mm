#include "metal/apple/gpu_timing.h"

#include <cstdint>
#include <vector>

#include "metal/apple/objc_bridge.h"

namespace mb::metal {

namespace {

// Samples per command buffer (two per dispatch); a command buffer with more dispatches is timed as a
// whole. 16 KiB of samples, well inside what Metal gives a sample buffer.
constexpr NSUInteger kMaxSamples = 2048;

DeviceTiming whole(id<MTLCommandBuffer> cb) {
    return {"Metal GPU time per command buffer", false, {(cb.GPUEndTime - cb.GPUStartTime) * 1e9}};
}

}  // namespace

id<MTLCounterSet> dispatch_timestamps(id<MTLDevice> device) {
    if (![device supportsCounterSampling:MTLCounterSamplingPointAtDispatchBoundary]) return nil;
    for (id<MTLCounterSet> set in device.counterSets) {
        if ([set.name isEqualToString:MTLCommonCounterSetTimestamp]) return set;
    }
    return nil;
}

GpuTimer::GpuTimer(id<MTLDevice> device, id<MTLCounterSet> timestamps) : device_(device) {
    if (!timestamps) return;
    pooled([&] {
        MTLCounterSampleBufferDescriptor* desc = [MTLCounterSampleBufferDescriptor new];
        desc.counterSet = timestamps;
        desc.label = @"metal_backend dispatch times";
        desc.storageMode = MTLStorageModeShared;  // resolveCounterRange: reads shared buffers only
        desc.sampleCount = kMaxSamples;
        NSError* error = nil;
        samples_ = [device newCounterSampleBufferWithDescriptor:desc error:&error];
    });
    if (samples_) [device_ sampleTimestamps:&cpu0_ gpuTimestamp:&gpu0_];
}

void GpuTimer::before_dispatch(id<MTLComputeCommandEncoder> encoder) {
    if (!samples_ || taken_ + 2 > kMaxSamples) {
        complete_ = false;
        return;
    }
    // With a barrier: the work before it is done, so concurrent dispatches do not overlap the span.
    [encoder sampleCountersInBuffer:samples_ atSampleIndex:taken_++ withBarrier:YES];
    open_ = true;
}

void GpuTimer::after_dispatch(id<MTLComputeCommandEncoder> encoder) {
    if (!open_) return;
    [encoder sampleCountersInBuffer:samples_ atSampleIndex:taken_++ withBarrier:YES];
    open_ = false;
}

DeviceTiming GpuTimer::read(id<MTLCommandBuffer> cb) const {
    if (!samples_ || !complete_ || taken_ == 0) return whole(cb);
    DeviceTiming out{"Metal GPU time per dispatch (counter samples)", true, {}};
    pooled([&] {
        MTLTimestamp cpu1 = 0, gpu1 = 0;
        [device_ sampleTimestamps:&cpu1 gpuTimestamp:&gpu1];
        // GPU ticks to CPU nanoseconds, from the two timestamp pairs around the work.
        const double ns_per_tick = gpu1 > gpu0_ && cpu1 > cpu0_ ? double(cpu1 - cpu0_) / double(gpu1 - gpu0_) : 1.0;
        NSData* data = [samples_ resolveCounterRange:NSMakeRange(0, taken_)];
        if (!data || data.length < taken_ * sizeof(MTLCounterResultTimestamp)) return;
        const auto* t = static_cast<const MTLCounterResultTimestamp*>(data.bytes);
        for (NSUInteger i = 0; i + 1 < taken_; i += 2) {
            const uint64_t a = t[i].timestamp, b = t[i + 1].timestamp;
            if (a == MTLCounterErrorValue || b == MTLCounterErrorValue || b < a) {
                out.ns.clear();  // a failed sample: the whole command buffer's time instead
                return;
            }
            out.ns.push_back(double(b - a) * ns_per_tick);
        }
    });
    return out.ns.size() * 2 == taken_ ? out : whole(cb);
}

}  // namespace mb::metal
