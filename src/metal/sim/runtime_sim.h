// runtime.h over the MSL executor: the simulated Metal device's GPU. Buffers are host memory (Private
// ones are not handed to the host), command buffers run in commit order on one queue thread, and
// dispatches run the .metal kernels compiled as C++.
#pragma once

#include <memory>

#include "metal/runtime.h"

namespace mb::metal {

std::shared_ptr<Runtime> make_sim_runtime();

}  // namespace mb::metal
