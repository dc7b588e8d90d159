// The native tests' one check harness (tests/native/*.cpp).
//
// CHECK(cond, fmt, ...) counts a check and, when cond is false, prints file:line, the condition and a
// printf-style message (the first kPrinted failures; the rest are only counted). check_report() prints
// the one summary line that tests/native/test_native.py reads, "NAME: N checks, M failed", and gives
// the exit code CTest judges by.
#pragma once

#include <cstdio>
#include <string>

namespace mb_check {

inline int checks = 0;
inline int failures = 0;
constexpr int kPrinted = 40;

inline void fail_header(const char* file, int line, const char* cond) {
    std::printf("FAIL %s:%d: %s: ", file, line, cond);
}

// For checks whose message is built as a string.
inline void check(bool ok, const std::string& what) {
    ++checks;
    if (!ok && ++failures <= kPrinted) std::printf("FAIL: %s\n", what.c_str());
}

inline int check_report(const char* name) {
    std::printf("%s: %d checks, %d failed\n", name, checks, failures);
    return failures == 0 ? 0 : 1;
}

}  // namespace mb_check

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        ++mb_check::checks;                                                 \
        if (!(cond) && ++mb_check::failures <= mb_check::kPrinted) {        \
            mb_check::fail_header(__FILE__, __LINE__, #cond);               \
            std::printf(__VA_ARGS__);                                       \
            std::printf("\n");                                              \
        }                                                                   \
    } while (0)
