// CONV_2D_DW: each channel's plane convolved with its own KH x KW filter, an output row at a time;
// a thread takes a range of (image, channel, output row).
//
// Rows of unit stride along x (s0 = 1, packed input rows) on AVX2 / AVX-512: each vector of 8 / 16
// output pixels sums all its taps in one register (fused multiply-adds in the order ky, kx) and is
// stored once; a tap whose input columns hang over the row's ends loads through a lane mask (zeros in
// the padding). Any other row: the portable loop, each tap's valid span added into the output row.
// Either way a pixel's sum does not depend on how the rows are split among threads.
#include "cpu/kernels/conv_2d_dw.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/kernels/simd.h"

namespace mb {

namespace {

// One output row: the input rows under its taps that lie inside the plane (row j: input row rows[j],
// its KW taps at taps[j]), and the row geometry along x.
struct DwRow {
    const uint8_t* const* rows;
    const float* const* taps;
    int64_t n, KW, d0, p0, IW, OW;
};

// The vectors of V pixels an output row is computed in (the same for every row of a node): runs of nv
// = 4, 2 or 1 vectors from ox0 whose taps all lie inside the input row, or (nv = 0) one edge vector
// whose KW taps' lane masks (bit l: lane l's input column inside the row) start at masks[mask0].
// Vectors start at multiples of V but the last, which ends at OW (overlapping the one before: the
// pixels both cover get the same sums, each pixel's being its taps inside the row in the order ky, kx
// whichever vector computes it). Edge vectors store their first npx pixels: V, or OW when the row is
// narrower than a vector.
struct Step {
    int64_t ox0;
    int32_t nv, mask0;
};

struct RowPlan {
    std::vector<Step> steps;
    std::vector<uint32_t> masks;
    int64_t npx = 0;
};

RowPlan plan_row(int64_t V, int64_t KW, int64_t d0, int64_t p0, int64_t IW, int64_t OW) {
    RowPlan plan;
    plan.npx = std::min(V, OW);
    // the pixels whose taps all lie inside the row: [a, b) (ox - p0 >= 0, ox - p0 + (KW - 1) d0 < IW)
    const int64_t a = std::min(OW, p0), b = std::max(a, std::min(OW, IW + p0 - (KW - 1) * d0));
    for (int64_t ox = 0; ox < OW;) {
        const int64_t ox0 = std::max<int64_t>(0, std::min(ox, OW - V));
        int32_t nv = 0;
        for (const int32_t n : {4, 2, 1}) {
            if (OW >= V && ox0 >= a && ox0 + n * V <= b) {
                nv = n;
                break;
            }
        }
        plan.steps.push_back({ox0, nv, int32_t(plan.masks.size())});
        if (nv == 0) {
            for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t ix0 = ox0 + kx * d0 - p0;  // input column under lane 0
                const int64_t lo = std::clamp<int64_t>(-ix0, 0, plan.npx);
                const int64_t hi = std::clamp<int64_t>(IW - ix0, 0, plan.npx);
                plan.masks.push_back(lo >= hi ? 0u : uint32_t(((uint64_t(1) << hi) - 1) & ~((uint64_t(1) << lo) - 1)));
            }
        }
        ox = ox0 + std::max<int64_t>(nv, 1) * V;
    }
    return plan;
}

#if defined(MB_SIMD_X86)

// row + ix as an address, without pointer arithmetic outside the row (the masked loads below touch
// only the lanes inside it).
inline const float* shifted(const uint8_t* row, int64_t ix) {
    return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + uintptr_t(ix) * sizeof(float));
}

// NV vectors of 8 output pixels from ox0, all taps inside the row: NV sums in registers, one
// broadcast of each tap for all of them.
template <int NV>
MB_TARGET_AVX2 inline void inner_avx2(const DwRow& r, int64_t ox0, float* y) {
    __m256 acc[NV];
    for (int v = 0; v < NV; ++v) acc[v] = _mm256_setzero_ps();
    for (int64_t j = 0; j < r.n; ++j) {
        const float* in = reinterpret_cast<const float*>(r.rows[j]) + (ox0 - r.p0);
        const float* t = r.taps[j];
        for (int64_t kx = 0; kx < r.KW; ++kx, in += r.d0) {
            const __m256 w = _mm256_broadcast_ss(t + kx);
            for (int v = 0; v < NV; ++v) acc[v] = _mm256_fmadd_ps(w, _mm256_loadu_ps(in + 8 * v), acc[v]);
        }
    }
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(y + ox0 + 8 * v, acc[v]);
}

