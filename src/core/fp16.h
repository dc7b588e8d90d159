// Scalar conversions between f32 and the two 16-bit float formats, bit-exact with ggml: IEEE half
// with round-to-nearest-even (subnormals, infinities and NaNs included), and bfloat16 as the top
// half of an f32 rounded to nearest even. Integer arithmetic is used wherever a float operation
// could be disturbed by a flush-to-zero (DAZ/FTZ) mode some other library may have switched on.
#pragma once

#include <cstdint>
#include <cstring>

namespace mb {

inline uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

inline float f32_from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

namespace fp16_detail {

// All ones when c holds. The conversions below compute every case and pick one with these masks:
// branches or ?: would keep compilers from vectorising loops over them.
inline uint32_t mask_if(bool c) {
    return 0u - uint32_t(c);
}

}  // namespace fp16_detail

inline float fp16_to_fp32(uint16_t h) {
    using fp16_detail::mask_if;
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t em = h & 0x7FFFu;
    const uint32_t normal = (em << 13) + ((127u - 15u) << 23);
    // Subnormal half or zero: the mantissa counts units of 2^-24; the product is a normal f32.
    const uint32_t small = f32_bits(float(int32_t(em)) * 0x1p-24f);
    // Infinity, or NaN made quiet with its payload kept, as the hardware converters do.
    const uint32_t special = 0x7F800000u | (em << 13) | (mask_if(em > 0x7C00u) & 0x00400000u);
    const uint32_t is_normal = mask_if(em >= 0x0400u);
    const uint32_t is_special = mask_if(em >= 0x7C00u);
    uint32_t bits = (normal & is_normal) | (small & ~is_normal);
    bits = (special & is_special) | (bits & ~is_special);
    return f32_from_bits(bits | sign);
}

inline uint16_t fp32_to_fp16(float f) {
    using fp16_detail::mask_if;
    const uint32_t x = f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7FFFFFFFu;
    const uint32_t nan = 0x7E00u | ((ax >> 13) & 0x03FFu);
    // Normal half: rebias the exponent, then round the 13 dropped bits to nearest even. A carry out
    // of the mantissa correctly bumps the exponent.
    const uint32_t rebiased = ax - ((127u - 15u) << 23);
    const uint32_t normal = (rebiased + 0x0FFFu + ((rebiased >> 13) & 1u)) >> 13;
    // Below 2^-14 the result is a multiple of 2^-24, the spacing of f32 values in [0.5, 1): adding
    // 0.5 lets the FPU round to nearest even, and the low bits of the sum are the half mantissa.
    // An f32 subnormal input rounds to zero either way, so DAZ cannot change the answer.
    const uint32_t small = f32_bits(f32_from_bits(ax) + 0.5f) - 0x3F000000u;
    const uint32_t is_nan = mask_if(ax > 0x7F800000u);
    // 65520 is halfway between the largest half (65504) and 2^16; the tie goes to the even
    // neighbour, which is infinity.
    const uint32_t is_inf = mask_if(ax >= 0x477FF000u);
    const uint32_t is_normal = mask_if(ax >= 0x38800000u);
    uint32_t h = (normal & is_normal) | (small & ~is_normal);
    h = (0x7C00u & is_inf) | (h & ~is_inf);
    h = (nan & is_nan) | (h & ~is_nan);
    return uint16_t(sign | h);
}

inline float bf16_to_fp32(uint16_t h) {
    return f32_from_bits(uint32_t(h) << 16);
}

inline uint16_t fp32_to_bf16(float f) {
    const uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        return uint16_t((u >> 16) | 0x0040u);
    }
    return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace mb
