// MUL_MAT_ID (expert routing): dst[:, e, t] = as[ids[e, t]] @ b[:, e % ne11, t], for expert matrices of
// the weight types of mul_mat (f32, f16, bf16, the 32-blocks, the k-quants, iq4_nl, iq4_xs, mxfp4). One
// simdgroup per output value: each lane takes 16 values of the row at a time (load16, quants.h), 32 lanes
// stride over K, simd_sum adds them.
// An expert id outside [0, ne02) gives zeros and is written to the error record (buffer 4), which
// the backend raises as an OutOfRangeError at synchronize.
#include <metal_stdlib>
#include "kargs.h"
#include "quants.h"

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
        float v[16];
        for (int k = tiisg * 16; k < args.ne00; k += 32 * 16) {
            load16(w, k, args.ne00, v);
            const int n = min(16, args.ne00 - k);
            for (int j = 0; j < n; ++j) {
                s += v[j] * x[k + j];
            }
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
template [[host_name("kernel_mul_mat_id_bf16")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<mb_bf16>;
template [[host_name("kernel_mul_mat_id_q4_0")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_q4_0>;
template [[host_name("kernel_mul_mat_id_q4_1")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_q4_1>;
template [[host_name("kernel_mul_mat_id_q5_0")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_q5_0>;
template [[host_name("kernel_mul_mat_id_q5_1")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_q5_1>;
template [[host_name("kernel_mul_mat_id_q8_0")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_q8_0>;
template [[host_name("kernel_mul_mat_id_q2_K")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_q2_K>;
template [[host_name("kernel_mul_mat_id_q3_K")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_q3_K>;
template [[host_name("kernel_mul_mat_id_q4_K")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_q4_K>;
template [[host_name("kernel_mul_mat_id_q5_K")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_q5_K>;
template [[host_name("kernel_mul_mat_id_q6_K")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_q6_K>;
template [[host_name("kernel_mul_mat_id_iq4_nl")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_iq4_nl>;
template [[host_name("kernel_mul_mat_id_iq4_xs")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_iq4_xs>;
template [[host_name("kernel_mul_mat_id_mxfp4")]] kernel kernel_mul_mat_id_t kernel_mul_mat_id<block_mxfp4>;
