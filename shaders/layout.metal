// CONCAT, REPEAT, PAD, PAD_REFLECT_1D and ROLL: element moves with any source and destination strides. Each kernel is
// instantiated per element size only through its type (T is copied, never computed with), so the
// 4-byte kernels serve f32 and i32 alike and the 2-byte ones f16 and bf16.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

// One threadgroup per dst row (i1, i2, i3); its threads stride over the row.
template <typename T>
kernel void kernel_concat(
        constant mb_kargs_concat & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int ne0x[4] = {args.ne00, args.ne01, args.ne02, args.ne03};
    const int i1 = tgpig.x;
    const int i2 = tgpig.y;
    const int i3 = tgpig.z;
    device char * y = dst + (ulong) i1 * args.nb1 + (ulong) i2 * args.nb2 + (ulong) i3 * args.nb3;
    for (int i0 = tiitg; i0 < args.ne0; i0 += ntg) {
        int o[4] = {i0, i1, i2, i3};
        device const char * x;
        if (o[args.dim] < ne0x[args.dim]) {
            x = src0 + (ulong) o[0] * args.nb00 + (ulong) o[1] * args.nb01 + (ulong) o[2] * args.nb02 +
                (ulong) o[3] * args.nb03;
        } else {
            o[args.dim] -= ne0x[args.dim];
            x = src1 + (ulong) o[0] * args.nb10 + (ulong) o[1] * args.nb11 + (ulong) o[2] * args.nb12 +
                (ulong) o[3] * args.nb13;
        }
        *((device T *) (y + (ulong) i0 * args.nb0)) = *((device const T *) x);
    }
}

typedef decltype(kernel_concat<float>) kernel_concat_t;

template [[host_name("kernel_concat_f32")]] kernel kernel_concat_t kernel_concat<float>;
template [[host_name("kernel_concat_f16")]] kernel kernel_concat_t kernel_concat<half>;
template [[host_name("kernel_concat_i32")]] kernel kernel_concat_t kernel_concat<int>;
template [[host_name("kernel_concat_bf16")]] kernel kernel_concat_t kernel_concat<ushort>;

// One threadgroup per dst row; src0 is read at every index modulo its extent.
template <typename T>
kernel void kernel_repeat(
        constant mb_kargs_repeat & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int i1 = tgpig.x;
    const int i2 = tgpig.y;
    const int i3 = tgpig.z;
    device const char * x = src0 + (ulong) (i1 % args.ne01) * args.nb01 + (ulong) (i2 % args.ne02) * args.nb02 +
                            (ulong) (i3 % args.ne03) * args.nb03;
    device char * y = dst + (ulong) i1 * args.nb1 + (ulong) i2 * args.nb2 + (ulong) i3 * args.nb3;
    for (int i0 = tiitg; i0 < args.ne0; i0 += ntg) {
        *((device T *) (y + (ulong) i0 * args.nb0)) = *((device const T *) (x + (ulong) (i0 % args.ne00) * args.nb00));
    }
}

typedef decltype(kernel_repeat<float>) kernel_repeat_t;

template [[host_name("kernel_repeat_f32")]] kernel kernel_repeat_t kernel_repeat<float>;
template [[host_name("kernel_repeat_f16")]] kernel kernel_repeat_t kernel_repeat<half>;
template [[host_name("kernel_repeat_i32")]] kernel kernel_repeat_t kernel_repeat<int>;
template [[host_name("kernel_repeat_bf16")]] kernel kernel_repeat_t kernel_repeat<ushort>;

// One threadgroup per dst row; rows and elements past src0's extent are zero.
template <typename T>
kernel void kernel_pad(
        constant mb_kargs_pad & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int i1 = tgpig.x;
    const int i2 = tgpig.y;
    const int i3 = tgpig.z;
    const bool row_inside = i1 < args.ne01 && i2 < args.ne02 && i3 < args.ne03;
    device const char * x = src0 + (ulong) i1 * args.nb01 + (ulong) i2 * args.nb02 + (ulong) i3 * args.nb03;
    device char * y = dst + (ulong) i1 * args.nb1 + (ulong) i2 * args.nb2 + (ulong) i3 * args.nb3;
    for (int i0 = tiitg; i0 < args.ne0; i0 += ntg) {
        T val = T(0);
        if (row_inside && i0 < args.ne00) {
            val = *((device const T *) (x + (ulong) i0 * args.nb00));
        }
        *((device T *) (y + (ulong) i0 * args.nb0)) = val;
    }
}

