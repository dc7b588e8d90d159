// Threadgroup size of the one-threadgroup-per-row kernels (norm, soft_max, reduce): a multiple of
// the simdgroup width, enough for one element (or float4) per thread, within the pipeline's limit.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mb::metal {

inline uint32_t row_threads(int64_t n, uint32_t max_threads) {
    const uint32_t limit = std::max<uint32_t>(32, std::min<uint32_t>(1024, max_threads) / 32 * 32);
    const int64_t want = (std::max<int64_t>(n, 1) + 31) / 32 * 32;
    return uint32_t(std::min<int64_t>(want, limit));
}

}  // namespace mb::metal
