// CONV_2D at unit strides as an implicit GEMM: no panel is packed from the input. Each image is copied
// once into a zero-padded buffer of IC planes of IHp x IWp (the input with its padding written out),
// where output pixel (oy, ox) at tap k = (ic, ky, kx) reads the float at q + off[k], q = oy * IWp + ox
// and off[k] = ic * plane + ky * d1 * IWp + kx * d0. So over the "padded pixels" q (output rows IWp
// wide, of which the first OW columns are output pixels and the rest are computed and dropped) the
// input under V consecutive pixels at one tap is one unaligned vector load, and the convolution is
// C[oc][q] = sum_k W[oc][k] * padded[q + off[k]], a GEMM whose vector operand is read in place.
//
// A register tile is R output channels x TW padded pixels (AVX-512: R <= 12, TW = 32 in two zmm;
// AVX2: R <= 6, TW = 16 in two ymm) summed over a block of kb taps in registers (k in order, from
// zero) and added to the sum of the blocks before. For each tile of pixels the k blocks go in turn and,
// within one, every channel chunk, so the block's input under the tile (kb x TW floats) stays in L1
// while all chunks read it. A result's bits do not depend on how the tiles are split among threads.
// The output channels are cut into nearly equal chunks of at most R_max (64 = 11+11+11+11+10+10), the
// kernel rows of a chunk packed k-major (W[oc][k] at k * R + r) once per node. A tile whose pixels lie
// in one output row goes straight to dst; any other (across a row end, or over dropped columns) is
// summed in the thread's local tile (every channel) and copied out a run of one row at a time.
//
// Threads: the kernel rows, the tap offsets and each image's padded copy are made by all threads
// together (split by output channel, tap and input channel), a barrier, then the tiles of the image
// are split into ranges; a barrier before the next image overwrites the copy.
#include "cpu/kernels/conv_2d_implicit.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "cpu/kernels/checked_scratch.h"
#include "cpu/kernels/simd.h"

