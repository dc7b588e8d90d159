// racecheck tests (tests/native/test_racecheck.cpp): each kernel with a planted race of one kind
// (mode 0) and its race-free twin (mode 1). Test-only: never part of the shipped library.
#include <metal_stdlib>
#include "test_kargs.h"

using namespace metal;

// Threadgroup read-write race: each thread writes its slot, then reads its neighbour's, which the
// neighbour writes in the same barrier interval (mode 0); the twin puts a barrier between.
kernel void kernel_race_tg_rw(
        constant test_kargs_mode & args [[buffer(0)]],
        device float * dst [[buffer(1)]],
        threadgroup float * buf [[threadgroup(0)]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    buf[tiitg] = 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    buf[tiitg] = float(tiitg);
    if (args.mode == 1) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    dst[tiitg] = buf[(tiitg + 1) % ntg];
}

// A tree reduction that lacks the barrier inside its loop (mode 0); the twin has it.
kernel void kernel_race_missing_barrier(
        constant test_kargs_mode & args [[buffer(0)]],
        device const float * src [[buffer(1)]],
        device float * dst [[buffer(2)]],
        threadgroup float * buf [[threadgroup(0)]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]],
        uint tgpig [[threadgroup_position_in_grid]]) {
    buf[tiitg] = src[tgpig * ntg + tiitg];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = ntg / 2; s > 0; s /= 2) {
        if (tiitg < s) {
            buf[tiitg] += buf[tiitg + s];
        }
        if (args.mode == 1) {
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
    }
    if (args.mode == 0) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tiitg == 0) {
        dst[tgpig] = buf[0];
    }
}

// Lanes of one simdgroup exchange values through threadgroup memory: ordered by a simdgroup_barrier
// (mode 1), racing without it (mode 0).
kernel void kernel_race_simd_exchange(
        constant test_kargs_mode & args [[buffer(0)]],
        device float * dst [[buffer(1)]],
        threadgroup float * buf [[threadgroup(0)]],
        uint tiitg [[thread_index_in_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]]) {
    buf[tiitg] = 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    buf[tiitg] = float(tiitg) * 2.0f;
    if (args.mode == 1) {
        simdgroup_barrier(mem_flags::mem_threadgroup);
    }
    dst[tiitg] = buf[tiitg - tiisg + ((tiisg + 1) % 32)];
}

// Device memory: every threadgroup writes the same element (mode 0); the twin writes one element per
// threadgroup, and adds to a shared counter atomically (atomics never race).
kernel void kernel_race_device_write(
        constant test_kargs_mode & args [[buffer(0)]],
        device float * dst [[buffer(1)]],
        device atomic_int * counter [[buffer(2)]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint tgpig [[threadgroup_position_in_grid]]) {
    if (tiitg == 0) {
        if (args.mode == 0) {
            dst[0] = float(tgpig);
        } else {
            dst[tgpig] = float(tgpig);
            atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
        }
    }
}

// Reads a threadgroup slot that no thread wrote (mode 0: the last thread does not write its slot).
kernel void kernel_race_uninit(
        constant test_kargs_mode & args [[buffer(0)]],
        device float * dst [[buffer(1)]],
        threadgroup float * buf [[threadgroup(0)]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    if (args.mode == 1 || tiitg + 1 < ntg) {
        buf[tiitg] = float(tiitg);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    dst[tiitg] = buf[ntg - 1 - tiitg];
}

// Two dispatches of a concurrent pass: a copy from src to dst (the test runs it twice, the second
// reading what the first writes, or reading other bytes in the twin).
kernel void kernel_race_copy(
        constant test_kargs_mode & args [[buffer(0)]],
        device const float * src [[buffer(1)]],
        device float * dst [[buffer(2)]],
        uint tpig [[thread_position_in_grid]]) {
    dst[tpig] = src[tpig] + 1.0f;
}
