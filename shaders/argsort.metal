// ARGSORT: a bitonic sort of each row's indices in threadgroup memory, one threadgroup of npad
// threads (the row length rounded up to a power of two) per row. Padding indices (>= ne00) sort
// after every real one, NaNs after every number, ties by index, so the order is total and the
// result is the CPU's stable order.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

static inline bool argsort_before(device const char * x, constant mb_kargs_argsort & args, int l, int r) {
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
    return args.desc ? xl > xr : xl < xr;
}

kernel void kernel_argsort_f32_i32(
        constant mb_kargs_argsort & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        threadgroup int * idx [[threadgroup(0)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]]) {
    device const char * x = src0 + tgpig.x * args.nb01 + tgpig.y * args.nb02 + tgpig.z * args.nb03;
    device char * y = dst + tgpig.x * args.nb1 + tgpig.y * args.nb2 + tgpig.z * args.nb3;
    const int col = tpitg;
    idx[col] = col;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int k = 2; k <= args.npad; k *= 2) {
        for (int j = k / 2; j > 0; j /= 2) {
            const int other = col ^ j;
            if (other > col) {
                const int a = idx[col];
                const int b = idx[other];
                // Ascending runs where (col & k) == 0, descending runs elsewhere: a bitonic merge.
                const bool swap = (col & k) == 0 ? argsort_before(x, args, b, a) : argsort_before(x, args, a, b);
                if (swap) {
                    idx[col] = b;
                    idx[other] = a;
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
    }
    if (col < args.ne00) {
        *((device int *) (y + col * args.nb0)) = idx[col];
    }
}
