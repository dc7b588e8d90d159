// MUL_MAT: dst = b @ a.T per matrix, a of any weight type, b f32 (or f16 with f16 a), dst f32.
//
// Three kernels, chosen by shape on the host (src/metal/ops/mul_mat.cpp):
// - kernel_mul_mv_*: one b column per threadgroup; each simdgroup owns MB_MV_NR rows of a, its lanes
//   walk K in chunks of 16 (half a quantized block) and simd_sum the partial dots;
// - kernel_mul_mv_ext_*: the same with FC_mul_mv_ext_cols b columns per threadgroup, so each chunk of
//   a, dequantised once, serves every column;
// - kernel_mul_mm_*: a 64 x 32 block of dst per threadgroup from 8x8 simdgroup matrices; a (as
//   a.T) and b pass through threadgroup memory 32 values of K at a time.
#include <metal_stdlib>

#include "kargs.h"
#include "quants.h"

using namespace metal;

constant short FC_mul_mv_ext_cols [[function_constant(MB_FC_MUL_MV_EXT_COLS)]];

// ---------------------------------------------------------------- mat-vec

// ncols (<= NC) columns from column tgpig.y * ncols on; rows of a past the end are read as the last
// row and never written, so that every lane takes part in the simd_sums.
template <typename TA, typename TB, int NC>
inline void mul_mv_body(
        constant mb_kargs_mul_mat & args,
        device const char * src0,
        device const char * src1,
        device char * dst,
        uint3 tgpig,
        ushort tiisg,
        ushort sgitg,
        int ncols) {
    const int r0 = (int(tgpig.x) * MB_MV_NSG + int(sgitg)) * MB_MV_NR;
    const int c0 = int(tgpig.y) * ncols;
    const int i12 = int(tgpig.z) % args.ne12;
    const int i13 = int(tgpig.z) / args.ne12;
    const int nc = min(ncols, args.ne11 - c0);
    const int K = args.ne00;

    device const char * a = src0 + ulong(i12 / args.r2) * args.nb02 + ulong(i13 / args.r3) * args.nb03;
    device const char * b = src1 + ulong(i12) * args.nb12 + ulong(i13) * args.nb13 + ulong(c0) * args.nb11;

    device const TA * rows[MB_MV_NR];
    for (int r = 0; r < MB_MV_NR; ++r) {
        rows[r] = (device const TA *) (a + ulong(min(r0 + r, args.ne01 - 1)) * args.nb01);
    }

    float4 acc[NC];
    for (int c = 0; c < NC; ++c) {
        acc[c] = float4(0.0f);
    }

    for (int k = int(tiisg) * 16; k < K; k += 32 * 16) {
        for (int r = 0; r < MB_MV_NR; ++r) {
            float va[16];
            load16(rows[r], k, K, va);
            for (int c = 0; c < NC; ++c) {
                if (c < nc) {
                    float vb[16];
                    load16((device const TB *) (b + ulong(c) * args.nb11), k, K, vb);
                    float s = 0.0f;
                    for (int j = 0; j < 16; ++j) {
                        s += va[j] * vb[j];
                    }
                    acc[c][r] += s;
                }
            }
        }
    }

    for (int c = 0; c < NC; ++c) {
        if (c < ncols) {
            acc[c] = simd_sum(acc[c]);
        }
    }

    if (tiisg == 0) {
        device char * d = dst + ulong(i12) * args.nb2 + ulong(i13) * args.nb3;
        for (int c = 0; c < NC; ++c) {
            for (int r = 0; r < MB_MV_NR; ++r) {
                if (c < nc && r0 + r < args.ne01) {
                    *((device float *) (d + ulong(c0 + c) * args.nb1) + (r0 + r)) = acc[c][r];
                }
            }
        }
    }
}

template <typename TA, typename TB>
kernel void kernel_mul_mv(
        constant mb_kargs_mul_mat & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    mul_mv_body<TA, TB, 1>(args, src0, src1, dst, tgpig, tiisg, sgitg, 1);
}

