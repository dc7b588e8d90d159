// Facts about the host machine that the CPU device reports: its CPU's name, memory and core count.
#pragma once

#include <cstddef>
#include <string>

namespace mb {

std::string host_cpu_name();
size_t host_memory_total();
size_t host_memory_available();
int host_core_count();

}  // namespace mb