// An edge vector of 8 pixels from ox0 (the first npx stored): a tap with all lanes inside the row
// adds a plain load; one with some adds them through the lane mask and keeps the other lanes' sums
// as they were; one with none is skipped.
MB_TARGET_AVX2 void edge_avx2(const DwRow& r, int64_t ox0, int64_t npx, const uint32_t* masks, float* y) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < r.n; ++j) {
        const float* t = r.taps[j];
        for (int64_t kx = 0; kx < r.KW; ++kx) {
            const uint32_t bits = masks[kx];
            if (bits == 0) continue;
            const __m256 w = _mm256_broadcast_ss(t + kx);
            const float* in = shifted(r.rows[j], ox0 + kx * r.d0 - r.p0);
            if (bits == 0xFF) {
                acc = _mm256_fmadd_ps(w, _mm256_loadu_ps(in), acc);
                continue;
            }
            const __m256i m = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int(bits)), bit), bit);
            const __m256 sum = _mm256_fmadd_ps(w, _mm256_maskload_ps(in, m), acc);
            acc = _mm256_blendv_ps(acc, sum, _mm256_castsi256_ps(m));
        }
    }
    if (npx == 8) {
        _mm256_storeu_ps(y + ox0, acc);
    } else {  // a row narrower than a vector
        alignas(32) float part[8];
        _mm256_store_ps(part, acc);
        std::memcpy(y + ox0, part, size_t(npx) * sizeof(float));
    }
}

MB_TARGET_AVX2 void dw_row_avx2(const DwRow& r, const RowPlan& plan, float* y) {
    for (const Step& s : plan.steps) {
        switch (s.nv) {
            case 4: inner_avx2<4>(r, s.ox0, y); break;
            case 2: inner_avx2<2>(r, s.ox0, y); break;
            case 1: inner_avx2<1>(r, s.ox0, y); break;
            default: edge_avx2(r, s.ox0, plan.npx, plan.masks.data() + s.mask0, y); break;
        }
    }
}

// inner_avx2 with vectors of 16.
template <int NV>
MB_TARGET_AVX512 inline void inner_avx512(const DwRow& r, int64_t ox0, float* y) {
    __m512 acc[NV];
    for (int v = 0; v < NV; ++v) acc[v] = _mm512_setzero_ps();
    for (int64_t j = 0; j < r.n; ++j) {
        const float* in = reinterpret_cast<const float*>(r.rows[j]) + (ox0 - r.p0);
        const float* t = r.taps[j];
        for (int64_t kx = 0; kx < r.KW; ++kx, in += r.d0) {
            const __m512 w = _mm512_set1_ps(t[kx]);
            for (int v = 0; v < NV; ++v) acc[v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(in + 16 * v), acc[v]);
        }
    }
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(y + ox0 + 16 * v, acc[v]);
}

// edge_avx2 with vectors of 16 (the masked lanes keep their sums through the fused multiply-add's mask).
MB_TARGET_AVX512 void edge_avx512(const DwRow& r, int64_t ox0, int64_t npx, const uint32_t* masks, float* y) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < r.n; ++j) {
        const float* t = r.taps[j];
        for (int64_t kx = 0; kx < r.KW; ++kx) {
            const __mmask16 m = __mmask16(masks[kx]);
            if (m == 0) continue;
            const __m512 w = _mm512_set1_ps(t[kx]);
            const float* in = shifted(r.rows[j], ox0 + kx * r.d0 - r.p0);
            if (m == 0xFFFF) {
                acc = _mm512_fmadd_ps(w, _mm512_loadu_ps(in), acc);
            } else {
                acc = _mm512_mask3_fmadd_ps(w, _mm512_maskz_loadu_ps(m, in), acc, m);
            }
        }
    }
    _mm512_mask_storeu_ps(y + ox0, __mmask16((uint32_t(1) << npx) - 1), acc);
}

MB_TARGET_AVX512 void dw_row_avx512(const DwRow& r, const RowPlan& plan, float* y) {
    for (const Step& s : plan.steps) {
        switch (s.nv) {
            case 4: inner_avx512<4>(r, s.ox0, y); break;
            case 2: inner_avx512<2>(r, s.ox0, y); break;
            case 1: inner_avx512<1>(r, s.ox0, y); break;
            default: edge_avx512(r, s.ox0, plan.npx, plan.masks.data() + s.mask0, y); break;
        }
    }
}

#endif  // MB_SIMD_X86

// The SIMD row in use and its vector width, or {nullptr, 0} (portable build, or a capped instruction set).
struct SimdRow {
    void (*fn)(const DwRow&, const RowPlan&, float*);
    int64_t width;
};

