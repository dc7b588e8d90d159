#include "cpu/scratch.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace mb {

uint8_t* Scratch::reserve(size_t bytes) {
    const size_t need = bytes + kAlign + kGuard;
    if (need > memory_.size()) {
        memory_.clear();
        memory_.shrink_to_fit();
        memory_.resize(need);
    }
    const auto base = reinterpret_cast<uintptr_t>(memory_.data());
    offset_ = (kAlign - base % kAlign) % kAlign;
    size_ = bytes;
    std::memset(memory_.data() + offset_ + size_, kGuardByte, kGuard);
    return memory_.data() + offset_;
}

bool Scratch::guard_intact() const {
    if (memory_.empty()) return true;
    const uint8_t* guard = memory_.data() + offset_ + size_;
    return std::all_of(guard, guard + kGuard, [](uint8_t b) { return b == kGuardByte; });
}

}  // namespace mb
