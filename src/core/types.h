// Element types of tensors, with ggml's ids, names and byte layouts. Quantized types store blocks of
// 32 values, laid out byte for byte as ggml lays them out (shaders/quant_blocks.h, shared with the
// Metal kernels), so tensors read from ggml model files and tensors handed to the kernels need no
// repacking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/isa.h"
#include "quant_blocks.h"

namespace mb {

// The values are ggml's type ids (they appear in model files).
enum class Type : int32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I32 = 26,
    IQ1_M = 29,
    BF16 = 30,
    MXFP4 = 39,
};

struct TypeTraits {
    const char* name;     // ggml's name: "f32", "q4_0", ...
    int64_t block_size;   // elements per block (1 for plain types)
    size_t type_size;     // bytes per block
    bool is_quantized;
    // One of the seven grid types (iq1_s iq1_m iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s, core/quants_grid.h):
    // codes index a lattice of values, and nothing quantizes to them without an importance matrix.
    bool is_grid;
};

constexpr int64_t kQK4_0 = MB_QK;
constexpr int64_t kQK4_1 = MB_QK;
constexpr int64_t kQK5_0 = MB_QK;
constexpr int64_t kQK5_1 = MB_QK;
constexpr int64_t kQK8_0 = MB_QK;
constexpr int64_t kQK_K = MB_QK_K;  // the k-quants' super-block

// The block structs of shaders/quant_blocks.h (the kernels read the same definitions); d and m are
// IEEE half bit patterns here (see fp16.h).
using BlockQ4_0 = block_q4_0;
using BlockQ4_1 = block_q4_1;
using BlockQ5_0 = block_q5_0;
using BlockQ5_1 = block_q5_1;
using BlockQ8_0 = block_q8_0;

// The 32 fifth bits of a q5_0 / q5_1 block (bit j belongs to element j), stored little-endian.
inline uint32_t load_qh(const uint8_t* qh) {
    return uint32_t(qh[0]) | (uint32_t(qh[1]) << 8) | (uint32_t(qh[2]) << 16) | (uint32_t(qh[3]) << 24);
}

// Throws InvalidArgumentError for an id that is not one of the types above.
const TypeTraits& type_traits(Type t);
Type type_from_id(int32_t id);

// f32 f16 bf16 i32 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K q8_K iq4_nl iq4_xs mxfp4, then the
// grid types iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m
const std::vector<Type>& all_types();

// Bytes taken by ne0 consecutive elements; throws InvalidArgumentError unless ne0 is a
// non-negative multiple of the block size.
size_t row_size(Type t, int64_t ne0);

// Converts n floats to type t (n a multiple of its block size). Quantized types use ggml's reference
// quantizers bit for bit; f16 and bf16 round to nearest even; i32 truncates toward zero, saturating,
// with NaN giving 0.
void quantize_row(Type t, const float* src, void* dst, int64_t n);

// Converts n elements of type t to floats (n a multiple of its block size), as ggml does.
void dequantize_row(Type t, const void* src, float* dst, int64_t n);

// The instruction set quantize_row and dequantize_row use now for f16 and the quantized types:
// Avx2 (with F16C) where the CPU has it and the process-wide cap of core/isa.h allows it, else
// Portable. Both give the same bits; this says which one runs.
CpuIsa conversions_isa();

}  // namespace mb
