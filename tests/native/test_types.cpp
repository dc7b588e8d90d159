// Standalone checks of src/core/types and fp16.h against references written here from the formats'
// definitions. Build and run from the repository root, once with the SIMD kernels and once without:
//   g++ -O2 -std=c++17 -Isrc -Ishaders tests/native/test_types.cpp src/core/types.cpp -o /tmp/test_types &&
//       /tmp/test_types
//   g++ -O2 -std=c++17 -Isrc -Ishaders -DMB_NO_SIMD tests/native/test_types.cpp src/core/types.cpp
//       -o /tmp/test_types_ns && /tmp/test_types_ns
#include "check.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/fp16.h"
#include "core/types.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

namespace {



uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Value of a half from its definition: (-1)^s * 2^(e-15) * (1 + m/1024), or 2^-14 * m/1024.
double half_value(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) {
        v = m ? NAN : INFINITY;
    } else if (e == 0) {
        v = std::ldexp(double(m), -24);
    } else {
        v = std::ldexp(1.0 + m / 1024.0, e - 15);
    }
    return s ? -v : v;
}

// Nearest half by scaling to an integer significand and letting rint (ties to even) round it.
uint16_t half_reference(float f) {
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double a = std::fabs(double(f));
    if (std::isnan(f)) {
        return uint16_t(sign | 0x7E00 | ((bits(f) >> 13) & 0x3FF));
    }
    if (a >= 65520.0) {
        return uint16_t(sign | 0x7C00);
    }
    if (a == 0.0) {
        return sign;
    }
    int e2;
    std::frexp(a, &e2);
    const int e = std::max(e2 - 1, -14);
    const double r = std::rint(std::ldexp(a, 10 - e));
    return uint16_t(sign | ((e + 14) * 1024 + int(r)));
}

uint16_t bf16_reference(float f) {
    const uint32_t u = bits(f);
    if (std::isnan(f)) {
        return uint16_t((u >> 16) | 0x40);
    }
    uint32_t t = u >> 16;
    const uint32_t rest = u & 0xFFFF;
    if (rest > 0x8000 || (rest == 0x8000 && (t & 1))) {
        ++t;
    }
    return uint16_t(t);
}

#if defined(HAVE_X86)
__attribute__((target("f16c"))) uint16_t hw_f32_to_f16(float f) {
    return uint16_t(_cvtss_sh(f, 0));
}
__attribute__((target("f16c"))) float hw_f16_to_f32(uint16_t h) {
    return _cvtsh_ss(h);
}
#endif

