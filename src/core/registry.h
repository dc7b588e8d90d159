// The device registry (ggml_backend_reg): every registry built into this module, each with its
// devices. Registries and devices are created on first use and live for the rest of the process.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mb {

class Device;

struct Registry {
    std::string name;
    std::vector<std::shared_ptr<Device>> devices;
    std::map<std::string, std::string> features;
};

// "CPU" always; "MetalSim" where built; "Metal" on Apple with a usable GPU.
const std::vector<std::shared_ptr<Registry>>& registries();

// Registry constructors, one per device kind (defined next to each device).
std::shared_ptr<Registry> make_cpu_registry();
std::shared_ptr<Registry> make_metalsim_registry();  // where built (MB_WITH_METALSIM)
std::shared_ptr<Registry> make_metal_registry();     // Apple (MB_WITH_METAL)

}  // namespace mb
