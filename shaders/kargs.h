// The host/shader contract: one args struct per kernel family, bound at buffer index 0. Included by
// every .metal file and by the host encoders (src/metal/ops/*.cpp), so both sides agree byte for
// byte. Only int32/uint32/int64/uint64/float fields (no pointers, no bool, no half): the layout is the
// same under Apple's compiler and a host C++ compiler. Names follow ggml: ne0x/nb0x of src0,
// ne1x/nb1x of src1, ne0/nb0 of dst.
#pragma once

#if !defined(__METAL_VERSION__)
#include <cstdint>
#endif

// ------------------------------------------------------------------ elementwise and rows
// (binary, unary, norm, soft_max, reduce)

// Binary ops: the op is the function constant FC_bin_op (MB_BIN_*), the number of src1 operands
// FC_bin_n. A fused chain of ADDs, dst = src0 + s1[0] + ... + s1[n-1], binds operand k at buffer
// 3 + k; each is broadcast over dst by modulo on every dim with its own shape and strides.
#define MB_BIN_ADD 0
#define MB_BIN_SUB 1
#define MB_BIN_MUL 2
#define MB_BIN_DIV 3
#define MB_BIN_MAX_SRC1 8

typedef struct {
    int32_t ne00, ne01, ne02, ne03;
    uint64_t nb00, nb01, nb02, nb03;
    int32_t ne0, ne1, ne2, ne3;
    uint64_t nb0, nb1, nb2, nb3;
    int32_t ne1x[MB_BIN_MAX_SRC1][4];   // ne10..ne13 of each src1 operand
    uint64_t nb1x[MB_BIN_MAX_SRC1][4];  // nb10..nb13 of each src1 operand
} mb_kargs_bin;

// Unary ops on f32: the op is FC_unary_op (MB_UNARY_*); SCALE computes x*p0 + p1, CLAMP clamps to
// [p0, p1]. Contiguous kernels use n only; the strided one the shapes and strides.
// The ids are the Unary rows of the table of ops, in table order: MB_UNARY_SCALE, MB_UNARY_SQR, ...
enum mb_unary_id {
#define MB_OP(NAME, FAMILY, KIND, PY)
#define MB_UNARY(NAME, KIND, PY) MB_UNARY_##NAME,
#include "op_table.h"
    MB_UNARY_COUNT
};

typedef struct {
    uint32_t n;  // elements (float4 kernels: float4s)
    float p0;
    float p1;
    float p2;  // XIELU only: beta
    float p3;  // XIELU only: eps
    int32_t ne00, ne01, ne02, ne03;
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb0, nb1, nb2, nb3;
} mb_kargs_unary;

// GLU: dst[i0] = act(x[i0]) * g[i0] per row, x at element off0 of src0's row, g at element off1 of
// src1's row (the halves of one row: src1 is src0, offsets 0 and ne0 or swapped; the split forms:
// two tensors, offsets 0). The op is FC_glu_op (MB_GLU_*, the Glu rows of op_table.h); SWIGLU_OAI
// uses alpha and limit. One threadgroup per dst row.
enum mb_glu_id {
#define MB_OP(NAME, FAMILY, KIND, PY)
#define MB_UNARY(NAME, KIND, PY)
#define MB_GLU(NAME, PY) MB_GLU_##NAME,
#include "op_table.h"
    MB_GLU_COUNT
};

typedef struct {
    int32_t ne0, ne1, ne2, ne3;  // dst
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb10, nb11, nb12, nb13;
    uint64_t nb0, nb1, nb2, nb3;
    int32_t off0, off1;
    float alpha;
    float limit;
} mb_kargs_glu;

// ARANGE: dst[i] = start + i*step for i < n.
typedef struct {
    uint32_t n;
    float start;
    float step;
    int32_t pad0;
} mb_kargs_arange;

// ARGSORT: per row of src0 (ne00 values, strides nb0x), the i32 indices that sort it (desc != 0:
// descending) into dst (nb0..nb3); npad = ne00 rounded up to a power of two = threads per group.
typedef struct {
    int32_t ne00;
    int32_t npad;
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb0, nb1, nb2, nb3;
    int32_t desc;
    int32_t pad0;
} mb_kargs_argsort;

