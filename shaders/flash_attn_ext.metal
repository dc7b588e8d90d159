// FLASH_ATTN_EXT: dst = softmax(q.k^T * scale [softcapped] + slope*mask) . v per (q row, head),
// without materialising the score matrix: an online softmax keeps a running max m and denominator l
// per q row and rescales the output accumulator whenever m grows.
//
// Two paths (METAL-SPEC):
//   - tiled (many q rows): each simdgroup owns 8 q rows; the threadgroup stages a tile of keys of k
//     and v in threadgroup memory and every simdgroup computes its 8 x tile scores and the
//     8 x D output update with 8x8 simdgroup matrices;
//   - vector (few q rows): one simdgroup per (q row, head, workgroup) walks every nwg-th block of
//     32 keys, one key per lane; its partial (o, m, l) goes to the scratch area behind dst and
//     kernel_flash_attn_ext_vec_reduce combines the nwg partials of each row.
// The head size D is a function constant: each pipeline is compiled for one D, so the loops over
// D unroll and the output accumulators (arrays sized for the largest D) stay in registers, without a
// kernel per head size. k and v are f16, f32, bf16 or quantized (KV: their element or block type);
// bf16 and quantized values are staged as f32 (a block value q*d is not exact in f16), the products
// taking q and the probabilities unrounded (the CPU rounds both to bf16 for bf16 k/v).
#include <metal_stdlib>
#include "kargs.h"
#include "quants.h"

using namespace metal;

// Keys per k/v tile of the tiled kernel: 8, 16 or 32.
constant int FC_fa_n_kv_tile [[function_constant(MB_FC_FA_N_KV_TILE)]];
// Head size: 40, 64, 80, 96, 112, 128, 192 or 256 (a multiple of 32 for quantized k/v).
constant int FC_fa_d [[function_constant(MB_FC_FA_D)]];

#define MB_FA_MAX_D 256

// ALiBi slope of head h; 1 without max_bias.
static inline float fa_slope(constant mb_kargs_flash_attn_ext & args, int h) {
    if (args.max_bias <= 0.0f) {
        return 1.0f;
    }
    return h < args.n_head_log2 ? pow(args.m0, float(h + 1)) : pow(args.m1, float(2 * (h - args.n_head_log2) + 1));
}

// The mask row of q row iq, head h, batch b (the mask broadcasts over heads and batches).
static inline device const char * fa_mask_row(constant mb_kargs_flash_attn_ext & args, device const char * mask,
                                              int iq, int h, int b) {
    if (!args.has_mask) {
        return mask;
    }
    return mask + (ulong) iq * args.nb31 + (ulong) (h % args.ne32) * args.nb32 + (ulong) (b % args.ne33) * args.nb33;
}

// Element d of a k or v row (row: its first byte; nb0: the element stride of plain types).
static inline float fa_elem(device const half * row, ulong nb0, int d) {
    return float(*((device const half *) ((device const char *) row + (ulong) d * nb0)));
}

static inline float fa_elem(device const float * row, ulong nb0, int d) {
    return *((device const float *) ((device const char *) row + (ulong) d * nb0));
}

static inline float fa_elem(device const mb_bf16 * row, ulong nb0, int d) {
    return mb_to_float(*((device const mb_bf16 *) ((device const char *) row + (ulong) d * nb0)));
}

// Nibble j of a 32-element block: element j < 16 is the low nibble of qs[j], j + 16 the high one.
static inline int fa_nibble(device const uchar * qs, int j) {
    return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
}

static inline float fa_elem(device const block_q4_0 * row, ulong, int d) {
    device const block_q4_0 * b = row + d / MB_QK;
    return float(fa_nibble(b->qs, d % MB_QK) - MB_QB_ZERO_Q4_0) * float(b->d);
}

static inline float fa_elem(device const block_q4_1 * row, ulong, int d) {
    device const block_q4_1 * b = row + d / MB_QK;
    return float(fa_nibble(b->qs, d % MB_QK)) * float(b->d) + float(b->m);
}

static inline float fa_elem(device const block_q5_0 * row, ulong, int d) {
    device const block_q5_0 * b = row + d / MB_QK;
    const int j = d % MB_QK;
    const int q = fa_nibble(b->qs, j) | int(((mb_load_qh(b->qh) >> j) & 1u) << 4);
    return float(q - MB_QB_ZERO_Q5_0) * float(b->d);
}

