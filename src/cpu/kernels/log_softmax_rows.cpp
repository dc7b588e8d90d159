// Log-softmax normalizers and top-k of float32 rows (log_softmax_rows.h).
#include "cpu/kernels/log_softmax_rows.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu/kernels/vec.h"

namespace mb {

namespace {

// The k largest (value, index) pairs so far, largest first; an entry equal to the smallest kept one
// does not displace it (ties go to the lower index, which came first).
struct TopK {
    int64_t k;
    int64_t n = 0;
    float* value;
    int64_t* index;

    bool full() const { return n == k; }
    float threshold() const { return value[k - 1]; }

    void offer(float x, int64_t j) {
        if (!(x == x)) return;  // NaN: placed after the pass, below every number
        if (full() && !(x > threshold())) return;
        int64_t at = full() ? k - 1 : n++;
        while (at > 0 && x > value[at - 1]) {
            value[at] = value[at - 1];
            index[at] = index[at - 1];
            --at;
        }
        value[at] = x;
        index[at] = j;
    }
};

#if defined(MB_VEC_AVX2)
// The vector part of max_and_top from entry j on (whole vectors): returns where it stopped.
MB_AVX2 int64_t max_and_top_avx2(const float* x, int64_t j, int64_t v, TopK* top, float& m, bool& nan) {
    __m256 mv = _mm256_set1_ps(m);
    __m256 unord = _mm256_setzero_ps();
    for (; j + 8 <= v; j += 8) {
        const __m256 xv = _mm256_loadu_ps(x + j);
        unord = _mm256_or_ps(unord, _mm256_cmp_ps(xv, xv, _CMP_UNORD_Q));
        mv = _mm256_max_ps(mv, xv);
        if (top != nullptr) {
            // Lanes above the k-th kept value; one raised by an earlier lane refuses the later ones.
            int bits = _mm256_movemask_ps(_mm256_cmp_ps(xv, _mm256_set1_ps(top->threshold()), _CMP_GT_OQ));
            while (bits != 0) {
                const int lane = __builtin_ctz(unsigned(bits));
                top->offer(x[j + lane], j + lane);
                bits &= bits - 1;
            }
        }
    }
    nan |= _mm256_movemask_ps(unord) != 0;
    m = vec::hmax8(mv);
    return j;
}

// sum over whole vectors from 0 of exp(x - m) in float64; returns where it stopped.
MB_AVX2 int64_t exp_sum_avx2(const float* x, int64_t v, float m, double& s) {
    const __m256 mv = _mm256_set1_ps(m);
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t j = 0;
    for (; j + 8 <= v; j += 8) {
        const __m256 e = vec::exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv));
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    alignas(32) double parts[4];
    _mm256_store_pd(parts, _mm256_add_pd(lo, hi));
    s = (parts[0] + parts[1]) + (parts[2] + parts[3]);
    return j;
}

// gcc 12's avx512fintrin.h builds some intrinsics on a self-initialised "undefined" vector, which
// -Wuninitialized reports at every use; the values are defined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// exp_sum_avx2 in 16 lanes (exp16: exp8's bits), four float64 partials.
MB_TARGET_AVX512 int64_t exp_sum_avx512(const float* x, int64_t v, float m, double& s) {
    const __m512 mv = _mm512_set1_ps(m);
    __m512d acc[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
    int64_t j = 0;
    for (; j + 32 <= v; j += 32) {
        for (int h = 0; h < 2; ++h) {
            const __m512 e = vec::exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16 * h), mv));
            acc[2 * h] = _mm512_add_pd(acc[2 * h], _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
            const __m256 upper = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1));
            acc[2 * h + 1] = _mm512_add_pd(acc[2 * h + 1], _mm512_cvtps_pd(upper));
        }
    }
    alignas(64) double parts[8];
    _mm512_store_pd(parts, _mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3])));
    s = ((parts[0] + parts[1]) + (parts[2] + parts[3])) + ((parts[4] + parts[5]) + (parts[6] + parts[7]));
    return j;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

// Max of the row (NaN if it holds one); every entry offered to top (when not null).
float max_and_top(const float* x, int64_t v, TopK* top) {
    float m = -std::numeric_limits<float>::infinity();
    bool nan = false;
    int64_t j = 0;
    auto scalar = [&](int64_t i) {
        nan |= !(x[i] == x[i]);
        m = x[i] > m ? x[i] : m;
        if (top != nullptr) top->offer(x[i], i);
    };
    // Until k entries are kept every entry goes in, so the vector threshold exists only after.
    for (; top != nullptr && j < v && !top->full(); ++j) scalar(j);
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) j = max_and_top_avx2(x, j, v, top, m, nan);
#endif
    for (; j < v; ++j) scalar(j);
    return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

// sum_j exp(x[j] - m) in float64.
double exp_sum(const float* x, int64_t v, float m) {
    double s = 0.0;
    int64_t j = 0;
#if defined(MB_VEC_AVX2)
    if (cpu_has_avx512f()) {
        j = exp_sum_avx512(x, v, m, s);
    } else if (vec::use_avx2()) {
        j = exp_sum_avx2(x, v, m, s);
    }
#endif
    for (; j < v; ++j) s += double(vec::exp(x[j] - m));
    return s;
}

}  // namespace

void log_softmax_rows(const float* x, int64_t rows, int64_t v, int64_t k, float* top, float* log_total,
                      int64_t* best) {
    std::vector<float> kept(size_t(k > 0 ? k : 1));
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = x + r * v;
        TopK t{k, 0, kept.data(), best + r * k};
        const float m = max_and_top(row, v, k > 0 ? &t : nullptr);
        for (int64_t j = 0; t.n < k && j < v; ++j) {
            if (!(row[j] == row[j])) t.index[t.n++] = j;  // fewer than k numbers: the NaNs, in order
        }
        top[r] = m;
        log_total[r] = std::isfinite(m) ? float(std::log(exp_sum(row, v, m)))
                                        : std::numeric_limits<float>::quiet_NaN();
    }
}

}  // namespace mb