template <typename TA, typename TB>
kernel void kernel_mul_mv_ext(
        constant mb_kargs_mul_mat & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    mul_mv_body<TA, TB, MB_MV_EXT_MAX>(args, src0, src1, dst, tgpig, tiisg, sgitg, FC_mul_mv_ext_cols);
}

// ---------------------------------------------------------------- simdgroup-matrix tiles

// 16 values of a's row from element k on, in the tile's type: through f32 in general, copied as
// they are when a is f16 and the tile half.
template <typename TA>
inline void stage16(device const TA * p, int k, int K, thread float * out) {
    load16(p, k, K, out);
}

inline void stage16(device const half * p, int k, int K, thread half * out) {
    for (int j = 0; j < 16; ++j) {
        out[j] = k + j < K ? p[k + j] : half(0.0f);
    }
}

// Threadgroup memory: sa holds a's tile transposed, [32 k][64 m]; sb holds b's, [32 n][32 k]; both of
// type ST. Simdgroup s computes b columns (s / 2) * 16 + [0, 16) by a rows (s % 2) * 32 + [0, 32) of
// the block: 2 x 4 matrices of 8x8. Blocks that reach past dst go out through threadgroup memory
// ([32 n][64 m] f32, which is why the host reserves at least 8 KiB).
template <typename TA, typename TB, typename ST, typename SM>
kernel void kernel_mul_mm(
        constant mb_kargs_mul_mat & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        threadgroup char * shmem [[threadgroup(0)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    threadgroup ST * sa = (threadgroup ST *) shmem;
    threadgroup ST * sb = sa + 32 * MB_MM_M;

    const int m0 = int(tgpig.x) * MB_MM_M;
    const int n0 = int(tgpig.y) * MB_MM_N;
    const int i12 = int(tgpig.z) % args.ne12;
    const int i13 = int(tgpig.z) / args.ne12;
    const int K = args.ne00;

    // What this thread stages per step: 16 values of one a row, 8 values of one b row. Rows past
    // the end are read as the last row: they only reach dst entries that are never written.
    const int am = int(tiitg) / 2;
    const int ak = (int(tiitg) % 2) * 16;
    const int bn = int(tiitg) / 4;
    const int bk = (int(tiitg) % 4) * 8;
    device const TA * arow = (device const TA *) (src0 + ulong(i12 / args.r2) * args.nb02 +
                                                  ulong(i13 / args.r3) * args.nb03 +
                                                  ulong(min(m0 + am, args.ne01 - 1)) * args.nb01);
    device const TB * brow = (device const TB *) (src1 + ulong(i12) * args.nb12 + ulong(i13) * args.nb13 +
                                                  ulong(min(n0 + bn, args.ne11 - 1)) * args.nb11);

    const int sm = (int(sgitg) % 2) * 32;
    const int sn = (int(sgitg) / 2) * 16;

    simdgroup_float8x8 acc[8];
    for (int i = 0; i < 8; ++i) {
        acc[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }

    for (int k0 = 0; k0 < K; k0 += 32) {
        ST va[16];
        stage16(arow, k0 + ak, K, va);
        ST vb[8];
        for (int j = 0; j < 8; ++j) {
            const int k = k0 + bk + j;
            vb[j] = k < K ? ST(brow[k]) : ST(0.0f);
        }

        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int j = 0; j < 16; ++j) {
            sa[(ak + j) * MB_MM_M + am] = va[j];
        }
        for (int j = 0; j < 8; ++j) {
            sb[bn * 32 + bk + j] = vb[j];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        for (int kb = 0; kb < 32; kb += 8) {
            SM ma[4];
            SM mb[2];
            for (int j = 0; j < 4; ++j) {
                simdgroup_load(ma[j], sa, MB_MM_M, ulong2(sm + j * 8, kb));
            }
            for (int i = 0; i < 2; ++i) {
                simdgroup_load(mb[i], sb, 32, ulong2(kb, sn + i * 8));
            }
            for (int i = 0; i < 2; ++i) {
                for (int j = 0; j < 4; ++j) {
                    simdgroup_multiply_accumulate(acc[i * 4 + j], mb[i], ma[j], acc[i * 4 + j]);
                }
            }
        }
    }

    device char * d = dst + ulong(i12) * args.nb2 + ulong(i13) * args.nb3;
    const ulong ld = args.nb1 / 4;
    if (m0 + MB_MM_M <= args.ne01 && n0 + MB_MM_N <= args.ne11) {
        device float * out = (device float *) d + ulong(n0 + sn) * ld + ulong(m0 + sm);
        for (int i = 0; i < 2; ++i) {
            for (int j = 0; j < 4; ++j) {
                simdgroup_store(acc[i * 4 + j], out, ld, ulong2(j * 8, i * 8));
            }
        }
    } else {
        threadgroup float * st = (threadgroup float *) shmem;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int i = 0; i < 2; ++i) {
            for (int j = 0; j < 4; ++j) {
                simdgroup_store(acc[i * 4 + j], st, MB_MM_M, ulong2(sm + j * 8, sn + i * 8));
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int e = int(tiitg); e < MB_MM_N * MB_MM_M; e += MB_MM_THREADS) {
            const int n = n0 + e / MB_MM_M;
            const int m = m0 + e % MB_MM_M;
            if (n < args.ne11 && m < args.ne01) {
                *((device float *) d + ulong(n) * ld + ulong(m)) = st[e];
            }
        }
    }
}

// ---------------------------------------------------------------- instantiations

typedef decltype(kernel_mul_mv<float, float>) kernel_mul_mv_t;
typedef decltype(kernel_mul_mv_ext<float, float>) kernel_mul_mv_ext_t;
typedef decltype(kernel_mul_mm<float, float, float, simdgroup_float8x8>) kernel_mul_mm_t;

template [[host_name("kernel_mul_mv_f32_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<float, float>;
template [[host_name("kernel_mul_mv_f16_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<half, float>;
template [[host_name("kernel_mul_mv_bf16_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<mb_bf16, float>;
template [[host_name("kernel_mul_mv_q4_0_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_q4_0, float>;
template [[host_name("kernel_mul_mv_q4_1_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_q4_1, float>;
template [[host_name("kernel_mul_mv_q5_0_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_q5_0, float>;
template [[host_name("kernel_mul_mv_q5_1_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_q5_1, float>;
template [[host_name("kernel_mul_mv_q8_0_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_q8_0, float>;
template [[host_name("kernel_mul_mv_iq4_nl_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_iq4_nl, float>;
template [[host_name("kernel_mul_mv_iq4_xs_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_iq4_xs, float>;
template [[host_name("kernel_mul_mv_mxfp4_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_mxfp4, float>;
template [[host_name("kernel_mul_mv_iq2_xxs_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_iq2_xxs, float>;
template [[host_name("kernel_mul_mv_iq2_xs_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_iq2_xs, float>;
template [[host_name("kernel_mul_mv_iq2_s_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_iq2_s, float>;
template [[host_name("kernel_mul_mv_iq3_xxs_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_iq3_xxs, float>;
template [[host_name("kernel_mul_mv_iq3_s_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_iq3_s, float>;
template [[host_name("kernel_mul_mv_iq1_s_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_iq1_s, float>;
template [[host_name("kernel_mul_mv_iq1_m_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_iq1_m, float>;
template [[host_name("kernel_mul_mv_q2_K_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_q2_K, float>;
template [[host_name("kernel_mul_mv_q3_K_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_q3_K, float>;
template [[host_name("kernel_mul_mv_q4_K_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_q4_K, float>;
template [[host_name("kernel_mul_mv_q5_K_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_q5_K, float>;
template [[host_name("kernel_mul_mv_q6_K_f32")]] kernel kernel_mul_mv_t kernel_mul_mv<block_q6_K, float>;
template [[host_name("kernel_mul_mv_f16_f16")]] kernel kernel_mul_mv_t kernel_mul_mv<half, half>;

template [[host_name("kernel_mul_mv_ext_f32_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<float, float>;
template [[host_name("kernel_mul_mv_ext_f16_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<half, float>;
template [[host_name("kernel_mul_mv_ext_bf16_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<mb_bf16, float>;
template [[host_name("kernel_mul_mv_ext_q4_0_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_q4_0, float>;
template [[host_name("kernel_mul_mv_ext_q4_1_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_q4_1, float>;
template [[host_name("kernel_mul_mv_ext_q5_0_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_q5_0, float>;
template [[host_name("kernel_mul_mv_ext_q5_1_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_q5_1, float>;
template [[host_name("kernel_mul_mv_ext_q8_0_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_q8_0, float>;
template [[host_name("kernel_mul_mv_ext_iq4_nl_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_iq4_nl, float>;
template [[host_name("kernel_mul_mv_ext_iq4_xs_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_iq4_xs, float>;
template [[host_name("kernel_mul_mv_ext_mxfp4_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_mxfp4, float>;
template [[host_name("kernel_mul_mv_ext_iq2_xxs_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_iq2_xxs, float>;
template [[host_name("kernel_mul_mv_ext_iq2_xs_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_iq2_xs, float>;
template [[host_name("kernel_mul_mv_ext_iq2_s_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_iq2_s, float>;
template [[host_name("kernel_mul_mv_ext_iq3_xxs_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_iq3_xxs, float>;
template [[host_name("kernel_mul_mv_ext_iq3_s_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_iq3_s, float>;
template [[host_name("kernel_mul_mv_ext_iq1_s_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_iq1_s, float>;
template [[host_name("kernel_mul_mv_ext_iq1_m_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_iq1_m, float>;
template [[host_name("kernel_mul_mv_ext_q2_K_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_q2_K, float>;
template [[host_name("kernel_mul_mv_ext_q3_K_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_q3_K, float>;
template [[host_name("kernel_mul_mv_ext_q4_K_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_q4_K, float>;
template [[host_name("kernel_mul_mv_ext_q5_K_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_q5_K, float>;
template [[host_name("kernel_mul_mv_ext_q6_K_f32")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<block_q6_K, float>;
template [[host_name("kernel_mul_mv_ext_f16_f16")]] kernel kernel_mul_mv_ext_t kernel_mul_mv_ext<half, half>;

// a tiles in f32 keep every weight type exact (a dequantised q4_1 value needs more than half's 11
// bits); f16 x f16 stays in half, where products are exact and the sums are f32.
template [[host_name("kernel_mul_mm_f32_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<float, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_f16_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<half, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_bf16_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<mb_bf16, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_q4_0_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_q4_0, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_q4_1_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_q4_1, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_q5_0_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_q5_0, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_q5_1_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_q5_1, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_q8_0_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_q8_0, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_iq4_nl_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_iq4_nl, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_iq4_xs_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_iq4_xs, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_mxfp4_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_mxfp4, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_iq2_xxs_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_iq2_xxs, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_iq2_xs_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_iq2_xs, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_iq2_s_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_iq2_s, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_iq3_xxs_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_iq3_xxs, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_iq3_s_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_iq3_s, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_iq1_s_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_iq1_s, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_iq1_m_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_iq1_m, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_q2_K_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_q2_K, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_q3_K_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_q3_K, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_q4_K_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_q4_K, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_q5_K_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_q5_K, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_q6_K_f32")]] kernel kernel_mul_mm_t kernel_mul_mm<block_q6_K, float, float, simdgroup_float8x8>;
template [[host_name("kernel_mul_mm_f16_f16")]] kernel kernel_mul_mm_t kernel_mul_mm<half, half, half, simdgroup_half8x8>;