void test_fp16() {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = mb::fp16_to_fp32(uint16_t(h));
        const double ref = half_value(uint16_t(h));
        if (std::isnan(ref)) {
            CHECK(std::isnan(f) && (bits(f) & 0x00400000u), "half %04x", h);
            CHECK(((bits(f) >> 13) & 0x3FF) == ((h & 0x3FF) | 0x200), "nan payload %04x", h);
        } else {
            CHECK(double(f) == ref && std::signbit(f) == bool(h & 0x8000), "half %04x -> %g, want %g", h, f, ref);
            CHECK(mb::fp32_to_fp16(f) == h, "round trip %04x", h);
        }
        // Every tie between two neighbouring halves, and one f32 step either side of it.
        if ((h & 0x7FFF) < 0x7BFF) {
            const uint32_t mid = bits(float(0.5 * (half_value(uint16_t(h)) + half_value(uint16_t(h + 1)))));
            for (uint32_t u : {mid - 1, mid, mid + 1}) {
                CHECK(mb::fp32_to_fp16(from_bits(u)) == half_reference(from_bits(u)), "tie %08x", u);
            }
        }
    }
    // A spread of f32 patterns covering every exponent and many mantissa tails.
    for (uint64_t u = 0; u < (1ull << 32); u += 4093) {
        const float f = from_bits(uint32_t(u));
        CHECK(mb::fp32_to_fp16(f) == half_reference(f), "f32 %08x -> %04x want %04x", uint32_t(u),
              mb::fp32_to_fp16(f), half_reference(f));
        CHECK(mb::fp32_to_bf16(f) == bf16_reference(f), "bf16 %08x", uint32_t(u));
    }
    for (float f : {65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.9802322e-8f, 2.98023259e-8f, 5.96046448e-8f, -0.0f,
                    INFINITY, -INFINITY, 1e-40f, 6.1035156e-05f, 6.1035152e-05f}) {
        CHECK(mb::fp32_to_fp16(f) == half_reference(f), "special %g", f);
    }
    CHECK(mb::fp32_to_bf16(from_bits(0x7F800001u)) == 0x7FC0, "bf16 snan quieted");
    CHECK(mb::fp32_to_bf16(from_bits(0xFFC00000u)) == 0xFFC0, "bf16 -qnan");
    CHECK(mb::fp32_to_bf16(from_bits(0x3F808000u)) == 0x3F80, "bf16 tie to even down");
    CHECK(mb::fp32_to_bf16(from_bits(0x3F818000u)) == 0x3F82, "bf16 tie to even up");
    CHECK(mb::fp32_to_bf16(from_bits(0x7F7FFFFFu)) == 0x7F80, "bf16 FLT_MAX rounds to inf");
    CHECK(bits(mb::bf16_to_fp32(0x3F80)) == 0x3F800000u, "bf16 widen");
#if defined(HAVE_X86)
    if (__builtin_cpu_supports("f16c")) {
        for (uint32_t h = 0; h < 65536; ++h) {
            CHECK(bits(mb::fp16_to_fp32(uint16_t(h))) == bits(hw_f16_to_f32(uint16_t(h))), "hw widen %04x", h);
        }
        for (uint64_t u = 7; u < (1ull << 32); u += 6007) {
            const float f = from_bits(uint32_t(u));
            CHECK(mb::fp32_to_fp16(f) == hw_f32_to_f16(f), "hw narrow %08x", uint32_t(u));
        }
    }
#endif
}

template <typename F>
void expect_invalid(F&& f, const std::string& want_in_message, const char* what) {
    try {
        f();
        CHECK(false, "%s: no exception", what);
    } catch (const mb::InvalidArgumentError& e) {
        CHECK(std::string(e.what()).find(want_in_message) != std::string::npos, "%s: message '%s'", what, e.what());
    }
}

