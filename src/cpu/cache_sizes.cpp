#include "cpu/cache_sizes.h"

#include <cstdint>
#include <fstream>
#include <string>

#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace mb {

namespace {

constexpr size_t kDefaultL1 = size_t(32) << 10;
constexpr size_t kDefaultL2 = size_t(512) << 10;

#if defined(__linux__)
std::string read_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// "48K", "2048K", "32M" -> bytes; 0 when unreadable.
size_t parse_size(const std::string& text) {
    size_t value = 0, i = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) value = value * 10 + size_t(text[i] - '0');
    if (i == 0) return 0;
    if (i < text.size() && (text[i] == 'K' || text[i] == 'k')) return value << 10;
    if (i < text.size() && (text[i] == 'M' || text[i] == 'm')) return value << 20;
    return value;
}

CacheSizes read_sizes() {
    CacheSizes c{0, 0, 0};
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index";
    for (int i = 0; i < 16; ++i) {
        const std::string base = dir + std::to_string(i) + "/";
        const std::string level = read_line(base + "level");
        if (level.empty()) break;
        if (read_line(base + "type") == "Instruction") continue;
        const size_t size = parse_size(read_line(base + "size"));
        if (level == "1") c.l1d = size;
        if (level == "2") c.l2 = size;
        if (level == "3" || level == "4") c.l3 = size > c.l3 ? size : c.l3;
    }
    return c;
}
#elif defined(__APPLE__)
size_t sysctl_size(const char* key) {
    int64_t value = 0;
    size_t len = sizeof(value);
    return sysctlbyname(key, &value, &len, nullptr, 0) == 0 && value > 0 ? size_t(value) : 0;
}

CacheSizes read_sizes() {
    // perflevel0: the performance cores, which the pool's threads run on when it matters.
    CacheSizes c{sysctl_size("hw.perflevel0.l1dcachesize"), sysctl_size("hw.perflevel0.l2cachesize"),
                 sysctl_size("hw.l3cachesize")};
    if (c.l1d == 0) c.l1d = sysctl_size("hw.l1dcachesize");
    if (c.l2 == 0) c.l2 = sysctl_size("hw.l2cachesize");
    return c;
}
#else
CacheSizes read_sizes() { return CacheSizes{0, 0, 0}; }
#endif

}  // namespace

const CacheSizes& host_cache_sizes() {
    static const CacheSizes sizes = [] {
        CacheSizes c = read_sizes();
        if (c.l1d == 0) c.l1d = kDefaultL1;
        if (c.l2 == 0) c.l2 = kDefaultL2;
        return c;
    }();
    return sizes;
}

}  // namespace mb
