// GPU trace capture of a device's command buffers (MTLCaptureManager). An Objective-C++ header: only
// the .mm files include it.
#pragma once

#import <Metal/Metal.h>

namespace mb::metal {

// Writes metal_backend-<pid>-<n>.gputrace in the current directory when the process may write trace
// documents (MTL_CAPTURE_ENABLED=1), else hands the capture to Xcode when it runs us. Throws
// DeviceError when a capture already runs or the OS refuses one, saying why.
void capture_begin(id<MTLDevice> device, int n);
// Stops a running capture; nothing when none runs.
void capture_end();

}  // namespace mb::metal