namespace mb {

namespace {

constexpr int64_t kMaxK = 4608;                          // taps per result (512 channels x 3 x 3)
constexpr int64_t kMaxKernelBytes = int64_t(1) << 20;     // the packed kernel rows, read for every tile
constexpr int64_t kMaxImageBytes = int64_t(32) << 20;     // one image's padded copy
constexpr int64_t kKb = 128;                              // k block (at most)
constexpr int64_t kMaxTile = 32;                       // the widest tile (AVX-512): zeros after the copy
constexpr int kMaxRows = 12;                           // the most output channels of a tile

struct Shape {
    int64_t KW, KH, IC, OC, IW, IH, OW, OH, N, p0, p1, d0, d1;
    int64_t IWp, IHp, plane, K;
};

Shape shape_of(const Tensor& dst) {
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    Shape s{w.ne[0], w.ne[1], w.ne[2], w.ne[3], x.ne[0], x.ne[1], dst.ne[0], dst.ne[1], dst.ne[3],
            dst.op_params[2], dst.op_params[3], dst.op_params[4], dst.op_params[5], 0, 0, 0, 0};
    s.IWp = s.IW + 2 * s.p0;
    s.IHp = s.IH + 2 * s.p1;
    s.plane = s.IWp * s.IHp;
    s.K = s.IC * s.KH * s.KW;
    return s;
}

// Scratch, each part from a 64-byte boundary: the packed kernel rows (OC * K floats), the tap offsets
// (K int64), the padded image (IC planes and kMaxTile zeros), then per thread a local tile of OC rows of
// kMaxTile floats.
struct Layout {
    size_t packed, offsets, padded, tiles, tile_bytes, total;
};

size_t up64(size_t b) { return (b + 63) / 64 * 64; }

Layout layout_of(const Shape& s, int nth) {
    Layout l{};
    l.packed = 0;
    l.offsets = up64(size_t(s.OC * s.K) * sizeof(float));
    l.padded = l.offsets + up64(size_t(s.K) * sizeof(int64_t));
    l.tiles = l.padded + up64(size_t(s.IC * s.plane + kMaxTile) * sizeof(float));
    l.tile_bytes = size_t(s.OC * kMaxTile) * sizeof(float);
    l.total = l.tiles + size_t(nth) * l.tile_bytes;
    return l;
}

// The k block for K: at most kKb, the blocks of one size (a multiple of 8) but the last.
int64_t k_block(int64_t K) {
    const int64_t n = (K + kKb - 1) / kKb;
    return std::min(kKb, round_up((K + n - 1) / n, 8));
}

// The output channels in n nearly equal chunks of at most max_rows: chunk c starts at first(c).
struct Chunks {
    int64_t n, base, extra;  // the first `extra` chunks have base + 1 rows
    Chunks(int64_t OC, int max_rows) : n((OC + max_rows - 1) / max_rows), base(OC / n), extra(OC % n) {}
    int64_t first(int64_t c) const { return c * base + std::min(c, extra); }
    int64_t rows(int64_t c) const { return base + (c < extra ? 1 : 0); }
    int64_t of(int64_t oc) const {
        const int64_t split = extra * (base + 1);
        return oc < split ? oc / (base + 1) : extra + (oc - split) / base;
    }
};

// out[r * ldo + j] = (accumulate ? out[r * ldo + j] : 0) + sum_{k<K} wk[k * R + r] * in[off[k] + j] for
// r < R, j < TW (the sum from zero, then added).
using TileFn = void (*)(int64_t K, const float* in, const int64_t* off, const float* wk, float* out, int64_t ldo,
                        bool accumulate);

struct Kernels {
    int tile;      // TW
    int max_rows;  // R_max
    const TileFn* by_rows;  // by_rows[R - 1]
};

#if defined(MB_SIMD_X86)

template <int R>
MB_TARGET_AVX2 void tile_avx2(int64_t K, const float* in, const int64_t* off, const float* wk, float* out,
                              int64_t ldo, bool accumulate) {
    __m256 acc[R][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; ++k, wk += R) {
        const float* x = in + off[k];
        const __m256 v0 = _mm256_loadu_ps(x);
        const __m256 v1 = _mm256_loadu_ps(x + 8);
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) {
            const __m256 b = _mm256_broadcast_ss(wk + r);
            acc[r][0] = _mm256_fmadd_ps(v0, b, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(v1, b, acc[r][1]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
        float* o = out + r * ldo;
        if (accumulate) {
            acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_loadu_ps(o));
            acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_loadu_ps(o + 8));
        }
        _mm256_storeu_ps(o, acc[r][0]);
        _mm256_storeu_ps(o + 8, acc[r][1]);
    }
}

template <int R>
MB_TARGET_AVX512 void tile_avx512(int64_t K, const float* in, const int64_t* off, const float* wk, float* out,
                                  int64_t ldo, bool accumulate) {
    __m512 acc[R][2];
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; ++k, wk += R) {
        const float* x = in + off[k];
        const __m512 v0 = _mm512_loadu_ps(x);
        const __m512 v1 = _mm512_loadu_ps(x + 16);
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r) {
            const __m512 b = _mm512_set1_ps(wk[r]);
            acc[r][0] = _mm512_fmadd_ps(v0, b, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(v1, b, acc[r][1]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
        float* o = out + r * ldo;
        if (accumulate) {
            acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_loadu_ps(o));
            acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_loadu_ps(o + 16));
        }
        _mm512_storeu_ps(o, acc[r][0]);
        _mm512_storeu_ps(o + 16, acc[r][1]);
    }
}

template <size_t... I>
constexpr std::array<TileFn, sizeof...(I)> avx2_table(std::index_sequence<I...>) {
    return {tile_avx2<int(I) + 1>...};
}

template <size_t... I>
constexpr std::array<TileFn, sizeof...(I)> avx512_table(std::index_sequence<I...>) {
    return {tile_avx512<int(I) + 1>...};
}

constexpr std::array<TileFn, 6> kAvx2 = avx2_table(std::make_index_sequence<6>());
constexpr std::array<TileFn, kMaxRows> kAvx512 = avx512_table(std::make_index_sequence<kMaxRows>());

#endif  // MB_SIMD_X86

Kernels kernels_in_use() {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx512f()) return {32, kMaxRows, kAvx512.data()};
    if (cpu_has_avx2_fma_f16c()) return {16, 6, kAvx2.data()};
#endif
    return {0, 0, nullptr};
}