void test_traits() {
    struct Want {
        mb::Type t;
        int32_t id;
        const char* name;
        int64_t block;
        size_t size;
        bool quantized;
    };
    const Want wants[] = {
        {mb::Type::F32, 0, "f32", 1, 4, false},     {mb::Type::F16, 1, "f16", 1, 2, false},
        {mb::Type::BF16, 30, "bf16", 1, 2, false},  {mb::Type::I32, 26, "i32", 1, 4, false},
        {mb::Type::Q4_0, 2, "q4_0", 32, 18, true},  {mb::Type::Q4_1, 3, "q4_1", 32, 20, true},
        {mb::Type::Q5_0, 6, "q5_0", 32, 22, true},  {mb::Type::Q5_1, 7, "q5_1", 32, 24, true},
        {mb::Type::Q8_0, 8, "q8_0", 32, 34, true},  {mb::Type::Q2_K, 10, "q2_K", 256, 84, true},
        {mb::Type::Q3_K, 11, "q3_K", 256, 110, true}, {mb::Type::Q4_K, 12, "q4_K", 256, 144, true},
        {mb::Type::Q5_K, 13, "q5_K", 256, 176, true}, {mb::Type::Q6_K, 14, "q6_K", 256, 210, true},
        {mb::Type::Q8_K, 15, "q8_K", 256, 292, true}, {mb::Type::IQ4_NL, 20, "iq4_nl", 32, 18, true},
        {mb::Type::IQ4_XS, 23, "iq4_xs", 256, 136, true}, {mb::Type::MXFP4, 39, "mxfp4", 32, 17, true},
        {mb::Type::IQ2_XXS, 16, "iq2_xxs", 256, 66, true}, {mb::Type::IQ2_XS, 17, "iq2_xs", 256, 74, true},
        {mb::Type::IQ2_S, 22, "iq2_s", 256, 82, true},    {mb::Type::IQ3_XXS, 18, "iq3_xxs", 256, 98, true},
        {mb::Type::IQ3_S, 21, "iq3_s", 256, 110, true},   {mb::Type::IQ1_S, 19, "iq1_s", 256, 50, true},
        {mb::Type::IQ1_M, 29, "iq1_m", 256, 56, true},
    };
    constexpr size_t n_wants = sizeof(wants) / sizeof(wants[0]);
    CHECK(mb::all_types().size() == n_wants, "all_types size");
    for (size_t i = 0; i < n_wants; ++i) {
        const Want& w = wants[i];
        CHECK(mb::all_types()[i] == w.t, "all_types order %zu", i);
        CHECK(mb::type_from_id(w.id) == w.t, "id %d", w.id);
        const mb::TypeTraits& tr = mb::type_traits(w.t);
        CHECK(std::string(tr.name) == w.name && tr.block_size == w.block && tr.type_size == w.size &&
                  tr.is_quantized == w.quantized,
              "traits %s", w.name);
        CHECK(mb::row_size(w.t, 64 * w.block) == 64 * w.size, "row_size %s", w.name);
        CHECK(mb::row_size(w.t, 0) == 0, "row_size 0 %s", w.name);
    }
    expect_invalid([] { mb::type_from_id(5); }, "5", "type_from_id(5)");
    expect_invalid([] { mb::type_traits(static_cast<mb::Type>(99)); }, "99", "type_traits(99)");
    expect_invalid([] { mb::row_size(mb::Type::Q4_0, 33); }, "33", "row_size(q4_0, 33)");
    expect_invalid([] { mb::row_size(mb::Type::Q8_0, -32); }, "-32", "row_size(q8_0, -32)");
    float x[48] = {};
    unsigned char y[64];
    expect_invalid([&] { mb::quantize_row(mb::Type::Q5_1, x, y, 48); }, "48", "quantize_row 48");
    expect_invalid([&] { mb::dequantize_row(mb::Type::Q4_1, y, x, 16); }, "16", "dequantize_row 16");
}

// Dequantization from the layout description, element by element.
float reference_element(mb::Type t, const uint8_t* block, int j) {
    auto half_at = [&](int off) { return float(half_value(uint16_t(block[off] | (block[off + 1] << 8)))); };
    auto nibble = [&](int qs_off) { return j < 16 ? block[qs_off + j] & 15 : block[qs_off + j - 16] >> 4; };
    auto fifth = [&](int qh_off) { return (block[qh_off + j / 8] >> (j % 8)) & 1; };
    switch (t) {
        case mb::Type::Q4_0: return float(nibble(2) - 8) * half_at(0);
        case mb::Type::Q4_1: return float(nibble(4)) * half_at(0) + half_at(2);
        case mb::Type::Q5_0: return float((nibble(6) | (fifth(2) << 4)) - 16) * half_at(0);
        case mb::Type::Q5_1: return float(nibble(8) | (fifth(4) << 4)) * half_at(0) + half_at(2);
        case mb::Type::Q8_0: return float(int8_t(block[2 + j])) * half_at(0);
        default: return NAN;
    }
}

