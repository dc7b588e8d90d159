// DUP, CPY and CONT: the elements of src in logical (row-major) order written to the elements of dst
// in logical order, converted to dst's type; both sides may have any strides. One threadgroup per src
// row. When the rows of both sides have the same length (same_rows) a src row is one dst row, found
// once per threadgroup; otherwise each element's dst coordinates come from its flat index.
//
// A quantized side needs same_rows and packed blocks (the host checks): its threads take whole
// blocks (quantizing needs all 32 values for the scale) or halves of blocks (dequantizing).
#include <metal_stdlib>

#include "kargs.h"
#include "quants.h"

using namespace metal;

inline long cpy_row_index(constant mb_kargs_cpy & args, uint3 tgpig) {
    return (long(tgpig.z) * args.ne02 + long(tgpig.y)) * args.ne01 + long(tgpig.x);
}

inline device const char * cpy_src_row(constant mb_kargs_cpy & args, device const char * src0, uint3 tgpig) {
    return src0 + ulong(tgpig.x) * args.nb01 + ulong(tgpig.y) * args.nb02 + ulong(tgpig.z) * args.nb03;
}

// The dst row holding the flat row r (rows of ne0 elements) of dst.
inline device char * cpy_dst_row(constant mb_kargs_cpy & args, device char * dst, long r) {
    const long i1 = r % args.ne1;
    const long t = r / args.ne1;
    const long i2 = t % args.ne2;
    const long i3 = t / args.ne2;
    return dst + ulong(i1) * args.nb1 + ulong(i2) * args.nb2 + ulong(i3) * args.nb3;
}

// Converting copy through f32; a same-type copy moves the bits (NaN payloads, i32 beyond 2^24).
template <typename TS, typename TD>
inline void copy_element(device const TS * s, device TD * d) {
    mb_store(d, mb_to_float(*s));
}

template <typename T>
inline void copy_element(device const T * s, device T * d) {
    *d = *s;
}

template <typename TS, typename TD>
kernel void kernel_cpy(
        constant mb_kargs_cpy & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    device const char * in = cpy_src_row(args, src0, tgpig);
    const long r = cpy_row_index(args, tgpig);
    if (args.same_rows != 0) {
        device char * out = cpy_dst_row(args, dst, r);
        for (int i = int(tiitg); i < args.ne00; i += int(ntg)) {
            copy_element((device const TS *) (in + ulong(i) * args.nb00), (device TD *) (out + ulong(i) * args.nb0));
        }
        return;
    }
    for (int i = int(tiitg); i < args.ne00; i += int(ntg)) {
        const long flat = r * args.ne00 + i;
        device char * out = cpy_dst_row(args, dst, flat / args.ne0);
        copy_element((device const TS *) (in + ulong(i) * args.nb00),
                     (device TD *) (out + ulong(flat % args.ne0) * args.nb0));
    }
}

// f32 -> quantized; thread work unit: one block.
template <typename B>
kernel void kernel_cpy_f32_q(
        constant mb_kargs_cpy & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    device const char * in = cpy_src_row(args, src0, tgpig);
    device B * out = (device B *) cpy_dst_row(args, dst, cpy_row_index(args, tgpig));
    for (int ib = int(tiitg); ib < args.ne00 / MB_QK; ib += int(ntg)) {
        float x[MB_QK];
        for (int j = 0; j < MB_QK; ++j) {
            x[j] = *(device const float *) (in + ulong(ib * MB_QK + j) * args.nb00);
        }
        quantize32(x, out + ib);
    }
}

// Quantized -> f32 or f16; thread work unit: half a block.
template <typename B, typename TD>
kernel void kernel_cpy_q(
        constant mb_kargs_cpy & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    device const B * in = (device const B *) cpy_src_row(args, src0, tgpig);
    device char * out = cpy_dst_row(args, dst, cpy_row_index(args, tgpig));
    for (int u = int(tiitg); u < args.ne00 / 16; u += int(ntg)) {
        float v[16];
        load16(in, u * 16, args.ne00, v);
        for (int j = 0; j < 16; ++j) {
            mb_store((device TD *) (out + ulong(u * 16 + j) * args.nb0), v[j]);
        }
    }
}