// Output channels oc0 .. oc1 of the kernel into their chunks' k-major rows.
void pack_rows(const Tensor& w, const Shape& s, const Chunks& ch, int64_t oc0, int64_t oc1, float* packed) {
    const bool rows = w.type == Type::F32 && w.is_contiguous();
    for (int64_t oc = oc0; oc < oc1; ++oc) {
        const int64_t c = ch.of(oc), first = ch.first(c), R = ch.rows(c);
        float* out = packed + first * s.K + (oc - first);
        if (rows) {
            const float* src = reinterpret_cast<const float*>(host_data(w)) + oc * s.K;
            for (int64_t k = 0; k < s.K; ++k) out[k * R] = src[k];
            continue;
        }
        for (int64_t k = 0; k < s.K; ++k) {
            const int64_t kx = k % s.KW, ky = (k / s.KW) % s.KH, ic = k / (s.KW * s.KH);
            const uint8_t* src = host_data(w) + size_t(kx) * w.nb[0] + size_t(ky) * w.nb[1] + size_t(ic) * w.nb[2] +
                                 size_t(oc) * w.nb[3];
            out[k * R] = load_f32_or_f16(w.type, src);
        }
    }
}

// Input channels ic0 .. ic1 of image xn into their zero-padded planes.
void pad_planes(const Tensor& x, const uint8_t* xn, const Shape& s, int64_t ic0, int64_t ic1, float* padded) {
    const size_t pad_rows = size_t(s.p1 * s.IWp) * sizeof(float);
    for (int64_t ic = ic0; ic < ic1; ++ic) {
        float* plane = padded + ic * s.plane;
        std::memset(plane, 0, pad_rows);
        for (int64_t iy = 0; iy < s.IH; ++iy) {
            float* row = plane + (s.p1 + iy) * s.IWp;
            const uint8_t* src = xn + size_t(ic) * x.nb[2] + size_t(iy) * x.nb[1];
            std::fill(row, row + s.p0, 0.0f);
            if (x.nb[0] == sizeof(float)) {
                std::memcpy(row + s.p0, src, size_t(s.IW) * sizeof(float));
            } else {
                for (int64_t ix = 0; ix < s.IW; ++ix) {
                    std::memcpy(row + s.p0 + ix, src + size_t(ix) * x.nb[0], sizeof(float));
                }
            }
            std::fill(row + s.p0 + s.IW, row + s.IWp, 0.0f);
        }
        std::memset(plane + (s.p1 + s.IH) * s.IWp, 0, pad_rows);
    }
}

// Rows r < R of a local tile (TW padded pixels from q0, the last padded pixel Q - 1) into dst's
// channels from oc0: each run of one output row, its output columns only.
void scatter_tile(const float* tile, int tw, int64_t R, int64_t q0, int64_t Q, const Shape& s, float* dn,
                  int64_t oc0) {
    const int64_t P = s.OW * s.OH;
    for (int64_t j = 0; j < tw && q0 + j < Q;) {
        const int64_t q = q0 + j, oy = q / s.IWp, ox = q % s.IWp;
        const int64_t len = std::min<int64_t>(tw - j, s.IWp - ox);
        const int64_t keep = std::max<int64_t>(0, std::min(len, s.OW - ox));
        if (keep > 0) {
            for (int64_t r = 0; r < R; ++r) {
                std::memcpy(dn + (oc0 + r) * P + oy * s.OW + ox, tile + r * tw + j, size_t(keep) * sizeof(float));
            }
        }
        j += len;
    }
}

}  // namespace

