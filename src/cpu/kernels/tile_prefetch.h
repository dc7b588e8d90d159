// Software prefetch for the four-row mat-vec tiles (vec_dot_rows.cpp, vec_dot_k_avx2.cpp). A tile
// reads its four weight rows side by side, so it streams four short runs at once (a row is a few KiB)
// that each start cold for the hardware prefetcher; measured on Zen 3 with weights far larger than
// the caches, a k-quant tile ran near half speed without help. The tile asks for each row's bytes
// kTilePrefetchBytes ahead of the ones in use (on Zen 3 under load, benchmarks/kquant_kernels.cpp's
// streaming rows: 4 KiB ahead of 2 KiB, which was ahead of 0.5 and 1 KiB, for q2_K .. q6_K; 16 KiB
// ahead for the four rows, within L1; the float tiles ask for less, as vec_dot_rows.cpp says); past
// a row's end, for the same row of the next tile (4 rows on), which is where the job goes next.
// Prefetches never fault, so one past the weights' end is harmless.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu/kernels/simd.h"

namespace mb {

#if defined(MB_SIMD_X86)

#if defined(MB_TILE_PREFETCH_BYTES)  // other distances, for benchmarks/matvec_threads.cpp's builds
constexpr size_t kTilePrefetchBytes = MB_TILE_PREFETCH_BYTES;
#else
constexpr size_t kTilePrefetchBytes = 4096;
#endif

// The cache lines of [pos, pos + span) + ahead of each of the 4 rows (row r at rows[r], row_bytes long,
// rows stride bytes apart).
inline void prefetch_tile_rows(const uint8_t* const* rows, size_t pos, size_t span, size_t row_bytes,
                               size_t stride, size_t ahead = kTilePrefetchBytes) {
    const size_t p = pos + ahead;
    for (int r = 0; r < 4; ++r) {
        // The choice made on the offset: gcc 12 at -O2 drops every prefetch of this loop when it is
        // made between two pointers (checked with objdump: no prefetcht0 left).
        const uint8_t* at = rows[r] + (p < row_bytes ? p : p - row_bytes + 4 * stride);
        for (size_t off = 0; off < span; off += 64) {
            _mm_prefetch(reinterpret_cast<const char*>(at + off), _MM_HINT_T0);
        }
    }
}

// The k-quant tiles' form (vec_dot_k_avx2.cpp): where the rows are contiguous (stride == row_bytes)
// and no longer than kTilePrefetchBytes, the next tile's four rows are one run of 4 * row_bytes,
// asked for in order, span * 4 bytes at step pos (a tile step reads span bytes of each row), so the
// whole next tile is in L1 as this one ends and memory sees one sequential stream. Measured on Zen 4
// with weights far larger than the caches (benchmarks/kquant_kernels.cpp, 4096 x 32768, ggml/ours of
// the AVX512-VNNI tiles, two paired runs at load 5-6): q6_K 0.59-0.60 -> 0.76-0.77, q2_K .. q5_K
// 0.82-0.90 -> 0.99-1.21 against prefetch_tile_rows. Longer or strided rows take prefetch_tile_rows.
// Always inlined: called (not inlined) from the AVX-512 tiles, gcc 12 -O3 found the function free of
// side effects and dropped the calls (objdump: no prefetcht0 left).
inline __attribute__((always_inline)) void prefetch_tile_ahead(const uint8_t* const* rows, size_t pos, size_t span,
                                                               size_t row_bytes, size_t stride) {
    if (stride != row_bytes || row_bytes > kTilePrefetchBytes) {
        prefetch_tile_rows(rows, pos, span, row_bytes, stride);
        return;
    }
    const uint8_t* at = rows[0] + 4 * stride + 4 * pos;
    for (size_t off = 0; off < 4 * span; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(at + off), _MM_HINT_T0);
    }
}

// How far ahead in the row walk a tile that reads its rows one after another (VecTileOrder::Rows,
// vec_dot.h) prefetches: on the Xeon host 4 KiB ahead kept that order within 0.8-1.2x of the side by
// side tiles from memory (none: 0.6-0.7x); on Zen 4, where the hardware prefetchers follow one
// stream, 4 KiB costs 0-15 % against none (benchmarks/matvec_threads.cpp, K = 384 .. 1536).
constexpr size_t kRowWalkPrefetchBytes = 4096;

// The bytes kRowWalkPrefetchBytes past [pos, pos + span) of row r of a tile read in row order (rows[r]
// row_bytes long, the rows stride bytes apart): in the row itself or, past its end, in the row the walk
// goes to after it (the tile's next row, or the next tile's first). Contiguous rows make that the
// stream's own next bytes.
inline __attribute__((always_inline)) void prefetch_row_walk(const uint8_t* const* rows, int r, size_t stride,
                                                             size_t pos, size_t span, size_t row_bytes) {
    const size_t p = pos + kRowWalkPrefetchBytes;
    const uint8_t* next = r < 3 ? rows[r + 1] : rows[0] + 4 * stride;
    const uint8_t* at = p < row_bytes ? rows[r] + p : next + (p - row_bytes);
    for (size_t off = 0; off < span; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(at + off), _MM_HINT_T0);
    }
}

#endif

}  // namespace mb
