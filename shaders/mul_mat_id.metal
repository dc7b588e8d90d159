// MUL_MAT_ID (expert routing) for f32 and f16 expert matrices: dst[:, e, t] = as[ids[e, t]] @
// b[:, e % ne11, t]. One simdgroup per output value: its lanes stride over K, simd_sum adds them.
// An expert id outside [0, ne02) gives zeros and is written to the error record (buffer 4), which
// the backend raises as an OutOfRangeError at synchronize.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

template <typename T>
kernel void kernel_mul_mat_id(
        constant mb_kargs_mul_mat_id & args [[buffer(0)]],
        device const char * as [[buffer(1)]],
        device const char * b [[buffer(2)]],
        device const char * ids [[buffer(3)]],
        device int * err [[buffer(4)]],
        device char * dst [[buffer(5)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiisg [[thread_index_in_simdgroup]]) {
    const int r = tgpig.x;
    const int e = tgpig.y;
    const int t = tgpig.z;
    const int expert = *((device const int *) (ids + e * args.nbi0 + t * args.nbi1));
    const bool valid = expert >= 0 && expert < args.ne02;
    if (!valid && tiisg == 0) {
        err[1] = expert;
        err[2] = args.ne02;
        err[0] = 3;
    }
    device const T * w = (device const T *) (as + (valid ? expert : 0) * args.nb02 + r * args.nb01);
    device const float * x = (device const float *) (b + (e % args.ne11) * args.nb11 + t * args.nb12);
    float s = 0.0f;
    if (valid) {
        for (int k = tiisg; k < args.ne00; k += 32) {
            s += float(w[k]) * x[k];
        }
    }
    s = simd_sum(s);
    if (tiisg == 0) {
        *((device float *) (dst + r * 4 + e * args.nb1 + t * args.nb2)) = s;
    }
}

typedef decltype(kernel_mul_mat_id<float>) kernel_mul_mat_id_t;

template [[host_name("kernel_mul_mat_id_f32")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<float>;
template [[host_name("kernel_mul_mat_id_f16")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<half>;
