#include "cpu/host_info.h"

#include <sched.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#if defined(__APPLE__)
#include <mach/mach.h>
#include <sys/sysctl.h>
#endif

namespace mb {

#if defined(__APPLE__)
static std::string sysctl_string(const char* key) {
    size_t len = 0;
    if (sysctlbyname(key, nullptr, &len, nullptr, 0) != 0 || len == 0) return {};
    std::string out(len, '\0');
    if (sysctlbyname(key, out.data(), &len, nullptr, 0) != 0) return {};
    out.resize(out.find('\0') == std::string::npos ? len : out.find('\0'));
    return out;
}
#else
// Value of the first "key : value" line of a /proc file, or "" when absent.
static std::string proc_field(const char* path, const std::string& key) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, key.size(), key) != 0) continue;
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        auto start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? std::string() : line.substr(start);
    }
    return {};
}
#endif

std::string host_cpu_name() {
#if defined(__APPLE__)
    std::string name = sysctl_string("machdep.cpu.brand_string");
#else
    std::string name = proc_field("/proc/cpuinfo", "model name");
#endif
    return name.empty() ? std::string("CPU") : name;
}

size_t host_memory_total() {
#if defined(__APPLE__)
    uint64_t bytes = 0;
    size_t len = sizeof(bytes);
    if (sysctlbyname("hw.memsize", &bytes, &len, nullptr, 0) == 0) return static_cast<size_t>(bytes);
    return 0;
#else
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
#endif
}

size_t host_memory_available() {
#if defined(__APPLE__)
    vm_statistics64_data_t stats;
    mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
    if (host_statistics64(mach_host_self(), HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&stats), &count) !=
        KERN_SUCCESS) {
        return host_memory_total();
    }
    return static_cast<size_t>(stats.free_count + stats.inactive_count) * static_cast<size_t>(vm_page_size);
#else
    // MemAvailable counts reclaimable cache, which is what an allocation can really get.
    std::string kb = proc_field("/proc/meminfo", "MemAvailable");
    if (kb.empty()) return host_memory_total();
    return static_cast<size_t>(std::stoull(kb)) * 1024;
#endif
}

int host_core_count() {
#if defined(__linux__)
    // The affinity mask honours container CPU limits that hardware_concurrency() ignores.
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace mb