void test_dequantize() {
    std::mt19937 rng(1234);
    const mb::Type quants[] = {mb::Type::Q4_0, mb::Type::Q4_1, mb::Type::Q5_0, mb::Type::Q5_1, mb::Type::Q8_0};
    for (mb::Type t : quants) {
        const mb::TypeTraits& tr = mb::type_traits(t);
        const int nb = 97;
        std::vector<uint8_t> data(nb * tr.type_size);
        for (auto& b : data) {
            b = uint8_t(rng());
        }
        // Keep the scales finite so every element has a definite value.
        for (int i = 0; i < nb; ++i) {
            uint8_t* blk = data.data() + i * tr.type_size;
            blk[1] &= 0xBB;
            if (t == mb::Type::Q4_1 || t == mb::Type::Q5_1) {
                blk[3] &= 0xBB;
            }
        }
        std::vector<float> out(nb * 32 + 1, 12345.0f);
        mb::dequantize_row(t, data.data(), out.data(), nb * 32);
        for (int i = 0; i < nb; ++i) {
            for (int j = 0; j < 32; ++j) {
                const float want = reference_element(t, data.data() + i * tr.type_size, j);
                CHECK(bits(out[i * 32 + j]) == bits(want), "%s block %d elem %d: %g want %g", tr.name, i, j,
                      out[i * 32 + j], want);
            }
        }
        CHECK(out[nb * 32] == 12345.0f, "%s wrote past the end", tr.name);
    }
    for (int n : {0, 1, 7, 8, 13, 1000}) {
        std::vector<uint16_t> h(n);
        std::vector<int32_t> iv(n);
        for (int i = 0; i < n; ++i) {
            h[i] = uint16_t(rng());
            iv[i] = int32_t(rng());
        }
        std::vector<float> out(n + 1, 7.0f);
        mb::dequantize_row(mb::Type::F16, h.data(), out.data(), n);
        for (int i = 0; i < n; ++i) {
            CHECK(bits(out[i]) == bits(mb::fp16_to_fp32(h[i])), "f16 n=%d i=%d", n, i);
        }
        mb::dequantize_row(mb::Type::BF16, h.data(), out.data(), n);
        for (int i = 0; i < n; ++i) {
            CHECK(bits(out[i]) == uint32_t(h[i]) << 16, "bf16 n=%d i=%d", n, i);
        }
        mb::dequantize_row(mb::Type::I32, iv.data(), out.data(), n);
        for (int i = 0; i < n; ++i) {
            CHECK(out[i] == float(iv[i]), "i32 n=%d i=%d", n, i);
        }
        CHECK(out[n] == 7.0f, "wrote past the end n=%d", n);
        std::vector<float> src(n);
        for (int i = 0; i < n; ++i) {
            src[i] = from_bits(uint32_t(rng()));
        }
        std::vector<uint16_t> back(n);
        mb::quantize_row(mb::Type::F16, src.data(), back.data(), n);
        for (int i = 0; i < n; ++i) {
            CHECK(back[i] == half_reference(src[i]), "f32->f16 n=%d i=%d %08x", n, i, bits(src[i]));
        }
    }
}

