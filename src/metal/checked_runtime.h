// runtime.h over runtime.h: what the device hands a GPU runtime is checked here, once, for real Metal
// and the MSL executor alike, so the checks that CI runs are the ones that guard Apple's GPU. A binding
// or dispatch that a GPU would run with undefined results (an args struct past setBytes' 4 KiB, a
// buffer offset past its end, more threads per threadgroup than the pipeline takes, more threadgroup
// memory than the device has, a blit out of bounds) marks its command buffer failed and is not passed
// on; the failed command buffer is never committed, and reports the first reason as its error, as a
// GPU fault would be reported. Pipelines are cached here by kernel name and constant values.
#pragma once

#include <memory>

#include "metal/runtime.h"

namespace mb::metal {

std::shared_ptr<Runtime> make_checked_runtime(std::shared_ptr<Runtime> runtime);

}  // namespace mb::metal
