#include "metal/apple/residency.h"

#include <mutex>

namespace mb::metal {

#if MB_SDK_HAS_RESIDENCY_SETS

Residency::Residency(id<MTLDevice> device, id<MTLCommandQueue> queue) : queue_(queue) {
    if (@available(macOS 15.0, *)) {
        MTLResidencySetDescriptor* desc = [MTLResidencySetDescriptor new];
        desc.label = @"metal_backend";
        NSError* error = nil;
        set_ = [device newResidencySetWithDescriptor:desc error:&error];
    }
    set_enabled(true);
}

bool Residency::supported() const { return set_ != nil; }

void Residency::add(id<MTLBuffer> buffer) {
    if (@available(macOS 15.0, *)) {
        std::lock_guard<std::mutex> lock(mutex_);
        id<MTLResidencySet> set = set_;
        if (!set || !buffer) return;
        [set addAllocation:buffer];
        [set commit];
    }
}

void Residency::remove(id<MTLBuffer> buffer) {
    if (@available(macOS 15.0, *)) {
        std::lock_guard<std::mutex> lock(mutex_);
        id<MTLResidencySet> set = set_;
        if (!set || !buffer) return;
        [set removeAllocation:buffer];
        [set commit];
    }
}

void Residency::set_enabled(bool on) {
    if (@available(macOS 15.0, *)) {
        std::lock_guard<std::mutex> lock(mutex_);
        id<MTLResidencySet> set = set_;
        if (!set || on == enabled_) return;
        if (on) {
            [queue_ addResidencySet:set];
            [set requestResidency];
        } else {
            [queue_ removeResidencySet:set];
            [set endResidency];
        }
        enabled_ = on;
    }
}

#else

Residency::Residency(id<MTLDevice>, id<MTLCommandQueue>) {}
bool Residency::supported() const { return false; }
void Residency::add(id<MTLBuffer>) {}
void Residency::remove(id<MTLBuffer>) {}
void Residency::set_enabled(bool) {}

#endif

}  // namespace mb::metal
