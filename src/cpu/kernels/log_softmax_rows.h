// Per-row log-softmax normalizers and the k largest entries of float32 rows, in one pass over memory
// the host already holds (decoders read logits back and pick tokens from them: Whisper's greedy and
// beam search ask, per step, for log_softmax at a few tokens of ~52,000, where numpy's max, exp,
// float64 sum and partition took 0.37 ms for 5 rows of 51,864 against 0.13 here, Zen 4, 1 thread).
//
// For row r of x (v entries):
//   top[r]       = max of the row (NaN if the row holds a NaN), as numpy's max
//   log_total[r] = log(sum_j exp(x[j] - top[r])), the exps in float32 (vec.h's polynomial exp), the sum
//                  in float64, so log_softmax(x)[j] = (x[j] - top[r]) - log_total[r]; NaN where top is
//                  not finite (a NaN, or a row of -inf or holding +inf), as numpy's arithmetic gives
//   best[r * k ..] the indices of the k largest entries, largest first, ties by the lower index; NaN
//                  ranks below every number (so a row of fewer than k numbers ends in its NaNs' indices)
// Not a graph op: plain arrays, one thread (the rows are few and short).
#pragma once

#include <cstdint>

namespace mb {

void log_softmax_rows(const float* x, int64_t rows, int64_t v, int64_t k, float* top, float* log_total,
                      int64_t* best);

}  // namespace mb
