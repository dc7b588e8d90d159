#include "metal/sim/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <new>

#if defined(MB_SIM_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace mb::sim {

namespace {

#if defined(MB_SIM_ASAN)
// The context a switch leaves; the landing side learns its stack bounds from ASan
// (this is how the thread's own stack, never created by us, gets known bounds).
thread_local FiberContext* tls_switch_from = nullptr;

void asan_landed(void* own_fake_stack) {
    const void* lo = nullptr;
    size_t size = 0;
    FiberContext* from = tls_switch_from;
    __sanitizer_finish_switch_fiber(own_fake_stack, &lo, &size);
    if (from && !from->stack_lo) {
        from->stack_lo = lo;
        from->stack_size = size;
    }
}
#endif

void fiber_start(FiberContext* ctx) {
#if defined(MB_SIM_ASAN)
    asan_landed(nullptr);
#endif
    ctx->entry(ctx->arg);
}

}  // namespace

FiberStack::FiberStack(size_t usable_size, size_t colour) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    colour &= ~size_t(15);
    size_ = (usable_size + colour + page - 1) / page * page;
    map_size_ = size_ + page;
    void* p = mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (mprotect(p, page, PROT_NONE) != 0) {
        munmap(p, map_size_);
        throw std::bad_alloc();
    }
    map_ = p;
    lo_ = static_cast<char*>(p) + page;
    top_ = static_cast<char*>(lo_) + size_ - colour;
}

FiberStack::~FiberStack() {
    if (map_) munmap(map_, map_size_);
}

}  // namespace mb::sim

#if defined(MB_SIM_FIBER_UCONTEXT)

namespace mb::sim {
namespace {

// makecontext passes only int arguments: the context pointer travels in two halves.
void ucontext_start(unsigned lo, unsigned hi) {
    auto p = (static_cast<uintptr_t>(hi) << 16 << 16) | lo;
    fiber_start(reinterpret_cast<FiberContext*>(p));
}

}  // namespace

void fiber_init(FiberContext& ctx, const FiberStack& stack, void (*entry)(void*), void* arg) {
#if defined(MB_SIM_ASAN)
    ASAN_UNPOISON_MEMORY_REGION(stack.lo(), stack.size());
#endif
    getcontext(&ctx.uc);
    ctx.uc.uc_stack.ss_sp = stack.lo();
    ctx.uc.uc_stack.ss_size = static_cast<size_t>(static_cast<char*>(stack.top()) - static_cast<char*>(stack.lo()));
    ctx.uc.uc_link = nullptr;
    auto p = reinterpret_cast<uintptr_t>(&ctx);
    makecontext(&ctx.uc, reinterpret_cast<void (*)()>(&ucontext_start), 2,
                static_cast<unsigned>(p), static_cast<unsigned>(p >> 16 >> 16));
    ctx.stack_lo = stack.lo();
    ctx.stack_size = stack.size();
    ctx.fake_stack = nullptr;
    ctx.entry = entry;
    ctx.arg = arg;
}

void fiber_switch(FiberContext& from, FiberContext& to, bool dying) {
#if defined(MB_SIM_ASAN)
    tls_switch_from = &from;
    __sanitizer_start_switch_fiber(dying ? nullptr : &from.fake_stack, to.stack_lo, to.stack_size);
#else
    (void)dying;
#endif
    swapcontext(&from.uc, &to.uc);
#if defined(MB_SIM_ASAN)
    asan_landed(from.fake_stack);
#endif
}

}  // namespace mb::sim

#else  // hand-written switch

extern "C" {
__attribute__((visibility("hidden"))) void mb_sim_switch_raw(void** save_sp, void* to_sp);
__attribute__((visibility("hidden"))) void mb_sim_trampoline();
}

// mb_sim_switch_raw saves the callee-saved registers on the current stack, stores the
// stack pointer in *save_sp, loads to_sp and pops the registers saved there. A new
// context is such a frame whose return address is mb_sim_trampoline, which calls
// start(ctx) with the two values fiber_init placed in callee-saved registers. On x86-64
// the switch ends in pop+jmp rather than ret: a ret into a different stack than the call
// came from always misses the return-address predictor (measured 3 ns vs 10-20 ns).
#if defined(__APPLE__)
#define MB_SIM_FN_BEGIN(x, align) ".private_extern _" #x "\n.p2align " #align "\n_" #x ":\n"
#else
#define MB_SIM_FN_BEGIN(x, align) \
    ".globl " #x "\n.hidden " #x "\n.type " #x ",%function\n.p2align " #align "\n" #x ":\n"