// Quantized -> the same type: blocks copied as they are.
template <typename B>
kernel void kernel_cpy_q_q(
        constant mb_kargs_cpy & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    device const B * in = (device const B *) cpy_src_row(args, src0, tgpig);
    device B * out = (device B *) cpy_dst_row(args, dst, cpy_row_index(args, tgpig));
    for (int ib = int(tiitg); ib < args.ne00 / mb_qk(in); ib += int(ntg)) {
        out[ib] = in[ib];
    }
}

typedef decltype(kernel_cpy<float, float>) kernel_cpy_t;
typedef decltype(kernel_cpy_f32_q<block_q4_0>) kernel_cpy_f32_q_t;
typedef decltype(kernel_cpy_q<block_q4_0, float>) kernel_cpy_q_t;
typedef decltype(kernel_cpy_q_q<block_q4_0>) kernel_cpy_q_q_t;

template [[host_name("kernel_cpy_f32_f32")]] kernel kernel_cpy_t kernel_cpy<float, float>;
template [[host_name("kernel_cpy_f32_f16")]] kernel kernel_cpy_t kernel_cpy<float, half>;
template [[host_name("kernel_cpy_f32_bf16")]] kernel kernel_cpy_t kernel_cpy<float, mb_bf16>;
template [[host_name("kernel_cpy_f32_i32")]] kernel kernel_cpy_t kernel_cpy<float, int>;
template [[host_name("kernel_cpy_f16_f32")]] kernel kernel_cpy_t kernel_cpy<half, float>;
template [[host_name("kernel_cpy_f16_f16")]] kernel kernel_cpy_t kernel_cpy<half, half>;
template [[host_name("kernel_cpy_bf16_f32")]] kernel kernel_cpy_t kernel_cpy<mb_bf16, float>;
template [[host_name("kernel_cpy_bf16_bf16")]] kernel kernel_cpy_t kernel_cpy<mb_bf16, mb_bf16>;
template [[host_name("kernel_cpy_i32_f32")]] kernel kernel_cpy_t kernel_cpy<int, float>;
template [[host_name("kernel_cpy_i32_i32")]] kernel kernel_cpy_t kernel_cpy<int, int>;

template [[host_name("kernel_cpy_f32_q4_0")]] kernel kernel_cpy_f32_q_t kernel_cpy_f32_q<block_q4_0>;
template [[host_name("kernel_cpy_f32_q4_1")]] kernel kernel_cpy_f32_q_t kernel_cpy_f32_q<block_q4_1>;
template [[host_name("kernel_cpy_f32_q5_0")]] kernel kernel_cpy_f32_q_t kernel_cpy_f32_q<block_q5_0>;
template [[host_name("kernel_cpy_f32_q5_1")]] kernel kernel_cpy_f32_q_t kernel_cpy_f32_q<block_q5_1>;
template [[host_name("kernel_cpy_f32_q8_0")]] kernel kernel_cpy_f32_q_t kernel_cpy_f32_q<block_q8_0>;

