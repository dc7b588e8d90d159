// GET_ROWS (rows of any type gathered into f32) and SET_ROWS (f32 rows converted and scattered into
// rows of any type but i32). One threadgroup per gathered or scattered row; its threads take elements
// (plain types), halves of blocks (GET_ROWS from quantized rows) or whole blocks (SET_ROWS into
// quantized rows, since a block's scale depends on all 32 values).
//
// The GPU cannot raise on a bad index as the CPU does: an index outside the rows of a gives a row of
// zeros (GET_ROWS), one outside dst's rows writes nothing (SET_ROWS), memory is never touched outside
// the tensors, and the bad index is written to the command buffer's error record (buffer 4) that the
// backend turns into an OutOfRangeError at synchronize.
#include <metal_stdlib>

#include "kargs.h"
#include "quants.h"

using namespace metal;

inline int get_rows_index(constant mb_kargs_get_rows & args, device const char * idx, uint3 tgpig) {
    return *(device const int *) (idx + ulong(tgpig.x) * args.nb10 + ulong(tgpig.y) * args.nb11 +
                                  ulong(tgpig.z) * args.nb12);
}

// err[0] = 1 (GET_ROWS) or 2 (SET_ROWS), err[1] = the bad index, err[2] = the number of rows. Racing
// writers all write a bad index, so whichever lands is a true report.
inline void report_bad_row(device int * err, int op, int row, int rows, uint tiitg) {
    if (tiitg == 0) {
        err[1] = row;
        err[2] = rows;
        err[0] = op;
    }
}

inline device char * get_rows_dst(constant mb_kargs_get_rows & args, device char * dst, uint3 tgpig) {
    return dst + ulong(tgpig.x) * args.nb1 + ulong(tgpig.y) * args.nb2 + ulong(tgpig.z) * args.nb3;
}