// MUL_MAT_ID: dst[r, e, t] = sum_k as[ids[e, t]][r][k] * b[t][e % ne11][k]; rows of as and b packed,
// dst packed along r. ids element (e, t) at e*nbi0 + t*nbi1.
typedef struct {
    int32_t ne00, ne02;  // K, experts
    uint64_t nb01, nb02;
    int32_t ne11, pad0;  // b rows per token (1: every expert reads the same)
    uint64_t nb11, nb12;
    uint64_t nbi0, nbi1;
    uint64_t nb1, nb2;
} mb_kargs_mul_mat_id;

// ADD_ID: dst[:, i1, i2, i3] = a[:, i1, i2, i3] + b[:, ids[i1, i2]] (b has ne11 rows).
typedef struct {
    int32_t ne0, ne11;
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb10, nb11;
    uint64_t nbi0, nbi1;
    uint64_t nb0, nb1, nb2, nb3;
} mb_kargs_add_id;

// TIMESTEP_EMBEDDING: timestep i at i*nb00, its row at i*nb1 (packed).
typedef struct {
    uint64_t nb00, nb1;
    int32_t dim, half_dim, max_period, pad0;
} mb_kargs_timestep_embedding;

// GROUP_NORM: for each (group, i3), the channels [g*per, min((g+1)*per, ne02)) with per =
// ceil(ne02 / n_groups), all of dims 0 and 1, normalised together: (x - mean) / sqrt(var + eps).
typedef struct {
    int32_t ne00, ne01, ne02, n_groups;
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb0, nb1, nb2, nb3;
    float eps;
    int32_t pad0;
} mb_kargs_group_norm;

// CONV_TRANSPOSE_1D: kernel [k, OC, ic] (nb0x), data [l, ic, N] (nb1x), dst [ol, OC, N] (nb0..nb2).
typedef struct {
    int32_t k, ic, l, ol;
    int32_t s0, p0, d0, pad0;
    uint64_t nb00, nb01, nb02;
    uint64_t nb10, nb11, nb12;
    uint64_t nb0, nb1, nb2;
} mb_kargs_conv_transpose_1d;

// POOL_2D over src0 [ne00, ne01, C, N] into dst rows of ne0; avg != 0: average, else max.
typedef struct {
    int32_t ne00, ne01, ne0, avg;
    int32_t k0, k1, s0, s1;
    int32_t p0, p1;
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb0, nb1, nb2, nb3;
} mb_kargs_pool_2d;

// UPSCALE: scale factors sf_d = dst.ne[d] / src0.ne[d] (align corners: (ne_d - 1) / (ne0_d - 1) on
// dims 0, 1); mode MB_SCALE_* (bilinear and bicubic act on dims 0, 1, sample at (i + offset) / sf - offset),
// | MB_SCALE_ANTIALIAS for bilinear's triangle filter of half-width max(1, 1 / sf) (ggml's bit 9).
#define MB_SCALE_NEAREST 0
#define MB_SCALE_BILINEAR 1
#define MB_SCALE_BICUBIC 2
#define MB_SCALE_ALIGN_CORNERS 256
#define MB_SCALE_ANTIALIAS 512
typedef struct {
    int32_t ne0, ne00, ne01, mode;
    float sf0, sf1, sf2, sf3;
    float offset;
    int32_t pad0;
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb0, nb1, nb2, nb3;
} mb_kargs_upscale;

// SSM_CONV: sx [d_conv - 1 + n_t, d_inner, n_s] (nb0x), c [d_conv, d_inner] (nb1x), dst [d_inner = ne0,
// n_t, n_s].
typedef struct {
    int32_t ne0, d_conv;
    uint64_t nb00, nb01, nb02;
    uint64_t nb10, nb11;
    uint64_t nb0, nb1, nb2;
} mb_kargs_ssm_conv;