template [[host_name("kernel_cpy_q4_0_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q4_0, float>;
template [[host_name("kernel_cpy_q4_1_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q4_1, float>;
template [[host_name("kernel_cpy_q5_0_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q5_0, float>;
template [[host_name("kernel_cpy_q5_1_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q5_1, float>;
template [[host_name("kernel_cpy_q8_0_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q8_0, float>;
template [[host_name("kernel_cpy_q4_0_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q4_0, half>;
template [[host_name("kernel_cpy_q4_1_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q4_1, half>;
template [[host_name("kernel_cpy_q5_0_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q5_0, half>;
template [[host_name("kernel_cpy_q5_1_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q5_1, half>;
template [[host_name("kernel_cpy_q8_0_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q8_0, half>;
template [[host_name("kernel_cpy_iq4_nl_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq4_nl, float>;
template [[host_name("kernel_cpy_iq4_nl_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq4_nl, half>;
template [[host_name("kernel_cpy_iq4_xs_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq4_xs, float>;
template [[host_name("kernel_cpy_iq4_xs_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq4_xs, half>;
template [[host_name("kernel_cpy_mxfp4_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_mxfp4, float>;
template [[host_name("kernel_cpy_mxfp4_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_mxfp4, half>;
template [[host_name("kernel_cpy_iq2_xxs_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq2_xxs, float>;
template [[host_name("kernel_cpy_iq2_xxs_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq2_xxs, half>;
template [[host_name("kernel_cpy_iq2_xs_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq2_xs, float>;
template [[host_name("kernel_cpy_iq2_xs_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq2_xs, half>;
template [[host_name("kernel_cpy_iq2_s_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq2_s, float>;
template [[host_name("kernel_cpy_iq2_s_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq2_s, half>;
template [[host_name("kernel_cpy_iq3_xxs_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq3_xxs, float>;
template [[host_name("kernel_cpy_iq3_xxs_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq3_xxs, half>;
template [[host_name("kernel_cpy_iq3_s_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq3_s, float>;
template [[host_name("kernel_cpy_iq3_s_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq3_s, half>;
template [[host_name("kernel_cpy_iq1_s_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq1_s, float>;
template [[host_name("kernel_cpy_iq1_s_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq1_s, half>;
template [[host_name("kernel_cpy_iq1_m_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq1_m, float>;
template [[host_name("kernel_cpy_iq1_m_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_iq1_m, half>;
template [[host_name("kernel_cpy_q2_K_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q2_K, float>;
template [[host_name("kernel_cpy_q2_K_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q2_K, half>;
template [[host_name("kernel_cpy_q3_K_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q3_K, float>;
template [[host_name("kernel_cpy_q3_K_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q3_K, half>;
template [[host_name("kernel_cpy_q4_K_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q4_K, float>;
template [[host_name("kernel_cpy_q4_K_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q4_K, half>;
template [[host_name("kernel_cpy_q5_K_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q5_K, float>;
template [[host_name("kernel_cpy_q5_K_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q5_K, half>;
template [[host_name("kernel_cpy_q6_K_f32")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q6_K, float>;
template [[host_name("kernel_cpy_q6_K_f16")]] kernel kernel_cpy_q_t kernel_cpy_q<block_q6_K, half>;

template [[host_name("kernel_cpy_q4_0_q4_0")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_q4_0>;
template [[host_name("kernel_cpy_q4_1_q4_1")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_q4_1>;
template [[host_name("kernel_cpy_q5_0_q5_0")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_q5_0>;
template [[host_name("kernel_cpy_q5_1_q5_1")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_q5_1>;
template [[host_name("kernel_cpy_q8_0_q8_0")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_q8_0>;
template [[host_name("kernel_cpy_iq4_nl_iq4_nl")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_iq4_nl>;
template [[host_name("kernel_cpy_iq4_xs_iq4_xs")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_iq4_xs>;
template [[host_name("kernel_cpy_mxfp4_mxfp4")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_mxfp4>;
template [[host_name("kernel_cpy_iq2_xxs_iq2_xxs")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_iq2_xxs>;
template [[host_name("kernel_cpy_iq2_xs_iq2_xs")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_iq2_xs>;
template [[host_name("kernel_cpy_iq2_s_iq2_s")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_iq2_s>;
template [[host_name("kernel_cpy_iq3_xxs_iq3_xxs")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_iq3_xxs>;
template [[host_name("kernel_cpy_iq3_s_iq3_s")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_iq3_s>;
template [[host_name("kernel_cpy_iq1_s_iq1_s")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_iq1_s>;
template [[host_name("kernel_cpy_iq1_m_iq1_m")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_iq1_m>;
template [[host_name("kernel_cpy_q2_K_q2_K")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_q2_K>;
template [[host_name("kernel_cpy_q3_K_q3_K")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_q3_K>;
template [[host_name("kernel_cpy_q4_K_q4_K")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_q4_K>;
template [[host_name("kernel_cpy_q5_K_q5_K")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_q5_K>;
template [[host_name("kernel_cpy_q6_K_q6_K")]] kernel kernel_cpy_q_q_t kernel_cpy_q_q<block_q6_K>;