typedef decltype(kernel_pad<float>) kernel_pad_t;

template [[host_name("kernel_pad_f32")]] kernel kernel_pad_t kernel_pad<float>;
template [[host_name("kernel_pad_f16")]] kernel kernel_pad_t kernel_pad<half>;
template [[host_name("kernel_pad_i32")]] kernel kernel_pad_t kernel_pad<int>;
template [[host_name("kernel_pad_bf16")]] kernel kernel_pad_t kernel_pad<ushort>;

// One threadgroup per row; element i0 of dst reads src0's element i0 - p0 mirrored into the row
// (about element 0 before it, about the last element past it).
template <typename T>
kernel void kernel_pad_reflect_1d(
        constant mb_kargs_pad_reflect_1d & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int i1 = tgpig.x;
    const int i2 = tgpig.y;
    const int i3 = tgpig.z;
    device const char * x = src0 + (ulong) i1 * args.nb01 + (ulong) i2 * args.nb02 + (ulong) i3 * args.nb03;
    device char * y = dst + (ulong) i1 * args.nb1 + (ulong) i2 * args.nb2 + (ulong) i3 * args.nb3;
    for (int i0 = tiitg; i0 < args.ne0; i0 += ntg) {
        int j = i0 - args.p0;
        j = j < 0 ? -j : j;
        j = j >= args.ne00 ? 2 * (args.ne00 - 1) - j : j;
        *((device T *) (y + (ulong) i0 * args.nb0)) = *((device const T *) (x + (ulong) j * args.nb00));
    }
}

typedef decltype(kernel_pad_reflect_1d<float>) kernel_pad_reflect_1d_t;

// ROLL: one threadgroup per dst row, reading the source row (i - s) mod ne on every dim.
template <typename T>
kernel void kernel_roll(
        constant mb_kargs_roll & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int i1 = tgpig.x;
    const int i2 = tgpig.y;
    const int i3 = tgpig.z;
    const int j1 = i1 >= args.s1 ? i1 - args.s1 : i1 - args.s1 + args.ne01;
    const int j2 = i2 >= args.s2 ? i2 - args.s2 : i2 - args.s2 + args.ne02;
    const int j3 = i3 >= args.s3 ? i3 - args.s3 : i3 - args.s3 + args.ne03;
    device const char * x = src0 + (ulong) j1 * args.nb01 + (ulong) j2 * args.nb02 + (ulong) j3 * args.nb03;
    device char * y = dst + (ulong) i1 * args.nb1 + (ulong) i2 * args.nb2 + (ulong) i3 * args.nb3;
    for (int i0 = tiitg; i0 < args.ne00; i0 += ntg) {
        const int j0 = i0 >= args.s0 ? i0 - args.s0 : i0 - args.s0 + args.ne00;
        *((device T *) (y + (ulong) i0 * args.nb0)) = *((device const T *) (x + (ulong) j0 * args.nb00));
    }
}

typedef decltype(kernel_roll<float>) kernel_roll_t;

template [[host_name("kernel_roll_f32")]] kernel kernel_roll_t kernel_roll<float>;
template [[host_name("kernel_roll_f16")]] kernel kernel_roll_t kernel_roll<half>;
template [[host_name("kernel_roll_i32")]] kernel kernel_roll_t kernel_roll<int>;
template [[host_name("kernel_roll_bf16")]] kernel kernel_roll_t kernel_roll<ushort>;

template [[host_name("kernel_pad_reflect_1d_f32")]] kernel kernel_pad_reflect_1d_t kernel_pad_reflect_1d<float>;
template [[host_name("kernel_pad_reflect_1d_f16")]] kernel kernel_pad_reflect_1d_t kernel_pad_reflect_1d<half>;
template [[host_name("kernel_pad_reflect_1d_i32")]] kernel kernel_pad_reflect_1d_t kernel_pad_reflect_1d<int>;
template [[host_name("kernel_pad_reflect_1d_bf16")]] kernel kernel_pad_reflect_1d_t kernel_pad_reflect_1d<ushort>;
