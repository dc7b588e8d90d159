// The host's data cache sizes as the OS reports them, for the kernels' cache blocking.
#pragma once

#include <cstddef>

namespace mb {

struct CacheSizes {
    size_t l1d;  // per core
    size_t l2;   // per core (or per cluster where the OS reports only that)
    size_t l3;   // the largest shared level, 0 when there is none
};

// Read once, from /sys/devices/system/cpu/cpu0/cache on Linux and sysctl on macOS; a level the OS
// does not report takes a common size (32 KiB L1, 512 KiB L2, no L3).
const CacheSizes& host_cache_sizes();

}  // namespace mb
