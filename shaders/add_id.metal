// ADD_ID: dst[:, i1, i2, i3] = a[:, i1, i2, i3] + b[:, ids[i1, i2]]; one threadgroup per row. An
// id outside b's rows adds nothing and is written to the error record (buffer 4).
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_add_id_f32(
        constant mb_kargs_add_id & args [[buffer(0)]],
        device const char * a [[buffer(1)]],
        device const char * b [[buffer(2)]],
        device const char * ids [[buffer(3)]],
        device int * err [[buffer(4)]],
        device char * dst [[buffer(5)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int id = *((device const int *) (ids + tgpig.x * args.nbi0 + tgpig.y * args.nbi1));
    const bool valid = id >= 0 && id < args.ne11;
    if (!valid && tpitg == 0) {
        err[1] = id;
        err[2] = args.ne11;
        err[0] = 4;
    }
    device const char * x = a + tgpig.x * args.nb01 + tgpig.y * args.nb02 + tgpig.z * args.nb03;
    device const char * y = b + (valid ? id : 0) * args.nb11;
    device char * out = dst + tgpig.x * args.nb1 + tgpig.y * args.nb2 + tgpig.z * args.nb3;
    for (int i0 = tpitg; i0 < args.ne0; i0 += ntg) {
        const float v = *((device const float *) (x + i0 * args.nb00));
        const float w = valid ? *((device const float *) (y + i0 * args.nb10)) : 0.0f;
        *((device float *) (out + i0 * args.nb0)) = v + w;
    }
}
