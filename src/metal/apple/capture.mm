#include "metal/apple/capture.h"

#include <unistd.h>

#include <string>

#include "core/errors.h"
#include "metal/apple/objc_bridge.h"

namespace mb::metal {

void capture_begin(id<MTLDevice> device, int n) {
    pooled([&] {
        MTLCaptureManager* manager = [MTLCaptureManager sharedCaptureManager];
        if (manager.isCapturing) fail<DeviceError>("Metal::capture", "a GPU capture is already running");
        MTLCaptureDescriptor* desc = [MTLCaptureDescriptor new];
        desc.captureObject = device;
        if ([manager supportsDestination:MTLCaptureDestinationGPUTraceDocument]) {
            std::string path = "metal_backend-" + std::to_string(getpid()) + "-" + std::to_string(n) + ".gputrace";
            desc.destination = MTLCaptureDestinationGPUTraceDocument;
            desc.outputURL = [NSURL fileURLWithPath:[NSString stringWithUTF8String:path.c_str()]];
        } else if ([manager supportsDestination:MTLCaptureDestinationDeveloperTools]) {
            desc.destination = MTLCaptureDestinationDeveloperTools;
        } else {
            fail<DeviceError>("Metal::capture", "this process may not capture GPU traces: start it with "
                                                "MTL_CAPTURE_ENABLED=1 in the environment, or under Xcode");
        }
        NSError* error = nil;
        if (![manager startCaptureWithDescriptor:desc error:&error]) {
            fail<DeviceError>("Metal::capture", "cannot start a GPU capture: ", describe(error));
        }
    });
}

void capture_end() {
    pooled([&] {
        MTLCaptureManager* manager = [MTLCaptureManager sharedCaptureManager];
        if (manager.isCapturing) [manager stopCapture];
    });
}

}  // namespace mb::metal