#endif

#if defined(__x86_64__)
asm(".text\n"
    MB_SIM_FN_BEGIN(mb_sim_switch_raw, 4)
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    popq %rcx\n"
    "    jmpq *%rcx\n"
    MB_SIM_FN_BEGIN(mb_sim_trampoline, 4)
    "    movq %r12, %rdi\n"
    "    callq *%r13\n"
    "    ud2\n");
#else
asm(".text\n"
    MB_SIM_FN_BEGIN(mb_sim_switch_raw, 2)
    "    sub sp, sp, #160\n"
    "    stp x19, x20, [sp, #0]\n"
    "    stp x21, x22, [sp, #16]\n"
    "    stp x23, x24, [sp, #32]\n"
    "    stp x25, x26, [sp, #48]\n"
    "    stp x27, x28, [sp, #64]\n"
    "    stp x29, x30, [sp, #80]\n"
    "    stp d8, d9, [sp, #96]\n"
    "    stp d10, d11, [sp, #112]\n"
    "    stp d12, d13, [sp, #128]\n"
    "    stp d14, d15, [sp, #144]\n"
    "    mov x2, sp\n"
    "    str x2, [x0]\n"
    "    mov sp, x1\n"
    "    ldp x19, x20, [sp, #0]\n"
    "    ldp x21, x22, [sp, #16]\n"
    "    ldp x23, x24, [sp, #32]\n"
    "    ldp x25, x26, [sp, #48]\n"
    "    ldp x27, x28, [sp, #64]\n"
    "    ldp x29, x30, [sp, #80]\n"
    "    ldp d8, d9, [sp, #96]\n"
    "    ldp d10, d11, [sp, #112]\n"
    "    ldp d12, d13, [sp, #128]\n"
    "    ldp d14, d15, [sp, #144]\n"
    "    add sp, sp, #160\n"
    "    ret\n"
    MB_SIM_FN_BEGIN(mb_sim_trampoline, 2)
    "    mov x0, x19\n"
    "    blr x20\n"
    "    brk #0\n");
#endif

namespace mb::sim {

void fiber_init(FiberContext& ctx, const FiberStack& stack, void (*entry)(void*), void* arg) {
#if defined(MB_SIM_ASAN)
    // A fiber abandoned on this stack (a failed threadgroup) left its frames poisoned.
    ASAN_UNPOISON_MEMORY_REGION(stack.lo(), stack.size());
#endif
    auto top = reinterpret_cast<uintptr_t>(stack.top()) & ~uintptr_t(15);
    auto start = reinterpret_cast<uintptr_t>(&fiber_start);
    auto tramp = reinterpret_cast<uintptr_t>(&mb_sim_trampoline);
    auto self = reinterpret_cast<uintptr_t>(&ctx);
#if defined(__x86_64__)
    // Pops r15 r14 r13 r12 rbx rbp, then returns into the trampoline with rsp 16-aligned
    // for its call.
    auto* sp = reinterpret_cast<uintptr_t*>(top - 72);
    sp[0] = 0;      // r15
    sp[1] = 0;      // r14
    sp[2] = start;  // r13
    sp[3] = self;   // r12
    sp[4] = 0;      // rbx
    sp[5] = 0;      // rbp
    sp[6] = tramp;  // return address
#else
    auto* sp = reinterpret_cast<uintptr_t*>(top - 160);
    for (int i = 0; i < 20; ++i) sp[i] = 0;
    sp[0] = self;    // x19
    sp[1] = start;   // x20
    sp[11] = tramp;  // x30
#endif
    ctx.sp = sp;
    ctx.stack_lo = stack.lo();
    ctx.stack_size = stack.size();
    ctx.fake_stack = nullptr;
    ctx.entry = entry;
    ctx.arg = arg;
}

#if defined(MB_SIM_ASAN)
void fiber_switch(FiberContext& from, FiberContext& to, bool dying) {
    tls_switch_from = &from;
    __sanitizer_start_switch_fiber(dying ? nullptr : &from.fake_stack, to.stack_lo, to.stack_size);
    mb_sim_switch_raw(&from.sp, to.sp);
    asan_landed(from.fake_stack);
}
#endif

}  // namespace mb::sim

#endif
