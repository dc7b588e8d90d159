// Registry "MetalSim": the Metal device over the MSL executor, so the Metal op encoding and kernels
// run (and are tested) where no Mac exists.
#include <memory>

#include "core/registry.h"
#include "metal/metal_device.h"
#include "metal/sim/runtime_sim.h"

namespace mb {

std::shared_ptr<Registry> make_metalsim_registry() {
    auto reg = std::make_shared<Registry>();
    reg->name = "MetalSim";
    reg->devices.push_back(std::make_shared<metal::MetalDevice>("MetalSim", metal::make_sim_runtime()));
    reg->features = {{"EXECUTOR", "fibers"}};
    return reg;
}

}  // namespace mb