// SSM_SCAN: s [d_state = nc, head_dim = nr, n_head = nh, *] (state of sequence ids[i3] at ids[i3] * nb03),
// x [nr, nh, nt, ns] (nb1x), dt [nh, nt, ns] (nb2x), A [nc or 1 = ne30, nh], B and C [nc, ng, nt, ns] (nb4x,
// nb5x), ids i32 [ns]; dst: y [nr, nh, nt, ns] packed, then the final states at byte s_off, nb03 apart.
typedef struct {
    int32_t nc, nr, nh, ng;
    int32_t nt, ns, ne30, n_states;
    uint64_t nb03;
    uint64_t nb12, nb13;
    uint64_t nb21, nb22;
    uint64_t nb31;
    uint64_t nb42, nb43;
    uint64_t nb52, nb53;
    uint64_t s_off;
} mb_kargs_ssm_scan;

// RWKV_WKV6 / RWKV_WKV7: head size S, H heads, T tokens in n_seqs sequences of T / n_seqs; all inputs
// packed f32; dst [S*H, T] y, then the states [S*S*H, n_seqs].
typedef struct {
    int32_t S, H, T, n_seqs;
} mb_kargs_rwkv_wkv;

// ACC: dst (n f32, contiguous) = src0 + src1 [ne10..ne13] (strides nb10..nb13) added into the view
// of dst at byte offset `offset` with byte strides 4, nb1, nb2, nb3 (nested: nb1 >= 4*ne10, ...).
typedef struct {
    uint32_t n;
    int32_t ne10, ne11, ne12, ne13;
    int32_t pad0;
    uint64_t nb10, nb11, nb12, nb13;
    uint64_t nb1, nb2, nb3;
    uint64_t offset;
} mb_kargs_acc;

// NORM / RMS_NORM / L2_NORM over rows of src0 (contiguous rows), optionally followed by dst = y*w (FC_norm_fuse
// >= 1) and + b (FC_norm_fuse == 2), w and b broadcast by modulo on every dim. nk, ne10 and ne20
// count the kernel's element type (floats, or float4s for the float4 kernels).
typedef struct {
    int32_t ne00, ne01, ne02, ne03;
    uint64_t nb01, nb02, nb03;
    uint64_t nb1, nb2, nb3;
    int32_t ne10, ne11, ne12, ne13;  // w
    uint64_t nb11, nb12, nb13;
    int32_t ne20, ne21, ne22, ne23;  // b
    uint64_t nb21, nb22, nb23;
    int32_t nk;
    float eps;
} mb_kargs_norm;

// SOFT_MAX: softmax(x*scale + slope*mask) per row, mask rows (i01, i02 % ne12, i03 % ne13); ALiBi
// slope of head h (= i02): m0^(h+1) below n_head_log2, else m1^(2(h - n_head_log2) + 1); slope 1
// when max_bias is 0. Mask and sinks are enabled by FC_soft_max_mask / FC_soft_max_sinks.
typedef struct {
    int32_t ne00, ne01, ne02, ne03;
    uint64_t nb01, nb02, nb03;
    int32_t ne11, ne12, ne13;
    uint64_t nb11, nb12, nb13;
    uint64_t nb1, nb2, nb3;
    int32_t nk;  // row length in the kernel's element type
    float scale;
    float max_bias;
    float m0;
    float m1;
    int32_t n_head_log2;
} mb_kargs_soft_max;

// SUM_ROWS / MEAN (mean != 0 divides by ne00) and ARGMAX (dst i32, one per row), any src0 strides.
typedef struct {
    int32_t ne00, ne01, ne02, ne03;
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb1, nb2, nb3;
    int32_t mean;
} mb_kargs_reduce;

// ------------------------------------------------------------------ matrices and data movement
// (mul_mat, get_rows, set_rows, cpy, im2col)

// MUL_MAT: dst[i13][i12][i1][i0] = sum_k a[i13/r3][i12/r2][i0][k] * b[i13][i12][i1][k]. Rows of a and
// b are packed (nb00, nb10 = element or block size); dst is packed along ne0. The three kernels
// (mat-vec, small-batch mat-vec, simdgroup-matrix tiles) share this struct.
//   mat-vec: MB_MV_NSG simdgroups of MB_MV_NR rows of a each per threadgroup, one b column
//   (kernel_mul_mv_*) or FC_mul_mv_ext_cols <= MB_MV_EXT_MAX columns (kernel_mul_mv_ext_*);
//   tiles: MB_MM_THREADS threads per MB_MM_M x MB_MM_N block of dst (rows of a x columns of b).
#define MB_MV_NSG 2
#define MB_MV_NR 4
#define MB_MV_EXT_MAX 8
#define MB_FC_MUL_MV_EXT_COLS 600
#define MB_MM_M 64
#define MB_MM_N 32
#define MB_MM_THREADS 128

