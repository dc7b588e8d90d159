// One residency set per device holding every buffer (macOS 15). Attached to the queue, it keeps the
// allocations resident between command buffers instead of making them resident at each commit;
// detached (use_residency_sets = 0), Metal tracks residency per command buffer as before macOS 15.
// An Objective-C++ header: only the .mm files include it.
#pragma once

#import <Metal/Metal.h>

#include <mutex>

// The residency-set API is in the SDK from macOS 15 on; an older SDK builds without it.
#if defined(__MAC_OS_X_VERSION_MAX_ALLOWED) && __MAC_OS_X_VERSION_MAX_ALLOWED >= 150000
#define MB_SDK_HAS_RESIDENCY_SETS 1
#else
#define MB_SDK_HAS_RESIDENCY_SETS 0
#endif

namespace mb::metal {

class Residency {
public:
    // A device that refuses (or an OS before macOS 15) gets no residency set; everything still works.
    Residency(id<MTLDevice> device, id<MTLCommandQueue> queue);
    bool supported() const;
    void add(id<MTLBuffer> buffer);
    void remove(id<MTLBuffer> buffer);
    void set_enabled(bool on);

private:
#if MB_SDK_HAS_RESIDENCY_SETS
    std::mutex mutex_;
    id<MTLCommandQueue> queue_;
    id set_ = nil;  // an id<MTLResidencySet>: a type only macOS 15 can have, so its uses sit in @available
    bool enabled_ = false;
#endif
};

}  // namespace mb::metal
