// Grid-type weights against q8_K activations (vec_dot_grid.h); the blocks are read through
// core/quants_grid.h's decoders, the same ones dequantizing uses.
#include "cpu/kernels/vec_dot_grid.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/fp16.h"
#include "core/quants_grid.h"
#include "quant_blocks.h"

namespace mb {

namespace {

constexpr int kQK = MB_QK_K;

template <Type T>
float dot_grid(int64_t k, const void* va, const void* vb) {
    constexpr bool kIq1 = T == Type::IQ1_S || T == Type::IQ1_M;
    const size_t size = type_traits(T).type_size;
    const float factor = kIq1 ? 0.125f : grid_scale_factor(T);
    const auto* b = static_cast<const block_q8_K*>(vb);
    GridGroup g{};
    float acc = 0.0f;
    for (int64_t i = 0; i < k / kQK; ++i) {
        const void* block = static_cast<const uint8_t*>(va) + size_t(i) * size;
        const int8_t* y = b[i].qs;
        int32_t total = 0;
        float d = 0.0f;
        for (int ib = 0; ib < kQK / 32; ++ib, y += 32) {
            d = grid_group(T, block, ib, g);
            for (int h = 0; h < 2; ++h) {
                int32_t s = 0;
                for (int j = 16 * h; j < 16 * h + 16; ++j) s += int32_t(g.q[j]) * y[j];
                if (kIq1) {
                    // value = ls * (q + delta), delta = +-1/8: 8 * ls * q * y + ls * (+-y), times 1/8.
                    int32_t delta = 0;
                    for (int e = 0; e < 2; ++e) {
                        const int oct = 2 * h + e;
                        int32_t ys = 0;
                        for (int j = 8 * oct; j < 8 * oct + 8; ++j) ys += y[j];
                        delta += g.neg[oct] ? -ys : ys;
                    }
                    s = 8 * s + delta;
                }
                total += g.ls[h] * s;
            }
        }
        acc = std::fma(d * b[i].d * factor, float(total), acc);
    }
    return acc;
}

}  // namespace

VecDotKFn vec_dot_grid_fn(Type t) {
    switch (t) {
        case Type::IQ2_XXS: return dot_grid<Type::IQ2_XXS>;
        case Type::IQ2_XS: return dot_grid<Type::IQ2_XS>;
        case Type::IQ2_S: return dot_grid<Type::IQ2_S>;
        case Type::IQ3_XXS: return dot_grid<Type::IQ3_XXS>;
        case Type::IQ3_S: return dot_grid<Type::IQ3_S>;
        case Type::IQ1_S: return dot_grid<Type::IQ1_S>;
        case Type::IQ1_M: return dot_grid<Type::IQ1_M>;
        default: return nullptr;
    }
}

}  // namespace mb