typedef struct {
    uint64_t nb01, nb02, nb03;  // a
    uint64_t nb11, nb12, nb13;  // b
    uint64_t nb1, nb2, nb3;     // dst
    int32_t ne00, ne01;         // K, rows of a (= ne0)
    int32_t ne11, ne12;         // columns of b (= ne1), b matrices along dim 2
    int32_t r2, r3;             // b matrices per a matrix along dims 2 and 3
} mb_kargs_mul_mat;

// GET_ROWS: dst[i12][i11][i10] = a[i12][i11][idx[i12][i11][i10]] as f32; one threadgroup per dst row.
typedef struct {
    uint64_t nb00, nb01, nb02, nb03;  // a (nb00 only used by the plain types)
    uint64_t nb10, nb11, nb12;        // idx
    uint64_t nb0, nb1, nb2, nb3;      // dst
    int32_t ne00, ne01;               // row length, rows of a (indices are checked against it)
} mb_kargs_get_rows;

// SET_ROWS: dst[i03][i02][idx[i03 % ne12][i02 % ne11][i01]] = src[i03][i02][i01] converted to dst's
// type; one threadgroup per src row.
typedef struct {
    uint64_t nb00, nb01, nb02, nb03;  // src (f32)
    uint64_t nb10, nb11, nb12;        // idx
    uint64_t nb0, nb1, nb2, nb3;      // dst (nb0 only used by the plain types)
    int32_t ne00;                     // row length
    int32_t ne11, ne12;               // idx broadcast sizes
    int32_t ne1;                      // rows of dst (indices are checked against it)
} mb_kargs_set_rows;

// DUP/CPY/CONT: src elements in logical order written to dst elements in logical order. One
// threadgroup per src row (ne01, ne02, ne03). same_rows (ne00 == ne0): each src row is one whole dst
// row, found from the row's flat index; otherwise every element's dst coordinates are computed.
typedef struct {
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb0, nb1, nb2, nb3;
    int32_t ne00, ne01, ne02;
    int32_t ne0, ne1, ne2;
    int32_t same_rows;
    int32_t pad0;
} mb_kargs_cpy;

// IM2COL (2-D; the 1-D form is KH = IH = OH = 1): dst row (n, oy, ox) holds, for every (ic, ky, kx),
// data[n][ic][oy*s1 + ky*d1 - p1][ox*s0 + kx*d0 - p0] or 0 outside. One threadgroup per dst row.
typedef struct {
    uint64_t nb10, nb11, nb12, nb13;  // data: x, y, channel, batch
    uint64_t nb1, nb2, nb3;           // dst: ox, oy, n (nb0 is the element size)
    int32_t iw, ih;
    int32_t kw, kh;
    int32_t s0, s1, p0, p1, d0, d1;
    int32_t chw;  // dst row length: channels * kh * kw
    int32_t pad0;
} mb_kargs_im2col;

// ------------------------------------------------------------------ attention and layout
// (flash_attn_ext, rope, concat, repeat, pad)

// Function constants of the flash attention kernels: keys per k/v tile (tiled kernel) and head size.
#define MB_FC_FA_N_KV_TILE 700
#define MB_FC_FA_D 701