bool conv_2d_implicit_fits(const Tensor& dst) {
    if (dst.op != Op::CONV_2D || dst.op_params[0] != 1 || dst.op_params[1] != 1) return false;
    const Shape s = shape_of(dst);
    if (s.K <= 0 || s.K > kMaxK || s.OC <= 0 || s.OC * s.K * int64_t(sizeof(float)) > kMaxKernelBytes) return false;
    if (s.IC * s.plane * int64_t(sizeof(float)) > kMaxImageBytes) return false;
    return 2 * s.OW >= s.IWp;
}

size_t conv_2d_implicit_scratch_bytes(const Tensor& dst, int nth) { return layout_of(shape_of(dst), nth).total; }

bool conv_2d_implicit_available() { return kernels_in_use().by_rows != nullptr; }

void conv_2d_implicit(const ComputeParams& p, Tensor& dst) {
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const Shape s = shape_of(dst);
    const Kernels kern = kernels_in_use();
    const Layout l = layout_of(s, p.nth);
    uint8_t* base = reinterpret_cast<uint8_t*>(checked_scratch(p, l.total, "CONV_2D"));
    float* packed = reinterpret_cast<float*>(base + l.packed);
    int64_t* off = reinterpret_cast<int64_t*>(base + l.offsets);
    float* padded = reinterpret_cast<float*>(base + l.padded);
    const Chunks ch(s.OC, kern.max_rows);
    int64_t a0, a1;
    split_range(s.OC, p.ith, p.nth, &a0, &a1);
    pack_rows(w, s, ch, a0, a1, packed);
    split_range(s.K, p.ith, p.nth, &a0, &a1);
    for (int64_t k = a0; k < a1; ++k) {
        const int64_t kx = k % s.KW, ky = (k / s.KW) % s.KH, ic = k / (s.KW * s.KH);
        off[k] = ic * s.plane + ky * s.d1 * s.IWp + kx * s.d0;
    }
    if (p.ith == 0) std::fill(padded + s.IC * s.plane, padded + s.IC * s.plane + kMaxTile, 0.0f);
    const int tw = kern.tile;
    const int64_t P = s.OW * s.OH, Q = (s.OH - 1) * s.IWp + s.OW, tiles = (Q + tw - 1) / tw;
    float* tile = reinterpret_cast<float*>(base + l.tiles + size_t(p.ith) * l.tile_bytes);  // OC rows of tw
    const int64_t kb = k_block(s.K);
    for (int64_t n = 0; n < s.N; ++n) {
        if (n > 0) p.barrier();  // every thread is done with the previous image's copy
        split_range(s.IC, p.ith, p.nth, &a0, &a1);
        pad_planes(x, host_data(x) + size_t(n) * x.nb[3], s, a0, a1, padded);
        p.barrier();  // the kernel rows, the offsets and this image's copy are complete
        float* dn = reinterpret_cast<float*>(host_data(dst) + size_t(n) * dst.nb[3]);
        split_range(tiles, p.ith, p.nth, &a0, &a1);
        for (int64_t t = a0; t < a1; ++t) {
            const int64_t q0 = t * tw, oy = q0 / s.IWp, ox = q0 % s.IWp;
            const bool direct = ox + tw <= s.OW;  // all TW pixels in output row oy
            float* out = direct ? dn + oy * s.OW + ox : tile;  // channel oc at out + oc * ldo
            const int64_t ldo = direct ? P : tw;
            for (int64_t k0 = 0; k0 < s.K; k0 += kb) {
                const int64_t kc = std::min(kb, s.K - k0);
                for (int64_t c = 0; c < ch.n; ++c) {
                    const int64_t oc0 = ch.first(c), R = ch.rows(c);
                    kern.by_rows[R - 1](kc, padded + q0, off + k0, packed + oc0 * s.K + k0 * R, out + oc0 * ldo, ldo,
                                        k0 > 0);
                }
            }
            if (!direct) scatter_tile(tile, tw, s.OC, q0, Q, s, dn, 0);
        }
    }
}

}  // namespace mb
