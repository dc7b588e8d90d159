// ARANGE: dst[i] = start + i * step, one thread per element.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_arange_f32(
        constant mb_kargs_arange & args [[buffer(0)]],
        device float * dst [[buffer(1)]],
        uint tpig [[thread_position_in_grid]]) {
    if (tpig >= args.n) {
        return;
    }
    dst[tpig] = args.start + float(tpig) * args.step;
}
