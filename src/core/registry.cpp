#include "core/registry.h"

#include <memory>
#include <mutex>
#include <vector>

namespace mb {

const std::vector<std::shared_ptr<Registry>>& registries() {
    // Never destroyed: devices must outlive every buffer, and buffers can live until interpreter exit.
    static auto* list = [] {
        auto* l = new std::vector<std::shared_ptr<Registry>>();
        l->push_back(make_cpu_registry());
#if defined(MB_WITH_METAL)
        l->push_back(make_metal_registry());
#endif
#if defined(MB_WITH_METALSIM)
        l->push_back(make_metalsim_registry());
#endif
        return l;
    }();
    return *list;
}

}  // namespace mb