void test_quantize() {
    // q8_0 with amax 127 has d = 1 and id = 1, so codes are roundf(x): halves go away from zero.
    {
        float x[32] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.49f, -126.5f};
        mb::BlockQ8_0 b;
        mb::quantize_row(mb::Type::Q8_0, x, &b, 32);
        CHECK(b.d == 0x3C00, "q8_0 d %04x", b.d);
        const int want[] = {127, 3, -3, 1, -1, 1, -127, 0};
        for (int j = 0; j < 8; ++j) {
            CHECK(b.qs[j] == want[j], "q8_0 code %d: %d want %d", j, b.qs[j], want[j]);
        }
    }
    // q4_0 with the extreme -8 has d = 1: code = min(15, trunc(x + 8.5)).
    {
        float x[32] = {-8.0f, 0.0f, -0.5f, 0.5f, 7.5f, 7.4f, -7.5f};
        mb::BlockQ4_0 b;
        mb::quantize_row(mb::Type::Q4_0, x, &b, 32);
        CHECK(b.d == 0x3C00, "q4_0 d %04x", b.d);
        const int want[] = {0, 8, 8, 9, 15, 15, 1};
        for (int j = 0; j < 7; ++j) {
            CHECK((b.qs[j] & 15) == want[j], "q4_0 code %d: %d want %d", j, b.qs[j] & 15, want[j]);
        }
    }
    // All-zero block: the signed maximum starts at +0, so d = +0 / -8 = -0.
    {
        float x[32] = {};
        mb::BlockQ4_0 b;
        mb::quantize_row(mb::Type::Q4_0, x, &b, 32);
        CHECK(b.d == 0x8000, "q4_0 zero d %04x", b.d);
        CHECK(b.qs[0] == 0x88, "q4_0 zero codes %02x", b.qs[0]);
    }
    // Round trips stay within half a step plus the scale's own rounding, except that q4_0 and q5_0
    // map the extreme to -8 (-16) steps, so values near the opposite extreme clip one step short.
    std::mt19937 rng(99);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> x(32 * 50), y(32 * 50);
    for (auto& v : x) {
        v = normal(rng);
    }
    const mb::Type quants[] = {mb::Type::Q4_0, mb::Type::Q4_1, mb::Type::Q5_0, mb::Type::Q5_1, mb::Type::Q8_0};
    for (mb::Type t : quants) {
        std::vector<uint8_t> q(mb::row_size(t, int64_t(x.size())));
        mb::quantize_row(t, x.data(), q.data(), int64_t(x.size()));
        mb::dequantize_row(t, q.data(), y.data(), int64_t(y.size()));
        for (size_t i = 0; i < x.size(); i += 32) {
            float lo = x[i], hi = x[i], amax = 0;
            for (int j = 0; j < 32; ++j) {
                lo = std::min(lo, x[i + j]);
                hi = std::max(hi, x[i + j]);
                amax = std::max(amax, std::fabs(x[i + j]));
            }
            float step = 0;
            switch (t) {
                case mb::Type::Q4_0: step = amax / 8; break;
                case mb::Type::Q5_0: step = amax / 16; break;
                case mb::Type::Q4_1: step = (hi - lo) / 15; break;
                case mb::Type::Q5_1: step = (hi - lo) / 31; break;
                default: step = amax / 127; break;
            }
            for (int j = 0; j < 32; ++j) {
                const float err = std::fabs(x[i + j] - y[i + j]);
                const bool clips_one_step = t == mb::Type::Q4_0 || t == mb::Type::Q5_0;
                CHECK(err <= (clips_one_step ? 1.01f : 0.51f) * step + 2e-3f * amax,
                      "%s round trip %zu: %g vs %g", mb::type_traits(t).name,
                      i + j, x[i + j], y[i + j]);
            }
        }
    }
    // Non-finite input has no ggml-defined result, but must give some codes without undefined
    // behaviour (run this test under -fsanitize=undefined to check).
    for (mb::Type t : quants) {
        float bad[64];
        for (int j = 0; j < 64; ++j) {
            bad[j] = float(j) - 20.0f;
        }
        bad[3] = NAN;
        bad[40] = INFINITY;
        bad[41] = -INFINITY;
        std::vector<uint8_t> q(mb::row_size(t, 64));
        mb::quantize_row(t, bad, q.data(), 64);
        float back[64];
        mb::dequantize_row(t, q.data(), back, 64);
    }
    {
        const float x4[4] = {1.9f, -1.9f, 3e9f, NAN};
        int32_t out[4];
        mb::quantize_row(mb::Type::I32, x4, out, 4);
        CHECK(out[0] == 1 && out[1] == -1 && out[2] == INT32_MAX && out[3] == 0, "i32 conversion");
    }
}

}  // namespace

int main() {
    test_traits();
    test_fp16();
    test_dequantize();
    test_quantize();
    return mb_check::check_report("test_types");
}
