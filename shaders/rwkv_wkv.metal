// RWKV_WKV6 and RWKV_WKV7 over packed f32: one threadgroup per (head, sequence); each thread owns the
// state entries of its index of the head (WKV6: column j, WKV7: row i), kept in the output's state area
// while it walks the sequence's tokens.
//   WKV6: kv = k[i] v[j]; y[j] = sum_i r[i] (tf[i] kv + M[i, j]); M[i, j] = M[i, j] td[i] + kv
//   WKV7: sa = sum_j a[j] M[i, j]; M[i, j] = M[i, j] w[j] + v[i] k[j] + sa b[j]; y[i] = sum_j M[i, j] r[j]
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_rwkv_wkv6_f32(
        constant mb_kargs_rwkv_wkv & args [[buffer(0)]],
        device const float * k [[buffer(1)]],
        device const float * v [[buffer(2)]],
        device const float * r [[buffer(3)]],
        device const float * tf [[buffer(4)]],
        device const float * td [[buffer(5)]],
        device const float * state [[buffer(6)]],
        device float * dst [[buffer(7)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int S = args.S, H = args.H, h = tgpig.x, seq = tgpig.y;
    const int per_seq = args.T / args.n_seqs;
    const long m_off = long(seq * H + h) * S * S;
    device float * M = dst + long(args.T) * S * H + m_off;
    for (int j = tpitg; j < S; j += ntg) {
        for (int i = 0; i < S; ++i) {
            M[i * S + j] = state[m_off + i * S + j];
        }
        for (int t = seq * per_seq; t < (seq + 1) * per_seq; ++t) {
            const long off = long(t * H + h) * S;
            const float vj = v[off + j];
            float y = 0.0f;
            for (int i = 0; i < S; ++i) {
                const float kv = k[off + i] * vj;
                const float m = M[i * S + j];
                y += r[off + i] * (tf[h * S + i] * kv + m);
                M[i * S + j] = m * td[off + i] + kv;
            }
            dst[off + j] = y;
        }
    }
}

kernel void kernel_rwkv_wkv7_f32(
        constant mb_kargs_rwkv_wkv & args [[buffer(0)]],
        device const float * r [[buffer(1)]],
        device const float * w [[buffer(2)]],
        device const float * k [[buffer(3)]],
        device const float * v [[buffer(4)]],
        device const float * a [[buffer(5)]],
        device const float * b [[buffer(6)]],
        device const float * state [[buffer(7)]],
        device float * dst [[buffer(8)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int S = args.S, H = args.H, h = tgpig.x, seq = tgpig.y;
    const int per_seq = args.T / args.n_seqs;
    const long m_off = long(seq * H + h) * S * S;
    device float * M = dst + long(args.T) * S * H + m_off;
    for (int i = tpitg; i < S; i += ntg) {
        device float * row = M + i * S;
        for (int j = 0; j < S; ++j) {
            row[j] = state[m_off + i * S + j];
        }
        for (int t = seq * per_seq; t < (seq + 1) * per_seq; ++t) {
            const long off = long(t * H + h) * S;
            float sa = 0.0f;
            for (int j = 0; j < S; ++j) {
                sa += a[off + j] * row[j];
            }
            const float vi = v[off + i];
            float y = 0.0f;
            for (int j = 0; j < S; ++j) {
                const float m = row[j] * w[off + j] + vi * k[off + j] + sa * b[off + j];
                row[j] = m;
                y += m * r[off + j];
            }
            dst[off + i] = y;
        }
    }
}