template <typename T>
kernel void kernel_get_rows(
        constant mb_kargs_get_rows & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        device int * err [[buffer(4)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    const int row = get_rows_index(args, src1, tgpig);
    device char * out = get_rows_dst(args, dst, tgpig);
    const bool valid = row >= 0 && row < args.ne01;
    if (!valid) {
        report_bad_row(err, 1, row, args.ne01, tiitg);
    }
    device const char * in = src0 + ulong(valid ? row : 0) * args.nb01 + ulong(tgpig.y) * args.nb02 +
                             ulong(tgpig.z) * args.nb03;
    for (int i = int(tiitg); i < args.ne00; i += int(ntg)) {
        const float v = valid ? mb_to_float(*(device const T *) (in + ulong(i) * args.nb00)) : 0.0f;
        *(device float *) (out + ulong(i) * args.nb0) = v;
    }
}

// Thread work unit: half a block (16 values).
template <typename B>
kernel void kernel_get_rows_q(
        constant mb_kargs_get_rows & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        device int * err [[buffer(4)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    const int row = get_rows_index(args, src1, tgpig);
    device char * out = get_rows_dst(args, dst, tgpig);
    const bool valid = row >= 0 && row < args.ne01;
    if (!valid) {
        report_bad_row(err, 1, row, args.ne01, tiitg);
    }
    device const B * in = (device const B *) (src0 + ulong(valid ? row : 0) * args.nb01 +
                                              ulong(tgpig.y) * args.nb02 + ulong(tgpig.z) * args.nb03);
    for (int u = int(tiitg); u < args.ne00 / 16; u += int(ntg)) {
        float v[16];
        if (valid) {
            load16(in, u * 16, args.ne00, v);
        } else {
            for (int j = 0; j < 16; ++j) {
                v[j] = 0.0f;
            }
        }
        for (int j = 0; j < 16; ++j) {
            *(device float *) (out + ulong(u * 16 + j) * args.nb0) = v[j];
        }
    }
}

// The dst row that src row tgpig = (i01, i02, i03) goes to.
inline int set_rows_index(constant mb_kargs_set_rows & args, device const char * idx, uint3 tgpig) {
    return *(device const int *) (idx + ulong(tgpig.x) * args.nb10 + ulong(int(tgpig.y) % args.ne11) * args.nb11 +
                                  ulong(int(tgpig.z) % args.ne12) * args.nb12);
}

inline device char * set_rows_dst(constant mb_kargs_set_rows & args, device char * dst, int row, uint3 tgpig) {
    return dst + ulong(row) * args.nb1 + ulong(tgpig.y) * args.nb2 + ulong(tgpig.z) * args.nb3;
}

inline device const char * set_rows_src(constant mb_kargs_set_rows & args, device const char * src0,
                                        uint3 tgpig) {
    return src0 + ulong(tgpig.x) * args.nb01 + ulong(tgpig.y) * args.nb02 + ulong(tgpig.z) * args.nb03;
}

template <typename T>
kernel void kernel_set_rows(
        constant mb_kargs_set_rows & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        device int * err [[buffer(4)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    const int row = set_rows_index(args, src1, tgpig);
    if (row < 0 || row >= args.ne1) {
        report_bad_row(err, 2, row, args.ne1, tiitg);
        return;
    }
    device char * out = set_rows_dst(args, dst, row, tgpig);
    device const char * in = set_rows_src(args, src0, tgpig);
    for (int i = int(tiitg); i < args.ne00; i += int(ntg)) {
        mb_store((device T *) (out + ulong(i) * args.nb0), *(device const float *) (in + ulong(i) * args.nb00));
    }
}

// Thread work unit: one block.
template <typename B>
kernel void kernel_set_rows_q(
        constant mb_kargs_set_rows & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        device int * err [[buffer(4)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    const int row = set_rows_index(args, src1, tgpig);
    if (row < 0 || row >= args.ne1) {
        report_bad_row(err, 2, row, args.ne1, tiitg);
        return;
    }
    device char * out = set_rows_dst(args, dst, row, tgpig);
    device const char * in = set_rows_src(args, src0, tgpig);
    for (int ib = int(tiitg); ib < args.ne00 / MB_QK; ib += int(ntg)) {
        float x[MB_QK];
        for (int j = 0; j < MB_QK; ++j) {
            x[j] = *(device const float *) (in + ulong(ib * MB_QK + j) * args.nb00);
        }
        quantize32(x, (device B *) out + ib);
    }
}

typedef decltype(kernel_get_rows<float>) kernel_get_rows_t;
typedef decltype(kernel_get_rows_q<block_q4_0>) kernel_get_rows_q_t;
typedef decltype(kernel_set_rows<float>) kernel_set_rows_t;
typedef decltype(kernel_set_rows_q<block_q4_0>) kernel_set_rows_q_t;

template [[host_name("kernel_get_rows_f32")]] kernel kernel_get_rows_t kernel_get_rows<float>;
template [[host_name("kernel_get_rows_f16")]] kernel kernel_get_rows_t kernel_get_rows<half>;
template [[host_name("kernel_get_rows_bf16")]] kernel kernel_get_rows_t kernel_get_rows<mb_bf16>;
template [[host_name("kernel_get_rows_i32")]] kernel kernel_get_rows_t kernel_get_rows<int>;
template [[host_name("kernel_get_rows_q4_0")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_q4_0>;
template [[host_name("kernel_get_rows_q4_1")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_q4_1>;
template [[host_name("kernel_get_rows_q5_0")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_q5_0>;
template [[host_name("kernel_get_rows_q5_1")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_q5_1>;
template [[host_name("kernel_get_rows_q8_0")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_q8_0>;
template [[host_name("kernel_get_rows_iq4_nl")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_iq4_nl>;
template [[host_name("kernel_get_rows_iq4_xs")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_iq4_xs>;
template [[host_name("kernel_get_rows_mxfp4")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_mxfp4>;
template [[host_name("kernel_get_rows_iq2_xxs")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_iq2_xxs>;
template [[host_name("kernel_get_rows_iq2_xs")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_iq2_xs>;
template [[host_name("kernel_get_rows_iq2_s")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_iq2_s>;
template [[host_name("kernel_get_rows_iq3_xxs")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_iq3_xxs>;
template [[host_name("kernel_get_rows_iq3_s")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_iq3_s>;
template [[host_name("kernel_get_rows_iq1_s")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_iq1_s>;
template [[host_name("kernel_get_rows_iq1_m")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_iq1_m>;
template [[host_name("kernel_get_rows_q2_K")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_q2_K>;
template [[host_name("kernel_get_rows_q3_K")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_q3_K>;
template [[host_name("kernel_get_rows_q4_K")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_q4_K>;
template [[host_name("kernel_get_rows_q5_K")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_q5_K>;
template [[host_name("kernel_get_rows_q6_K")]] kernel kernel_get_rows_q_t kernel_get_rows_q<block_q6_K>;

template [[host_name("kernel_set_rows_f32")]] kernel kernel_set_rows_t kernel_set_rows<float>;
template [[host_name("kernel_set_rows_f16")]] kernel kernel_set_rows_t kernel_set_rows<half>;
template [[host_name("kernel_set_rows_bf16")]] kernel kernel_set_rows_t kernel_set_rows<mb_bf16>;
template [[host_name("kernel_set_rows_q4_0")]] kernel kernel_set_rows_q_t kernel_set_rows_q<block_q4_0>;
template [[host_name("kernel_set_rows_q4_1")]] kernel kernel_set_rows_q_t kernel_set_rows_q<block_q4_1>;
template [[host_name("kernel_set_rows_q5_0")]] kernel kernel_set_rows_q_t kernel_set_rows_q<block_q5_0>;
template [[host_name("kernel_set_rows_q5_1")]] kernel kernel_set_rows_q_t kernel_set_rows_q<block_q5_1>;
template [[host_name("kernel_set_rows_q8_0")]] kernel kernel_set_rows_q_t kernel_set_rows_q<block_q8_0>;