SimdRow simd_row() {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx512f()) return {dw_row_avx512, 16};
    if (cpu_has_avx2_fma_f16c()) return {dw_row_avx2, 8};
#endif
    return {nullptr, 0};
}

// The portable row: y = 0, then each tap's valid span of output pixels accumulates w * input.
void dw_row_strided(const uint8_t* const* rows, const float* const* taps, int64_t n, int64_t KW, int64_t s0,
                    int64_t d0, int64_t p0, int64_t IW, int64_t OW, size_t nb0, float* y) {
    std::fill(y, y + OW, 0.0f);
    for (int64_t j = 0; j < n; ++j) {
        const uint8_t* row = rows[j];
        for (int64_t kx = 0; kx < KW; ++kx) {
            const float t = taps[j][kx];
            const int64_t off = kx * d0 - p0;  // ix = ox * s0 + off
            // ox with 0 <= ox * s0 + off < IW
            const int64_t lo = off >= 0 ? 0 : (-off + s0 - 1) / s0;
            const int64_t hi = IW - 1 - off < 0 ? -1 : std::min<int64_t>(OW - 1, (IW - 1 - off) / s0);
            if (nb0 == sizeof(float) && s0 == 1) {
                const float* xr = reinterpret_cast<const float*>(row);
                for (int64_t ox = lo; ox <= hi; ++ox) y[ox] += t * xr[ox + off];
            } else {
                for (int64_t ox = lo; ox <= hi; ++ox) {
                    float v;
                    std::memcpy(&v, row + size_t(ox * s0 + off) * nb0, sizeof v);
                    y[ox] += t * v;
                }
            }
        }
    }
}

}  // namespace

void conv_2d_dw(const ComputeParams& p, Tensor& dst) {
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const int64_t s0 = dst.op_params[0], s1 = dst.op_params[1], p0 = dst.op_params[2], p1 = dst.op_params[3];
    const int64_t d0 = dst.op_params[4], d1 = dst.op_params[5];
    const int64_t KW = w.ne[0], KH = w.ne[1], OW = dst.ne[0], OH = dst.ne[1], C = dst.ne[2];
    const int64_t IW = x.ne[0], IH = x.ne[1];
    const SimdRow simd = s0 == 1 && x.nb[0] == sizeof(float) ? simd_row() : SimdRow{nullptr, 0};
    const RowPlan plan = simd.fn ? plan_row(simd.width, KW, d0, p0, IW, OW) : RowPlan{};
    std::vector<float> taps(size_t(KW * KH));
    std::vector<const float*> tap_rows(static_cast<size_t>(KH));
    std::vector<const uint8_t*> rows(static_cast<size_t>(KH));
    int64_t r0, r1;
    split_range(OH * C * dst.ne[3], p.ith, p.nth, &r0, &r1);
    int64_t loaded = -1;  // the channel whose taps are in `taps`
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t oy = r % OH, ch = (r / OH) % C, n = r / (OH * C);
        if (ch != loaded) {
            for (int64_t ky = 0; ky < KH; ++ky) {
                for (int64_t kx = 0; kx < KW; ++kx) {
                    const uint8_t* q =
                        host_data(w) + size_t(kx) * w.nb[0] + size_t(ky) * w.nb[1] + size_t(ch) * w.nb[3];
                    taps[size_t(ky * KW + kx)] = load_f32_or_f16(w.type, q);
                }
            }
            loaded = ch;
        }
        // the taps' rows inside the plane, in ky order
        const uint8_t* plane = host_data(x) + size_t(ch) * x.nb[2] + size_t(n) * x.nb[3];
        int64_t n_rows = 0;
        for (int64_t ky = 0; ky < KH; ++ky) {
            const int64_t iy = oy * s1 - p1 + ky * d1;
            if (iy < 0 || iy >= IH) continue;
            rows[size_t(n_rows)] = plane + size_t(iy) * x.nb[1];
            tap_rows[size_t(n_rows++)] = taps.data() + ky * KW;
        }
        float* y = reinterpret_cast<float*>(host_data(dst) + size_t(oy) * dst.nb[1] + size_t(ch) * dst.nb[2] +
                                            size_t(n) * dst.nb[3]);
        if (simd.fn) {
            const DwRow row{rows.data(), tap_rows.data(), n_rows, KW, d0, p0, IW, OW};
            simd.fn(row, plan, y);
        } else {
            dw_row_strided(rows.data(), tap_rows.data(), n_rows, KW, s0, d0, p0, IW, OW, x.nb[0], y);
        }
    }
}

}  // namespace mb
