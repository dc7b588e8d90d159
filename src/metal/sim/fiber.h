// Cooperative execution contexts for the simulated GPU threads: a stack with a guard
// page and a context switch. On x86-64 and AArch64 the switch is a few instructions of
// assembly that save the callee-saved registers (swapcontext also saves the signal mask
// with a system call, which made it ~20x slower); elsewhere ucontext is the fallback.
#pragma once

#include <cstddef>

#if !defined(MB_SIM_FIBER_UCONTEXT) && !defined(__x86_64__) && !defined(__aarch64__)
#define MB_SIM_FIBER_UCONTEXT 1
#endif

#if defined(__SANITIZE_ADDRESS__)
#define MB_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MB_SIM_ASAN 1
#endif
#endif

#if defined(MB_SIM_FIBER_UCONTEXT)
#if defined(__APPLE__) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700
#endif
#include <ucontext.h>
#endif

namespace mb::sim {

// A suspended context. The stack bounds are kept for AddressSanitizer, which must be
// told about every switch between stacks.
struct FiberContext {
#if defined(MB_SIM_FIBER_UCONTEXT)
    ucontext_t uc;
#else
    void* sp = nullptr;
#endif
    const void* stack_lo = nullptr;
    size_t stack_size = 0;
    void* fake_stack = nullptr;
    void (*entry)(void*) = nullptr;
    void* arg = nullptr;
};

// An mmap'ed stack whose lowest page is inaccessible, so that an overflow faults
// instead of silently corrupting the neighbouring stack. The first frame starts
// `colour` bytes below the top: stacks whose tops share a page offset would all
// compete for the same cache sets when a thousand fibers run in turn.
class FiberStack {
public:
    FiberStack(size_t usable_size, size_t colour);  // throws std::bad_alloc
    ~FiberStack();
    FiberStack(const FiberStack&) = delete;
    FiberStack& operator=(const FiberStack&) = delete;

    void* lo() const { return lo_; }
    size_t size() const { return size_; }  // from lo() to the top of the mapping
    void* top() const { return top_; }     // where the first frame starts

private:
    void* map_ = nullptr;
    size_t map_size_ = 0;
    void* lo_ = nullptr;
    size_t size_ = 0;
    void* top_ = nullptr;
};

// Prepares ctx so that switching to it runs entry(arg) on the stack; ctx must not move
// until then. entry never returns.
void fiber_init(FiberContext& ctx, const FiberStack& stack, void (*entry)(void*), void* arg);

// Saves the running context in `from` and resumes `to`. `dying` says that `from` will
// never be resumed (its stack may be reused at once).
#if defined(MB_SIM_FIBER_UCONTEXT) || defined(MB_SIM_ASAN)
void fiber_switch(FiberContext& from, FiberContext& to, bool dying = false);
#else
extern "C" __attribute__((visibility("hidden"))) void mb_sim_switch_raw(void** save_sp, void* to_sp);
inline void fiber_switch(FiberContext& from, FiberContext& to, bool = false) {
    mb_sim_switch_raw(&from.sp, to.sp);
}
#endif

}  // namespace mb::sim
