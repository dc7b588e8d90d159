// The CPU backend's guarded scratch (src/cpu/scratch.h): aligned regions, a guard that a write past
// the declared size breaks, one allocation reused and grown.
#include <cstdint>
#include <cstring>

#include "check.h"
#include "cpu/scratch.h"

int main() {
    mb::Scratch s;
    CHECK(s.guard_intact(), "a scratch never reserved has nothing to check");
    for (size_t bytes : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(1000), size_t(1) << 20, size_t(5)}) {
        uint8_t* p = s.reserve(bytes);
        CHECK(reinterpret_cast<uintptr_t>(p) % mb::Scratch::kAlign == 0, "region of %zu bytes not aligned", bytes);
        std::memset(p, 0x5A, bytes);  // the whole declared region is the kernel's
        CHECK(s.guard_intact(), "writing all %zu declared bytes broke the guard", bytes);
        p[bytes] = 0;  // one byte past
        CHECK(!s.guard_intact(), "a write one byte past %zu bytes went unseen", bytes);
        s.reserve(bytes);
        CHECK(s.guard_intact(), "reserving again did not restore the guard (%zu bytes)", bytes);
        p = s.reserve(bytes);
        p[bytes + mb::Scratch::kGuard - 1] = 0;  // the guard's last byte
        CHECK(!s.guard_intact(), "a write at the guard's end went unseen (%zu bytes)", bytes);
    }
    return mb_check::check_report("scratch");
}
