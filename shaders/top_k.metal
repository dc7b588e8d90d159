// TOP_K: each row's indices of its k largest values, largest first, ties by index, NaNs last (the
// CPU's order). One threadgroup per row sorts a window of npad indices (a power of two) in
// threadgroup memory with a bitonic sort, each thread taking the columns tpitg, tpitg + ntg, ...
// A row longer than npad (chunked) is taken npad / 2 values at a time after the first npad: the
// chunk goes into the window's second half, the window is sorted again, and its first half keeps the
// best npad / 2 seen so far (k <= npad / 2, checked by the host). Indices past the row's end are
// padding and sort after everything.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

static inline bool top_k_before(device const char * x, constant mb_kargs_top_k & args, int l, int r) {
    if (l >= args.ne00) {
        return false;
    }
    if (r >= args.ne00) {
        return true;
    }
    const float xl = *((device const float *) (x + l * args.nb00));
    const float xr = *((device const float *) (x + r * args.nb00));
    const bool nl = (as_type<uint>(xl) & 0x7fffffffu) > 0x7f800000u;
    const bool nr = (as_type<uint>(xr) & 0x7fffffffu) > 0x7f800000u;
    if (nl || nr) {
        return nl == nr ? l < r : nr;
    }
    if (xl == xr) {
        return l < r;
    }
    return xl > xr;
}

static inline void top_k_sort(device const char * x, constant mb_kargs_top_k & args, threadgroup int * idx,
                              int tid, int ntg) {
    const int npad = args.npad;
    for (int k = 2; k <= npad; k *= 2) {
        for (int j = k / 2; j > 0; j /= 2) {
            for (int col = tid; col < npad; col += ntg) {
                const int other = col ^ j;
                if (other > col) {
                    const int a = idx[col];
                    const int b = idx[other];
                    // Ascending runs where (col & k) == 0, descending runs elsewhere: a bitonic merge.
                    const bool swap = (col & k) == 0 ? top_k_before(x, args, b, a) : top_k_before(x, args, a, b);
                    if (swap) {
                        idx[col] = b;
                        idx[other] = a;
                    }
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
    }
}

kernel void kernel_top_k_f32_i32(
        constant mb_kargs_top_k & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        threadgroup int * idx [[threadgroup(0)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    device const char * x = src0 + tgpig.x * args.nb01 + tgpig.y * args.nb02 + tgpig.z * args.nb03;
    device char * y = dst + tgpig.x * args.nb1 + tgpig.y * args.nb2 + tgpig.z * args.nb3;
    const int tid = tpitg;
    const int nt = ntg;
    for (int col = tid; col < args.npad; col += nt) {
        idx[col] = col;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    top_k_sort(x, args, idx, tid, nt);
    if (args.chunked != 0) {
        const int half_window = args.npad / 2;
        for (int base = args.npad; base < args.ne00; base += half_window) {
            for (int col = tid; col < half_window; col += nt) {
                idx[half_window + col] = base + col;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            top_k_sort(x, args, idx, tid, nt);
        }
    }
    for (int col = tid; col < args.k; col += nt) {
        *((device int *) (y + col * args.nb0)) = idx[col];
    }
}