static inline float fa_elem(device const block_q5_1 * row, ulong, int d) {
    device const block_q5_1 * b = row + d / MB_QK;
    const int j = d % MB_QK;
    const int q = fa_nibble(b->qs, j) | int(((mb_load_qh(b->qh) >> j) & 1u) << 4);
    return float(q) * float(b->d) + float(b->m);
}

static inline float fa_elem(device const block_q8_0 * row, ulong, int d) {
    device const block_q8_0 * b = row + d / MB_QK;
    return float(b->qs[d % MB_QK]) * float(b->d);
}

static inline float fa_mask(device const char * p, int mask_f32) {
    return mask_f32 ? *((device const float *) p) : float(*((device const half *) p));
}

// A raw score (q already scaled) with the softcap and the mask applied.
static inline float fa_score(constant mb_kargs_flash_attn_ext & args, float s, device const char * mrow, int ik,
                             float slope) {
    if (args.softcap > 0.0f) {
        s = args.softcap * tanh(s / args.softcap);
    }
    if (args.has_mask) {
        s += slope * fa_mask(mrow + (ulong) ik * args.nb30, args.mask_f32);
    }
    return s;
}

// Tiled path. Grid: (ceil(n_q / (8*nsg)), H, B); nsg simdgroups per threadgroup.
// Threadgroup memory 0: the k tile then the v tile (FC_fa_n_kv_tile x D each, in T: half for f16
// k/v, else float). Threadgroup memory 1,
// per simdgroup: its q rows (8 x D, later its output rows), its scores (8 x tile) and an 8x8
// diagonal matrix that rescales the output rows.
template <typename KV, typename T, typename MT>
kernel void kernel_flash_attn_ext(
        constant mb_kargs_flash_attn_ext & args [[buffer(0)]],
        device const char * q [[buffer(1)]],
        device const char * k [[buffer(2)]],
        device const char * v [[buffer(3)]],
        device const char * mask [[buffer(4)]],
        device char * dst [[buffer(5)]],
        threadgroup T * kv [[threadgroup(0)]],
        threadgroup float * sgmem [[threadgroup(1)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]],
        ushort nsg [[simdgroups_per_threadgroup]]) {
    const int C = FC_fa_n_kv_tile;
    const int D = FC_fa_d;
    const int h = tgpig.y;
    const int b = tgpig.z;
    const int hk = h / (args.ne02 / args.ne12);
    const int bk = b / (args.ne03 / args.ne13);
    const int iq0 = (tgpig.x * nsg + sgitg) * 8;
    const int ntg = nsg * 32;

    threadgroup T * kt = kv;
    threadgroup T * vt = kv + C * D;
    threadgroup float * qs = sgmem + sgitg * (8 * D + 8 * C + 64);
    threadgroup float * ss = qs + 8 * D;
    threadgroup float * ds = ss + 8 * C;

    device const char * kh = k + hk * args.nb12 + bk * args.nb13;
    device const char * vh = v + hk * args.nb22 + bk * args.nb23;

    for (int i = tiisg; i < 8 * D; i += 32) {
        const int iq = iq0 + i / D;
        float x = 0.0f;
        if (iq < args.ne01) {
            x = *((device const float *) (q + (ulong) (i % D) * args.nb00 + (ulong) iq * args.nb01 +
                                          (ulong) h * args.nb02 + (ulong) b * args.nb03)) * args.scale;
        }
        qs[i] = x;
    }
    for (int i = tiisg; i < 64; i += 32) {
        ds[i] = 0.0f;
    }

    // Softmax lanes: 4 per q row, each owning a quarter of the tile's columns.
    const int r = tiisg / 4;
    const int part = tiisg % 4;
    const int iq = iq0 + r;
    const bool row_valid = iq < args.ne01;
    const float slope = fa_slope(args, h);
    device const char * mrow = row_valid ? fa_mask_row(args, mask, iq, h, b) : mask;
    float m = -INFINITY;
    float l = 0.0f;  // this lane's part of the row's denominator

    simdgroup_float8x8 o[MB_FA_MAX_D / 8];
    for (int t = 0; t < D / 8; ++t) {
        o[t] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }

    for (int ic = 0; ic < args.ne11; ic += C) {
        // Every simdgroup is done with the previous tile before it is overwritten.
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // Element i of the tile is (key ic + j, d); j and d advance without a division.
        int j = tiitg / D;
        int d = tiitg % D;
        for (int i = tiitg; i < C * D; i += ntg) {
            const int ik = ic + j;
            T kx = T(0.0f);
            T vx = T(0.0f);
            if (ik < args.ne11) {
                kx = T(fa_elem((device const KV *) (kh + (ulong) ik * args.nb11), args.nb10, d));
                vx = T(fa_elem((device const KV *) (vh + (ulong) ik * args.nb21), args.nb20, d));
            }
            kt[i] = kx;
            vt[i] = vx;
            d += ntg;
            while (d >= D) {
                d -= D;
                ++j;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        // Scores: S (8 x C) = Q (8 x D) . K^T (D x C).
        for (int jb = 0; jb < C / 8; ++jb) {
            simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
            for (int db = 0; db < D / 8; ++db) {
                simdgroup_float8x8 mq;
                MT mk;
                simdgroup_load(mq, qs + db * 8, D);
                simdgroup_load(mk, kt + jb * 8 * D + db * 8, D, ulong2(0, 0), true);
                simdgroup_multiply_accumulate(acc, mq, mk, acc);
            }
            simdgroup_store(acc, ss + jb * 8, C);
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);

        // Online softmax of row r over this tile: scores become probabilities in place.
        const int cpl = C / 4;
        threadgroup float * srow = ss + r * C + part * cpl;
        float mx = -INFINITY;
        for (int j = 0; j < cpl; ++j) {
            const int ik = ic + part * cpl + j;
            float s = -INFINITY;
            if (row_valid && ik < args.ne11) {
                s = fa_score(args, srow[j], mrow, ik, slope);
            }
            srow[j] = s;
            mx = max(mx, s);
        }
        mx = max(mx, simd_shuffle_xor(mx, 1));
        mx = max(mx, simd_shuffle_xor(mx, 2));
        const float mn = max(m, mx);
        // A row with every key so far masked out keeps m = -inf and adds nothing.
        const bool none = mn == -INFINITY;
        const float alpha = none ? 1.0f : exp(m - mn);
        float sum = 0.0f;
        for (int j = 0; j < cpl; ++j) {
            const float p = none ? 0.0f : exp(srow[j] - mn);
            srow[j] = p;
            sum += p;
        }
        l = l * alpha + sum;
        m = mn;
        if (part == 0) {
            ds[r * 9] = alpha;
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);

        // O (8 x D) = diag(alpha) . O + P (8 x C) . V (C x D).
        simdgroup_float8x8 md;
        simdgroup_float8x8 mp[4];
        simdgroup_load(md, ds, 8);
        for (int jb = 0; jb < C / 8; ++jb) {
            simdgroup_load(mp[jb], ss + jb * 8, C);
        }
        for (int t = 0; t < D / 8; ++t) {
            simdgroup_multiply(o[t], md, o[t]);
            for (int jb = 0; jb < C / 8; ++jb) {
                MT mv;
                simdgroup_load(mv, vt + jb * 8 * D + t * 8, D);
                simdgroup_multiply_accumulate(o[t], mp[jb], mv, o[t]);
            }
        }
    }

    l += simd_shuffle_xor(l, 1);
    l += simd_shuffle_xor(l, 2);
    if (part == 0) {
        // A row whose keys were all masked out gets zeros.
        ds[r * 9] = l == 0.0f ? 0.0f : 1.0f / l;
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_float8x8 md;
    simdgroup_load(md, ds, 8);
    for (int t = 0; t < D / 8; ++t) {
        simdgroup_multiply(o[t], md, o[t]);
        simdgroup_store(o[t], qs + t * 8, D);
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    for (int i = tiisg; i < 8 * D; i += 32) {
        const int iqo = iq0 + i / D;
        if (iqo < args.ne01) {
            *((device float *) (dst + (ulong) (i % D) * sizeof(float) + (ulong) h * args.nb1 + (ulong) iqo * args.nb2 +
                                (ulong) b * args.nb3)) = qs[i];
        }
    }
}

typedef decltype(kernel_flash_attn_ext<half, half, simdgroup_half8x8>) kernel_flash_attn_ext_f16_t;
typedef decltype(kernel_flash_attn_ext<float, float, simdgroup_float8x8>) kernel_flash_attn_ext_f32_t;

template [[host_name("kernel_flash_attn_ext_f16")]] kernel kernel_flash_attn_ext_f16_t kernel_flash_attn_ext<half, half, simdgroup_half8x8>;
template [[host_name("kernel_flash_attn_ext_f32")]] kernel kernel_flash_attn_ext_f32_t kernel_flash_attn_ext<float, float, simdgroup_float8x8>;
template [[host_name("kernel_flash_attn_ext_bf16")]] kernel kernel_flash_attn_ext_f32_t kernel_flash_attn_ext<mb_bf16, float, simdgroup_float8x8>;
template [[host_name("kernel_flash_attn_ext_q4_0")]] kernel kernel_flash_attn_ext_f32_t kernel_flash_attn_ext<block_q4_0, float, simdgroup_float8x8>;
template [[host_name("kernel_flash_attn_ext_q4_1")]] kernel kernel_flash_attn_ext_f32_t kernel_flash_attn_ext<block_q4_1, float, simdgroup_float8x8>;
template [[host_name("kernel_flash_attn_ext_q5_0")]] kernel kernel_flash_attn_ext_f32_t kernel_flash_attn_ext<block_q5_0, float, simdgroup_float8x8>;
template [[host_name("kernel_flash_attn_ext_q5_1")]] kernel kernel_flash_attn_ext_f32_t kernel_flash_attn_ext<block_q5_1, float, simdgroup_float8x8>;
template [[host_name("kernel_flash_attn_ext_q8_0")]] kernel kernel_flash_attn_ext_f32_t kernel_flash_attn_ext<block_q8_0, float, simdgroup_float8x8>;

// Vector path. Grid: (n_q, H, B * nwg); one simdgroup per threadgroup; dst is bound with its
// scratch area. Threadgroup memory 0: the
// scaled q row (D floats) and the block's probabilities (32 floats). Workgroup w takes key blocks
// w, w + nwg, ...; lane j scores key 32*block + j, then every lane adds the block's p . v into the
// output elements d = lane + 32i it owns.
template <typename KV>
kernel void kernel_flash_attn_ext_vec(
        constant mb_kargs_flash_attn_ext & args [[buffer(0)]],
        device const char * q [[buffer(1)]],
        device const char * k [[buffer(2)]],
        device const char * v [[buffer(3)]],
        device const char * mask [[buffer(4)]],
        device char * dst [[buffer(5)]],
        threadgroup float * shmem [[threadgroup(0)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiisg [[thread_index_in_simdgroup]]) {
    const int D = FC_fa_d;
    const int NO = (D + 31) / 32;
    const int iq = tgpig.x;
    const int h = tgpig.y;
    const int b = tgpig.z / args.nwg;
    const int wg = tgpig.z % args.nwg;
    const int hk = h / (args.ne02 / args.ne12);
    const int bk = b / (args.ne03 / args.ne13);

    threadgroup float * qs = shmem;
    threadgroup float * ps = shmem + D;

    device const char * qrow = q + (ulong) iq * args.nb01 + (ulong) h * args.nb02 + (ulong) b * args.nb03;
    for (int d = tiisg; d < D; d += 32) {
        qs[d] = *((device const float *) (qrow + (ulong) d * args.nb00)) * args.scale;
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);

    device const char * kh = k + hk * args.nb12 + bk * args.nb13;
    device const char * vh = v + hk * args.nb22 + bk * args.nb23;
    const float slope = fa_slope(args, h);
    device const char * mrow = fa_mask_row(args, mask, iq, h, b);

    float o[MB_FA_MAX_D / 32];
    for (int i = 0; i < NO; ++i) {
        o[i] = 0.0f;
    }
    float m = -INFINITY;
    float l = 0.0f;  // this lane's part of the denominator

    for (int blk = wg; blk * 32 < args.ne11; blk += args.nwg) {
        const int ik = blk * 32 + tiisg;
        float s = -INFINITY;
        if (ik < args.ne11) {
            device const KV * krow = (device const KV *) (kh + (ulong) ik * args.nb11);
            float acc = 0.0f;
            for (int d = 0; d < D; ++d) {
                acc += qs[d] * fa_elem(krow, args.nb10, d);
            }
            s = fa_score(args, acc, mrow, ik, slope);
        }
        const float mn = max(m, simd_max(s));
        const bool none = mn == -INFINITY;
        const float alpha = none ? 1.0f : exp(m - mn);
        const float p = none ? 0.0f : exp(s - mn);
        l = l * alpha + p;
        m = mn;
        for (int i = 0; i < NO; ++i) {
            o[i] *= alpha;
        }
        // The previous block's probabilities have been read by every lane.
        simdgroup_barrier(mem_flags::mem_threadgroup);
        ps[tiisg] = p;
        simdgroup_barrier(mem_flags::mem_threadgroup);
        const int nj = min(32, args.ne11 - blk * 32);
        for (int j = 0; j < nj; ++j) {
            const float pj = ps[j];
            device const KV * vrow = (device const KV *) (vh + (ulong) (blk * 32 + j) * args.nb21);
            for (int i = 0; i < NO; ++i) {
                const int d = tiisg + 32 * i;
                if (d < D) {
                    o[i] += pj * fa_elem(vrow, args.nb20, d);
                }
            }
        }
    }
    l = simd_sum(l);

    device float * scratch = (device float *) (dst + args.scratch_offs);
    const ulong row = ((ulong) b * args.ne01 + iq) * args.ne02 + h;
    const ulong nrows = (ulong) args.ne01 * args.ne02 * args.ne03;
    device float * op = scratch + (row * args.nwg + wg) * D;
    for (int i = 0; i < NO; ++i) {
        const int d = tiisg + 32 * i;
        if (d < D) {
            op[d] = o[i];
        }
    }
    if (tiisg == 0) {
        device float * ml = scratch + nrows * args.nwg * D + (row * args.nwg + wg) * 2;
        ml[0] = m;
        ml[1] = l;
    }
}

typedef decltype(kernel_flash_attn_ext_vec<half>) kernel_flash_attn_ext_vec_t;

template [[host_name("kernel_flash_attn_ext_vec_f16")]] kernel kernel_flash_attn_ext_vec_t kernel_flash_attn_ext_vec<half>;
template [[host_name("kernel_flash_attn_ext_vec_f32")]] kernel kernel_flash_attn_ext_vec_t kernel_flash_attn_ext_vec<float>;
template [[host_name("kernel_flash_attn_ext_vec_bf16")]] kernel kernel_flash_attn_ext_vec_t kernel_flash_attn_ext_vec<mb_bf16>;
template [[host_name("kernel_flash_attn_ext_vec_q4_0")]] kernel kernel_flash_attn_ext_vec_t kernel_flash_attn_ext_vec<block_q4_0>;
template [[host_name("kernel_flash_attn_ext_vec_q4_1")]] kernel kernel_flash_attn_ext_vec_t kernel_flash_attn_ext_vec<block_q4_1>;
template [[host_name("kernel_flash_attn_ext_vec_q5_0")]] kernel kernel_flash_attn_ext_vec_t kernel_flash_attn_ext_vec<block_q5_0>;
template [[host_name("kernel_flash_attn_ext_vec_q5_1")]] kernel kernel_flash_attn_ext_vec_t kernel_flash_attn_ext_vec<block_q5_1>;
template [[host_name("kernel_flash_attn_ext_vec_q8_0")]] kernel kernel_flash_attn_ext_vec_t kernel_flash_attn_ext_vec<block_q8_0>;

// Combines the vector kernel's partials: with M = max_w m_w, row = sum_w o_w e^(m_w - M) /
// sum_w l_w e^(m_w - M). Grid: (H, n_q, B). Every thread recomputes the 32 weights itself, so the
// kernel needs no synchronisation.
kernel void kernel_flash_attn_ext_vec_reduce(
        constant mb_kargs_flash_attn_ext_reduce & args [[buffer(0)]],
        device char * dst [[buffer(1)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int h = tgpig.x;
    const int iq = tgpig.y;
    const int b = tgpig.z;
    const ulong row = ((ulong) b * args.ne01 + iq) * args.ne02 + h;
    const ulong nrows = (ulong) args.ne01 * args.ne02 * args.ne03;
    device const float * scratch = (device const float *) (dst + args.scratch_offs);
    device const float * o = scratch + row * args.nwg * args.dv;
    device const float * ml = scratch + nrows * args.nwg * args.dv + row * args.nwg * 2;

    float mmax = -INFINITY;
    for (int w = 0; w < args.nwg; ++w) {
        mmax = max(mmax, ml[2 * w]);
    }
    float lsum = 0.0f;
    if (mmax != -INFINITY) {
        for (int w = 0; w < args.nwg; ++w) {
            lsum += ml[2 * w + 1] * exp(ml[2 * w] - mmax);
        }
    }
    const float inv = lsum == 0.0f ? 0.0f : 1.0f / lsum;

    device float * y = (device float *) (dst + (ulong) h * args.nb1 + (ulong) iq * args.nb2 + (ulong) b * args.nb3);
    for (int d = tiitg; d < args.dv; d += ntg) {
        float acc = 0.0f;
        if (lsum != 0.0f) {
            for (int w = 0; w < args.nwg; ++w) {
                const float mw = ml[2 * w];
                if (mw != -INFINITY) {
                    acc += o[w * args.dv + d] * exp(mw - mmax);
                }
            }
        }
        y[d] = acc * inv;
    }
}
