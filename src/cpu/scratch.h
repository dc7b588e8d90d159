// The CPU backend's scratch memory, for one node at a time: 64-byte aligned for vector loads, with
// guard bytes after the size the node's family declared (CpuFamily::work_size). The backend checks
// the guard after each node, so a kernel that writes past its declaration fails at that node, named,
// instead of corrupting the heap (the conformance sentinels cover tensor buffers, not this memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mb {

class Scratch {
public:
    static constexpr size_t kAlign = 64;
    static constexpr size_t kGuard = 64;
    static constexpr uint8_t kGuardByte = 0xA5;

    // A region of `bytes` at a kAlign boundary, followed by kGuard guard bytes; reuses and grows one
    // allocation, so earlier regions are invalid after the call.
    uint8_t* reserve(size_t bytes);
    // Whether the guard after the last reserved region still holds kGuardByte everywhere.
    bool guard_intact() const;

private:
    std::vector<uint8_t> memory_;
    size_t offset_ = 0;  // of the region in memory_
    size_t size_ = 0;    // of the region
};

}  // namespace mb