// FLASH_ATTN_EXT: q [D, n_q, H, B] (ne0x/nb0x), k (nb1x) and v (nb2x) [D, n_kv, H_kv, B_kv], mask
// [n_kv, >= n_q, ne32, ne33] (nb3x) read at (key, q row, h % ne32, b % ne33), dst [D, H, n_q, B]
// (nb1..nb3). q heads h use k/v head h / (ne02 / ne12), batch b uses b / (ne03 / ne13). ALiBi
// slopes as mb_kargs_soft_max. The tiled kernel walks the keys a tile at a time; the vector
// kernel splits them over nwg workgroups whose partial results go to the scratch area behind dst
// (bound as dst's buffer: the scratch starts scratch_offs bytes in).
typedef struct {
    int32_t ne01, ne02, ne03;
    int32_t ne11, ne12, ne13;
    int32_t ne32, ne33;
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb10, nb11, nb12, nb13;
    uint64_t nb20, nb21, nb22, nb23;
    uint64_t nb30, nb31, nb32, nb33;
    uint64_t nb1, nb2, nb3;
    uint64_t scratch_offs;  // vector kernel: bytes from dst's start to the scratch area
    float scale;
    float softcap;  // 0: off
    float max_bias;
    float m0;
    float m1;
    int32_t n_head_log2;
    int32_t has_mask;
    int32_t mask_f32;  // mask element type: f32 (1) or f16 (0)
    int32_t nwg;       // vector kernel: workgroups along the keys
    int32_t pad0;
} mb_kargs_flash_attn_ext;

// Combines the nwg partial results (o[d], max, sum) per dst row that the vector kernel left in the
// scratch area: rows r = (b*ne01 + iq)*ne02 + h; o at floats (r*nwg + w)*dv, then (max, sum) pairs
// at floats nrows*nwg*dv + (r*nwg + w)*2.
typedef struct {
    int32_t ne01, ne02, ne03;
    int32_t dv;
    int32_t nwg;
    int32_t pad0;
    uint64_t nb1, nb2, nb3;
    uint64_t scratch_offs;  // bytes from dst's start to the scratch area
} mb_kargs_flash_attn_ext_reduce;

// ROPE on rows of src0 [ne00, ne01, ne02, ne03] with positions pos[i02] (stride nbp0). Pair i
// turns by theta = mix of pos*freq_scale*f_i (interpolated) and pos*f_i (extrapolated), f_i =
// exp2(i*theta_log2) = freq_base^(-2i/n_dims); the YaRN ramp over [corr_dim0, corr_dim1] mixes when
// ext_factor != 0. cos and sin are multiplied by mscale (attn_factor, YaRN-corrected on the host).
typedef struct {
    int32_t ne00, ne01, ne02, ne03;
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb0, nb1, nb2, nb3;
    uint64_t nbp0;
    int32_t n_dims;
    float theta_log2;
    float freq_scale;
    float ext_factor;
    float mscale;
    float corr_dim0;
    float corr_dim1;
    int32_t pad0;
} mb_kargs_rope;

// CONCAT of src0 and src1 along dim (0..3) into dst.
typedef struct {
    int32_t ne00, ne01, ne02, ne03;
    uint64_t nb00, nb01, nb02, nb03;
    uint64_t nb10, nb11, nb12, nb13;
    int32_t ne0, ne1, ne2, ne3;
    uint64_t nb0, nb1, nb2, nb3;
    int32_t dim;
    int32_t pad0;
} mb_kargs_concat;

// REPEAT: dst[i] = src0[i mod ne0x] on every dim.
typedef struct {
    int32_t ne00, ne01, ne02, ne03;
    uint64_t nb00, nb01, nb02, nb03;
    int32_t ne0, ne1, ne2, ne3;
    uint64_t nb0, nb1, nb2, nb3;
} mb_kargs_repeat;

// PAD: dst[i] = src0[i] inside src0's extent, 0 past it.
typedef struct {
    int32_t ne00, ne01, ne02, ne03;
    uint64_t nb00, nb01, nb02, nb03;
    int32_t ne0, ne1, ne2, ne3;
    uint64_t nb0, nb1, nb2, nb3;
} mb_kargs_pad;

// PAD_REFLECT_1D: dst[i0] = src0[reflect(i0 - p0)] along ne0 (mirrored about the first and last
// element); the other dims are src0's.
typedef struct {
    int32_t ne00, ne01, ne02, ne03;
    uint64_t nb00, nb01, nb02, nb03;
    int32_t ne0, ne1, ne2, ne3;
    uint64_t nb0, nb1, nb2, nb3;
    int32_t p0, p1;
} mb_kargs_pad_reflect_1d;

// The layout asserts of every struct above, generated from this file (tools/kargs_layout.py).
#include "kargs_layout.h"
