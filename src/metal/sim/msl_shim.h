// msl_shim.h: lets a .metal file compile as C++17 (gcc >= 12, clang >= 16, AppleClang)
// so that the simulated Metal device can run the very same kernels on the CPU.
//
// tools/metalsim/metal_sim_gen.py includes this header, then the .metal source (rewritten line
// for line), then a registration table. The kernels must stay in the portable subset
// that tools/metalsim/metal_lint.py checks; Apple's compiler stays the final judge:
//   - address spaces `device`, `constant`, `threadgroup`, `thread` are macros here, erased
//     in the build and kept apart by tools/metalsim/strict_compile.py (see "address spaces");
//     threadgroup memory only through [[threadgroup(N)]] kernel parameters, never as a
//     variable declared in a function body
//   - kernel parameters carry exactly the attributes listed in bind:: below;
//     function constants are program-scope `constant T name [[function_constant(i)]];`
//     with T in bool/short/ushort/int/uint/float/half, read directly (not through other
//     program-scope constants) and declared in .metal files, not in headers
//   - vectors: element access .x .y .z .w and [i]; no multi-letter swizzles (.xy);
//     conversions between vector types are explicit, as in MSL
//   - no double, no std::, no recursion, no unsuffixed floating literals (1.0 is a
//     double in C++; write 1.0f or 1.0h)
//   - simd_* and simdgroup matrix operations only in simdgroup-uniform control flow
//     (lanes that returned early are inactive, as on the GPU); barriers reached by every
//     thread of the threadgroup
//   - simdgroup matrices: only lane 0 of a simdgroup holds the tile and performs the
//     loads, stores and products (they are simdgroup-uniform); thread_elements() is
//     not available
//   - compile with -fsigned-char (MSL's char is signed), -fno-strict-aliasing (kernels
//     reinterpret device memory through pointer casts) and -fwrapv (GPU integers wrap)
#pragma once

// Lets headers shared with the host (shaders/quant_blocks.h) take their MSL side here too.
#define MB_MSL_SHIM 1

#include <stddef.h>
#include <stdint.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "metal/sim/kernel_abi.h"

// ---------------------------------------------------------------- address spaces

// MB_MSL_STRICT_ADDRESS_SPACES (a check, never a build: tools/metalsim/strict_compile.py) gives
// `device`, `constant` and `threadgroup` distinct clang address spaces, so that clang rejects what
// Apple's compiler rejects: a pointer or reference passed, assigned or returned from one address
// space to another (`thread`, MSL's default, stays clang's default space), writes through a
// `constant` one and, with the script's rewrite of pointer casts (same_space), casts between
// spaces. The shim's types and functions then accept operands in every space MSL allows: vectors
// and matrices copy from any space and are assigned and indexed in any (members with an explicit
// object parameter, C++23), functions take vectors by value, atomics and simdgroup loads and
// stores take device or threadgroup pointers only, as MSL declares them.
// Without it (the MetalSim build, gcc or clang) the spaces are erased.
#if defined(MB_MSL_STRICT_ADDRESS_SPACES)
#if !defined(__clang__) || __cplusplus < 202302L
#error "MB_MSL_STRICT_ADDRESS_SPACES needs clang and -std=c++23 (explicit object parameters)"
#endif
#define MB_SIM_AS_DEVICE __attribute__((address_space(1)))
#define MB_SIM_AS_CONSTANT __attribute__((address_space(2)))
#define MB_SIM_AS_THREADGROUP __attribute__((address_space(3)))
// A function parameter of vector or matrix type: by value, so that a copy from any address
// space binds (a const reference cannot bind across spaces).
#define MB_SIM_ARG(...) __VA_ARGS__
// Inserted by tools/metalsim/strict_compile.py into every struct of the kernel sources, since MSL
// copies structs between address spaces as C copies them: copy from any space, assign in any.
#define MB_SIM_STRUCT_MEMBERS(name)                                                         \
    name() = default;                                                                       \
    template <class U, class = std::enable_if_t<mb::sim::msl::in_other_space<U, name>>>     \
    name(const U& o) {                                                                      \
        __builtin_memcpy(this, mb::sim::msl::generic(&o), sizeof(name));                    \
    }                                                                                       \
    template <class Self, class = std::enable_if_t<!std::is_const_v<Self>>>                 \
    Self& operator=(this Self& self, name o) {                                              \
        __builtin_memcpy(mb::sim::msl::generic(&self), &o, sizeof(name));                   \
        return self;                                                                        \
    }
#else
#define MB_SIM_AS_DEVICE
#define MB_SIM_AS_CONSTANT
#define MB_SIM_AS_THREADGROUP
#define MB_SIM_ARG(...) const __VA_ARGS__&
#endif

// The namespace the shim and the kernels live in: the global one, or mbsim_racecheck in the racecheck
// build (tools/metalsim/metal_sim_gen.py, src/metal/sim/racecheck.h).
#if defined(MB_SIM_RACECHECK)
#define MB_SIM_TOP ::mbsim_racecheck
#else
#define MB_SIM_TOP
#endif

// ---------------------------------------------------------------- scalar types

typedef _Float16 half;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

// bfloat: the upper 16 bits of a float; arithmetic happens in float and rounds to
// nearest even when stored back.
struct bfloat {
    uint16_t bits;
    bfloat() = default;
    bfloat(float f) {
        uint32_t u;
        __builtin_memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            bits = static_cast<uint16_t>((u >> 16) | 0x40u);
        } else {
            bits = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        }
    }
    operator float() const {
        uint32_t u = static_cast<uint32_t>(bits) << 16;
        float f;
        __builtin_memcpy(&f, &u, 4);
        return f;
    }
};

namespace mb::sim::msl {

template <class T>
struct is_real : std::bool_constant<std::is_floating_point_v<T> || std::is_same_v<T, half> ||
                                    std::is_same_v<T, bfloat>> {};

template <class T>
struct is_scalar : std::bool_constant<std::is_arithmetic_v<T> || is_real<T>::value> {};

template <class T>
struct identity {
    using type = T;
};
template <class T>
using identity_t = typename identity<T>::type;

// T without its address space (cv-qualifiers stay).
template <class T>
struct remove_address_space {
    using type = T;
};
#if defined(MB_MSL_STRICT_ADDRESS_SPACES)
template <class T>
struct remove_address_space<MB_SIM_AS_DEVICE T> {
    using type = T;
};
template <class T>
struct remove_address_space<MB_SIM_AS_CONSTANT T> {
    using type = T;
};
template <class T>
struct remove_address_space<MB_SIM_AS_THREADGROUP T> {
    using type = T;
};
#endif
template <class T>
using remove_address_space_t = typename remove_address_space<T>::type;

// The element type T of a pointer P* (any address space, any cv).
template <class P>
using element_t = std::remove_cv_t<remove_address_space_t<P>>;

// True when U is X (cv-qualified or not) in a device, constant or threadgroup address space.
template <class U, class X>
inline constexpr bool in_other_space = !std::is_same_v<remove_address_space_t<U>, U> &&
                                       std::is_same_v<std::remove_cv_t<remove_address_space_t<U>>, X>;

enum class space { thread, device, constant, threadgroup };

// The address space of T (thread when the spaces are erased).
template <class T>
constexpr space space_of() {
    using U = remove_address_space_t<T>;
    if constexpr (std::is_same_v<T, U>) {
        return space::thread;
    } else if constexpr (std::is_same_v<T, MB_SIM_AS_DEVICE U>) {
        return space::device;
    } else if constexpr (std::is_same_v<T, MB_SIM_AS_CONSTANT U>) {
        return space::constant;
    } else {
        return space::threadgroup;
    }
}

#if defined(MB_MSL_STRICT_ADDRESS_SPACES)
// tools/metalsim/strict_compile.py turns every pointer cast of the kernels, `(T *) x`, into
// `(T *) (same_space<T *>) x`: C++ casts convert between address spaces silently, MSL refuses to.
template <class To>
struct same_space {
    static_assert(std::is_pointer_v<To>);
    To p;
    template <class From>
    same_space(From* from) : p((To)from) {
        static_assert(space_of<From>() == space_of<std::remove_pointer_t<To>>(),
                      "pointer cast between address spaces (MSL allows none)");
    }
    template <class I, class = std::enable_if_t<std::is_integral_v<I>>>
    same_space(I value) : p((To)value) {}
    operator To() const { return p; }
};
#endif

// True for the pointee types of device and threadgroup pointers: where MSL declares atomics and
// simdgroup matrix loads and stores (always true when the spaces are erased).
template <class P>
inline constexpr bool device_or_threadgroup =
#if defined(MB_MSL_STRICT_ADDRESS_SPACES)
    space_of<P>() == space::device || space_of<P>() == space::threadgroup;
#else
    true;
#endif

// A pointer in the default space for the shim's own reads and writes, and the runtime's memory as
// a kernel's pointer parameter (the explicit conversions that kernels themselves may not make).
template <class P>
inline remove_address_space_t<P>* generic(P* p) {
    return (remove_address_space_t<P>*)p;
}
template <class A>
inline A from_runtime(void* p) {
    return (A)p;
}

}  // namespace mb::sim::msl

// ---------------------------------------------------------------- vectors

template <class T, int N>
struct vec;

namespace mb::sim::msl {

template <class T>
struct is_plain_vec : std::false_type {};
template <class T, int N>
struct is_plain_vec<vec<T, N>> : std::true_type {};
// A vector in any address space.
template <class T>
struct is_vec : is_plain_vec<std::remove_cv_t<remove_address_space_t<T>>> {};

template <class T>
constexpr int components() {
    if constexpr (is_vec<T>::value) {
        return remove_address_space_t<T>::size;
    } else {
        return 1;
    }
}

// Storage: element names and an index view of the same bytes (anonymous structs in
// unions are a GNU extension that gcc and clang document). A 3-vector occupies four
// elements, as MSL's float3 does (sizeof(float3) == 16).
template <class T, int N>
struct vec_data;
template <class T>
struct vec_data<T, 2> {
    union {
        struct {
            T x, y;
        };
        T v[2];
    };
};
template <class T>
struct vec_data<T, 3> {
    union {
        struct {
            T x, y, z;
        };
        T v[4];
    };
};
template <class T>
struct vec_data<T, 4> {
    union {
        struct {
            T x, y, z, w;
        };
        T v[4];
    };
};

}  // namespace mb::sim::msl

#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wgnu-anonymous-struct"
#pragma clang diagnostic ignored "-Wnested-anon-types"
#endif

template <class T, int N>
struct vec : mb::sim::msl::vec_data<T, N> {
    using value_type = T;
    static constexpr int size = N;
    using mask = vec<bool, N>;

    vec() = default;
    // MSL converts a scalar to a vector implicitly, replicating it.
    vec(T s) {
        for (int i = 0; i < N; ++i) this->v[i] = s;
    }
    // float4(a, b, c, d), float4(xy, zw), float4(xyz, w), {a, b, c, d}, ...
    template <class A, class B, class... R>
    vec(const A& a, const B& b, const R&... r) {
        static_assert(mb::sim::msl::components<A>() + mb::sim::msl::components<B>() +
                              (0 + ... + mb::sim::msl::components<R>()) ==
                          N,
                      "vector constructor: wrong number of components");
        int i = 0;
        put(i, a);
        put(i, b);
        (put(i, r), ...);
    }
    // Element-wise conversion, explicit as in MSL.
    template <class U>
    explicit vec(MB_SIM_ARG(vec<U, N>) o) {
        for (int i = 0; i < N; ++i) this->v[i] = static_cast<T>(o.v[i]);
    }

#if defined(MB_MSL_STRICT_ADDRESS_SPACES)
    // Copies from every address space; indexing and assignment in every address space.
    // (A template: a constructor from `const device vec&` would count as a copy constructor and
    // make vec non-trivially copyable.)
    template <class U, class = std::enable_if_t<mb::sim::msl::in_other_space<U, vec>>>
    vec(const U& o) {
        for (int i = 0; i < N; ++i) this->v[i] = o.v[i];
    }
    template <class Self>
    auto& operator[](this Self&& self, int i) {
        return self.v[i];
    }
    template <class Self, class = std::enable_if_t<!std::is_const_v<Self>>>
    Self& operator=(this Self& self, vec b) {
        for (int i = 0; i < N; ++i) self.v[i] = b.v[i];
        return self;
    }
#define MB_SIM_VEC_COMPOUND(op)                                                      \
    template <class Self, class = std::enable_if_t<!std::is_const_v<Self>>>          \
    Self& operator op##=(this Self& self, vec b) {                                   \
        for (int i = 0; i < N; ++i) self.v[i] = static_cast<T>(self.v[i] op b.v[i]); \
        return self;                                                                 \
    }
#else
    T& operator[](int i) { return this->v[i]; }
    const T& operator[](int i) const { return this->v[i]; }
#define MB_SIM_VEC_COMPOUND(op)                                                         \
    vec& operator op##=(const vec& b) {                                                 \
        for (int i = 0; i < N; ++i) this->v[i] = static_cast<T>(this->v[i] op b.v[i]); \
        return *this;                                                                   \
    }
#endif

#define MB_SIM_VEC_BINOP(op)                                                   \
    friend vec operator op(MB_SIM_ARG(vec) a, MB_SIM_ARG(vec) b) {             \
        vec r;                                                                 \
        for (int i = 0; i < N; ++i) r.v[i] = static_cast<T>(a.v[i] op b.v[i]); \
        return r;                                                              \
    }                                                                          \
    friend vec operator op(MB_SIM_ARG(vec) a, T b) {                           \
        vec r;                                                                 \
        for (int i = 0; i < N; ++i) r.v[i] = static_cast<T>(a.v[i] op b);      \
        return r;                                                              \
    }                                                                          \
    friend vec operator op(T a, MB_SIM_ARG(vec) b) {                           \
        vec r;                                                                 \
        for (int i = 0; i < N; ++i) r.v[i] = static_cast<T>(a op b.v[i]);      \
        return r;                                                              \
    }                                                                          \
    MB_SIM_VEC_COMPOUND(op)
    MB_SIM_VEC_BINOP(+)
    MB_SIM_VEC_BINOP(-)
    MB_SIM_VEC_BINOP(*)
    MB_SIM_VEC_BINOP(/)
    MB_SIM_VEC_BINOP(%)
    MB_SIM_VEC_BINOP(&)
    MB_SIM_VEC_BINOP(|)
    MB_SIM_VEC_BINOP(^)
    MB_SIM_VEC_BINOP(<<)
    MB_SIM_VEC_BINOP(>>)
#undef MB_SIM_VEC_BINOP
#undef MB_SIM_VEC_COMPOUND

#define MB_SIM_VEC_CMP(op)                                          \
    friend mask operator op(MB_SIM_ARG(vec) a, MB_SIM_ARG(vec) b) { \
        mask r;                                                     \
        for (int i = 0; i < N; ++i) r.v[i] = a.v[i] op b.v[i];      \
        return r;                                                   \
    }                                                               \
    friend mask operator op(MB_SIM_ARG(vec) a, T b) {               \
        mask r;                                                     \
        for (int i = 0; i < N; ++i) r.v[i] = a.v[i] op b;           \
        return r;                                                   \
    }                                                               \
    friend mask operator op(T a, MB_SIM_ARG(vec) b) {               \
        mask r;                                                     \
        for (int i = 0; i < N; ++i) r.v[i] = a op b.v[i];           \
        return r;                                                   \
    }
    MB_SIM_VEC_CMP(==)
    MB_SIM_VEC_CMP(!=)
    MB_SIM_VEC_CMP(<)
    MB_SIM_VEC_CMP(<=)
    MB_SIM_VEC_CMP(>)
    MB_SIM_VEC_CMP(>=)
    MB_SIM_VEC_CMP(&&)
    MB_SIM_VEC_CMP(||)
#undef MB_SIM_VEC_CMP

    friend vec operator+(MB_SIM_ARG(vec) a) { return a; }
    friend vec operator-(MB_SIM_ARG(vec) a) {
        vec r;
        for (int i = 0; i < N; ++i) r.v[i] = static_cast<T>(-a.v[i]);
        return r;
    }
    friend vec operator~(MB_SIM_ARG(vec) a) {
        vec r;
        for (int i = 0; i < N; ++i) r.v[i] = static_cast<T>(~a.v[i]);
        return r;
    }
    friend mask operator!(MB_SIM_ARG(vec) a) {
        mask r;
        for (int i = 0; i < N; ++i) r.v[i] = !a.v[i];
        return r;
    }

private:
    template <class U>
    void put(int& i, const U& part) {
        if constexpr (mb::sim::msl::is_vec<U>::value) {
            for (int j = 0; j < mb::sim::msl::components<U>(); ++j) this->v[i++] = static_cast<T>(part.v[j]);
        } else {
            this->v[i++] = static_cast<T>(part);
        }
    }
};

#if defined(__clang__)
#pragma clang diagnostic pop
#endif

#define MB_SIM_VEC_TYPES(T, name) \
    typedef vec<T, 2> name##2;    \
    typedef vec<T, 3> name##3;    \
    typedef vec<T, 4> name##4;
MB_SIM_VEC_TYPES(bool, bool)
MB_SIM_VEC_TYPES(char, char)
MB_SIM_VEC_TYPES(uchar, uchar)
MB_SIM_VEC_TYPES(short, short)
MB_SIM_VEC_TYPES(ushort, ushort)
MB_SIM_VEC_TYPES(int, int)
MB_SIM_VEC_TYPES(uint, uint)
MB_SIM_VEC_TYPES(long, long)
MB_SIM_VEC_TYPES(ulong, ulong)
MB_SIM_VEC_TYPES(float, float)
MB_SIM_VEC_TYPES(half, half)
MB_SIM_VEC_TYPES(bfloat, bfloat)
#undef MB_SIM_VEC_TYPES

// ---------------------------------------------------------------- matrices

// floatCxR: C columns of R-element vectors; m[i] is column i.
template <class T, int C, int R>
struct mat {
    vec<T, R> columns[C];

    mat() = default;
    // A diagonal matrix, as MSL's floatNxN(s).
    explicit mat(T diagonal) {
        for (int c = 0; c < C; ++c) {
            columns[c] = vec<T, R>(T(0));
            if (c < R) columns[c].v[c] = diagonal;
        }
    }
    template <class... V, class = std::enable_if_t<sizeof...(V) == C && (C > 1)>>
    explicit mat(const V&... cols) : columns{cols...} {}
    template <class U>
    explicit mat(MB_SIM_ARG(mat<U, C, R>) o) {
        for (int c = 0; c < C; ++c) columns[c] = vec<T, R>(o.columns[c]);
    }

#if defined(MB_MSL_STRICT_ADDRESS_SPACES)
    template <class U, class = std::enable_if_t<mb::sim::msl::in_other_space<U, mat>>>
    mat(const U& o) {
        for (int c = 0; c < C; ++c) columns[c] = o.columns[c];
    }
    template <class Self>
    auto& operator[](this Self&& self, int c) {
        return self.columns[c];
    }
    template <class Self, class = std::enable_if_t<!std::is_const_v<Self>>>
    Self& operator=(this Self& self, mat b) {
        for (int c = 0; c < C; ++c) self.columns[c] = b.columns[c];
        return self;
    }
#else
    vec<T, R>& operator[](int c) { return columns[c]; }
    const vec<T, R>& operator[](int c) const { return columns[c]; }
#endif

    friend mat operator+(MB_SIM_ARG(mat) a, MB_SIM_ARG(mat) b) {
        mat r;
        for (int c = 0; c < C; ++c) r.columns[c] = a.columns[c] + b.columns[c];
        return r;
    }
    friend mat operator-(MB_SIM_ARG(mat) a, MB_SIM_ARG(mat) b) {
        mat r;
        for (int c = 0; c < C; ++c) r.columns[c] = a.columns[c] - b.columns[c];
        return r;
    }
    friend mat operator*(MB_SIM_ARG(mat) a, T s) {
        mat r;
        for (int c = 0; c < C; ++c) r.columns[c] = a.columns[c] * s;
        return r;
    }
    friend mat operator*(T s, MB_SIM_ARG(mat) a) { return a * s; }
    friend vec<T, R> operator*(MB_SIM_ARG(mat) a, MB_SIM_ARG(vec<T, C>) x) {
        vec<T, R> r(T(0));
        for (int c = 0; c < C; ++c) r += a.columns[c] * x.v[c];
        return r;
    }
    friend vec<T, C> operator*(MB_SIM_ARG(vec<T, R>) x, MB_SIM_ARG(mat) a) {
        vec<T, C> r;
        for (int c = 0; c < C; ++c) {
            T s = T(0);
            for (int k = 0; k < R; ++k) s += x.v[k] * a.columns[c].v[k];
            r.v[c] = s;
        }
        return r;
    }
    template <int K>
    friend mat<T, K, R> operator*(MB_SIM_ARG(mat) a, MB_SIM_ARG(mat<T, K, C>) b) {
        mat<T, K, R> r;
        for (int k = 0; k < K; ++k) r.columns[k] = a * b.columns[k];
        return r;
    }
};

#define MB_SIM_MAT_TYPES(T, name) \
    typedef mat<T, 2, 2> name##2x2; \
    typedef mat<T, 2, 3> name##2x3; \
    typedef mat<T, 2, 4> name##2x4; \
    typedef mat<T, 3, 2> name##3x2; \
    typedef mat<T, 3, 3> name##3x3; \
    typedef mat<T, 3, 4> name##3x4; \
    typedef mat<T, 4, 2> name##4x2; \
    typedef mat<T, 4, 3> name##4x3; \
    typedef mat<T, 4, 4> name##4x4;
MB_SIM_MAT_TYPES(float, float)
MB_SIM_MAT_TYPES(half, half)
#undef MB_SIM_MAT_TYPES

// ---------------------------------------------------------------- constants

#ifndef INFINITY
#define INFINITY (__builtin_inff())
#endif
#ifndef NAN
#define NAN (__builtin_nanf(""))
#endif
#ifndef MAXFLOAT
#define MAXFLOAT 0x1.fffffep+127f
#endif
#ifndef FLT_MAX
#define FLT_MAX 0x1.fffffep+127f
#endif
#ifndef FLT_MIN
#define FLT_MIN 0x1p-126f
#endif
#ifndef FLT_EPSILON
#define FLT_EPSILON 0x1p-23f
#endif
#ifndef HALF_MAX
#define HALF_MAX (static_cast<half>(65504.0f))
#endif
#ifndef HALF_MIN
#define HALF_MIN (static_cast<half>(0x1p-14f))
#endif
#ifndef INT_MAX
#define INT_MAX 2147483647
#endif
#ifndef INT_MIN
#define INT_MIN (-2147483647 - 1)
#endif
#ifndef UINT_MAX
#define UINT_MAX 4294967295u
#endif
#ifndef SHRT_MAX
#define SHRT_MAX 32767
#endif
#ifndef USHRT_MAX
#define USHRT_MAX 65535
#endif
#define M_E_F 2.71828182845904523536f
#define M_LOG2E_F 1.44269504088896340736f
#define M_LOG10E_F 0.434294481903251827651f
#define M_LN2_F 0.693147180559945309417f
#define M_LN10_F 2.30258509299404568402f
#define M_PI_F 3.14159265358979323846f
#define M_PI_2_F 1.57079632679489661923f
#define M_PI_4_F 0.785398163397448309616f
#define M_1_PI_F 0.318309886183790671538f
#define M_2_PI_F 0.636619772367581343076f
#define M_2_SQRTPI_F 1.12837916709551257390f
#define M_SQRT2_F 1.41421356237309504880f
#define M_SQRT1_2_F 0.707106781186547524401f

// ---------------------------------------------------------------- the metal namespace

namespace metal {

// Element-wise application over vectors of a function defined for scalars.
#define MB_SIM_MAP1(name)                                  \
    template <class T, int N>                              \
    inline vec<T, N> name(MB_SIM_ARG(vec<T, N>) a) {       \
        vec<T, N> r;                                       \
        for (int i = 0; i < N; ++i) r.v[i] = name(a.v[i]); \
        return r;                                          \
    }
#define MB_SIM_MAP2(name)                                                           \
    template <class T, int N>                                                       \
    inline vec<T, N> name(MB_SIM_ARG(vec<T, N>) a, MB_SIM_ARG(vec<T, N>) b) {       \
        vec<T, N> r;                                                                \
        for (int i = 0; i < N; ++i) r.v[i] = name(a.v[i], b.v[i]);                  \
        return r;                                                                   \
    }                                                                               \
    template <class T, int N>                                                       \
    inline vec<T, N> name(MB_SIM_ARG(vec<T, N>) a, mb::sim::msl::identity_t<T> b) { \
        vec<T, N> r;                                                                \
        for (int i = 0; i < N; ++i) r.v[i] = name(a.v[i], b);                       \
        return r;                                                                   \
    }
#define MB_SIM_MAP3(name)                                                                              \
    template <class T, int N>                                                                          \
    inline vec<T, N> name(MB_SIM_ARG(vec<T, N>) a, MB_SIM_ARG(vec<T, N>) b, MB_SIM_ARG(vec<T, N>) c) { \
        vec<T, N> r;                                                                                   \
        for (int i = 0; i < N; ++i) r.v[i] = name(a.v[i], b.v[i], c.v[i]);                             \
        return r;                                                                                      \
    }                                                                                                  \
    template <class T, int N>                                                                          \
    inline vec<T, N> name(MB_SIM_ARG(vec<T, N>) a, MB_SIM_ARG(vec<T, N>) b,                            \
                          mb::sim::msl::identity_t<T> c) {                                             \
        vec<T, N> r;                                                                                   \
        for (int i = 0; i < N; ++i) r.v[i] = name(a.v[i], b.v[i], c);                                  \
        return r;                                                                                      \
    }                                                                                                  \
    template <class T, int N>                                                                          \
    inline vec<T, N> name(MB_SIM_ARG(vec<T, N>) a, mb::sim::msl::identity_t<T> b,                      \
                          mb::sim::msl::identity_t<T> c) {                                             \
        vec<T, N> r;                                                                                   \
        for (int i = 0; i < N; ++i) r.v[i] = name(a.v[i], b, c);                                       \
        return r;                                                                                      \
    }

// Float functions: float through the compiler builtins (no <cmath>, whose global
// overloads would make calls after `using namespace metal` ambiguous), half through float.
#define MB_SIM_F1(name, expr)                                        \
    inline float name(float x) { return expr; }                      \
    inline half name(half x) { return static_cast<half>(name(static_cast<float>(x))); } \
    MB_SIM_MAP1(name)
#define MB_SIM_F2(name, expr)                                                     \
    inline float name(float x, float y) { return expr; }                          \
    inline half name(half x, half y) {                                            \
        return static_cast<half>(name(static_cast<float>(x), static_cast<float>(y))); \
    }                                                                             \
    MB_SIM_MAP2(name)
#define MB_SIM_F3(name, expr)                                                          \
    inline float name(float x, float y, float z) { return expr; }                      \
    inline half name(half x, half y, half z) {                                         \
        return static_cast<half>(                                                      \
            name(static_cast<float>(x), static_cast<float>(y), static_cast<float>(z))); \
    }                                                                                  \
    MB_SIM_MAP3(name)

MB_SIM_F1(acos, __builtin_acosf(x))
MB_SIM_F1(acosh, __builtin_acoshf(x))
MB_SIM_F1(asin, __builtin_asinf(x))
MB_SIM_F1(asinh, __builtin_asinhf(x))
MB_SIM_F1(atan, __builtin_atanf(x))
MB_SIM_F1(atanh, __builtin_atanhf(x))
MB_SIM_F1(ceil, __builtin_ceilf(x))
MB_SIM_F1(cos, __builtin_cosf(x))
MB_SIM_F1(cosh, __builtin_coshf(x))
MB_SIM_F1(cospi, __builtin_cosf(x * M_PI_F))
MB_SIM_F1(exp, __builtin_expf(x))
MB_SIM_F1(exp2, __builtin_exp2f(x))
MB_SIM_F1(exp10, __builtin_powf(10.0f, x))
MB_SIM_F1(fabs, __builtin_fabsf(x))
MB_SIM_F1(floor, __builtin_floorf(x))
MB_SIM_F1(fract, __builtin_fminf(x - __builtin_floorf(x), 0x1.fffffep-1f))
MB_SIM_F1(log, __builtin_logf(x))
MB_SIM_F1(log2, __builtin_log2f(x))
MB_SIM_F1(log10, __builtin_log10f(x))
MB_SIM_F1(rint, __builtin_rintf(x))
MB_SIM_F1(round, __builtin_roundf(x))
MB_SIM_F1(rsqrt, 1.0f / __builtin_sqrtf(x))
MB_SIM_F1(saturate, __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f))
MB_SIM_F1(sin, __builtin_sinf(x))
MB_SIM_F1(sinh, __builtin_sinhf(x))
MB_SIM_F1(sinpi, __builtin_sinf(x * M_PI_F))
MB_SIM_F1(sqrt, __builtin_sqrtf(x))
MB_SIM_F1(tan, __builtin_tanf(x))
MB_SIM_F1(tanh, __builtin_tanhf(x))
MB_SIM_F1(tanpi, __builtin_tanf(x * M_PI_F))
MB_SIM_F1(trunc, __builtin_truncf(x))
MB_SIM_F1(sign, x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : (x == x ? 0.0f * x : 0.0f)))

MB_SIM_F2(atan2, __builtin_atan2f(x, y))
MB_SIM_F2(copysign, __builtin_copysignf(x, y))
MB_SIM_F2(fdim, __builtin_fdimf(x, y))
MB_SIM_F2(fmax, __builtin_fmaxf(x, y))
MB_SIM_F2(fmin, __builtin_fminf(x, y))
MB_SIM_F2(fmod, __builtin_fmodf(x, y))
MB_SIM_F2(pow, __builtin_powf(x, y))
MB_SIM_F2(powr, __builtin_powf(x, y))
MB_SIM_F2(step, y < x ? 0.0f : 1.0f)
MB_SIM_F2(divide, x / y)

MB_SIM_F3(fma, __builtin_fmaf(x, y, z))
MB_SIM_F3(mix, x + (y - x) * z)
MB_SIM_F3(smoothstep, saturate((z - x) / (y - x)) * saturate((z - x) / (y - x)) *
                          (3.0f - 2.0f * saturate((z - x) / (y - x))))

#undef MB_SIM_F1
#undef MB_SIM_F2
#undef MB_SIM_F3

// min, max, clamp, abs for every scalar type as separate overloads (like MSL's), so
// that mixing types is as ambiguous as on Apple's compiler.
#define MB_SIM_INTEGER_TYPES(X) \
    X(char) X(signed char) X(uchar) X(short) X(ushort) X(int) X(uint) X(long) X(ulong) \
    X(long long) X(unsigned long long)
#define MB_SIM_MINMAX(T)                                                   \
    inline T min(T x, T y) { return y < x ? y : x; }                       \
    inline T max(T x, T y) { return x < y ? y : x; }                       \
    inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
MB_SIM_INTEGER_TYPES(MB_SIM_MINMAX)
#undef MB_SIM_MINMAX
inline float min(float x, float y) { return __builtin_fminf(x, y); }
inline float max(float x, float y) { return __builtin_fmaxf(x, y); }
inline float clamp(float x, float lo, float hi) { return __builtin_fminf(__builtin_fmaxf(x, lo), hi); }
inline half min(half x, half y) { return static_cast<half>(__builtin_fminf(x, y)); }
inline half max(half x, half y) { return static_cast<half>(__builtin_fmaxf(x, y)); }
inline half clamp(half x, half lo, half hi) { return min(max(x, lo), hi); }
MB_SIM_MAP2(min)
MB_SIM_MAP2(max)
MB_SIM_MAP3(clamp)

#define MB_SIM_ABS_SIGNED(T) \
    inline T abs(T x) { return x < 0 ? static_cast<T>(-x) : x; }
#define MB_SIM_ABS_UNSIGNED(T) \
    inline T abs(T x) { return x; }
MB_SIM_ABS_SIGNED(char)
MB_SIM_ABS_SIGNED(signed char)
MB_SIM_ABS_SIGNED(short)
MB_SIM_ABS_SIGNED(int)
MB_SIM_ABS_SIGNED(long)
MB_SIM_ABS_SIGNED(long long)
MB_SIM_ABS_UNSIGNED(uchar)
MB_SIM_ABS_UNSIGNED(ushort)
MB_SIM_ABS_UNSIGNED(uint)
MB_SIM_ABS_UNSIGNED(ulong)
MB_SIM_ABS_UNSIGNED(unsigned long long)
#undef MB_SIM_ABS_SIGNED
#undef MB_SIM_ABS_UNSIGNED
inline float abs(float x) { return __builtin_fabsf(x); }
inline half abs(half x) { return static_cast<half>(__builtin_fabsf(x)); }
MB_SIM_MAP1(abs)

inline uint popcount(uint x) { return static_cast<uint>(__builtin_popcount(x)); }
inline int popcount(int x) { return __builtin_popcount(static_cast<uint>(x)); }
inline ushort popcount(ushort x) { return static_cast<ushort>(__builtin_popcount(x)); }
inline uchar popcount(uchar x) { return static_cast<uchar>(__builtin_popcount(x)); }
inline ulong popcount(ulong x) { return static_cast<ulong>(__builtin_popcountl(x)); }
inline uint clz(uint x) { return x ? static_cast<uint>(__builtin_clz(x)) : 32u; }
inline uint ctz(uint x) { return x ? static_cast<uint>(__builtin_ctz(x)) : 32u; }
inline ulong clz(ulong x) { return x ? static_cast<ulong>(__builtin_clzl(x)) : 64ul; }
inline ulong ctz(ulong x) { return x ? static_cast<ulong>(__builtin_ctzl(x)) : 64ul; }
MB_SIM_MAP1(popcount)

#undef MB_SIM_MAP1
#undef MB_SIM_MAP2
#undef MB_SIM_MAP3
#undef MB_SIM_INTEGER_TYPES

// --- relational

inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isnan(half x) { return __builtin_isnan(static_cast<float>(x)); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isinf(half x) { return __builtin_isinf(static_cast<float>(x)); }
inline bool isfinite(float x) { return __builtin_isfinite(x); }
inline bool isfinite(half x) { return __builtin_isfinite(static_cast<float>(x)); }
inline bool signbit(float x) { return __builtin_signbit(x); }
inline bool signbit(half x) { return __builtin_signbit(static_cast<float>(x)); }
#define MB_SIM_PRED(name)                                  \
    template <class T, int N>                              \
    inline vec<bool, N> name(MB_SIM_ARG(vec<T, N>) a) {    \
        vec<bool, N> r;                                    \
        for (int i = 0; i < N; ++i) r.v[i] = name(a.v[i]); \
        return r;                                          \
    }
MB_SIM_PRED(isnan)
MB_SIM_PRED(isinf)
MB_SIM_PRED(isfinite)
MB_SIM_PRED(signbit)
#undef MB_SIM_PRED

inline bool any(bool x) { return x; }
inline bool all(bool x) { return x; }
template <int N>
inline bool any(MB_SIM_ARG(vec<bool, N>) a) {
    bool r = false;
    for (int i = 0; i < N; ++i) r = r || a.v[i];
    return r;
}
template <int N>
inline bool all(MB_SIM_ARG(vec<bool, N>) a) {
    bool r = true;
    for (int i = 0; i < N; ++i) r = r && a.v[i];
    return r;
}

template <class T, class = std::enable_if_t<mb::sim::msl::is_scalar<T>::value>>
inline T select(T a, T b, bool c) {
    return c ? b : a;
}
template <class T, int N>
inline vec<T, N> select(MB_SIM_ARG(vec<T, N>) a, MB_SIM_ARG(vec<T, N>) b, MB_SIM_ARG(vec<bool, N>) c) {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = c.v[i] ? b.v[i] : a.v[i];
    return r;
}
template <class T, int N>
inline vec<T, N> select(MB_SIM_ARG(vec<T, N>) a, MB_SIM_ARG(vec<T, N>) b, bool c) {
    return c ? b : a;
}

// --- geometric

template <class T, int N>
inline T dot(MB_SIM_ARG(vec<T, N>) a, MB_SIM_ARG(vec<T, N>) b) {
    T s = a.v[0] * b.v[0];
    for (int i = 1; i < N; ++i) s += a.v[i] * b.v[i];
    return s;
}
template <class T, int N>
inline T length_squared(MB_SIM_ARG(vec<T, N>) a) {
    return dot(a, a);
}
template <class T, int N>
inline T length(MB_SIM_ARG(vec<T, N>) a) {
    return sqrt(dot(a, a));
}
template <class T, int N>
inline T distance(MB_SIM_ARG(vec<T, N>) a, MB_SIM_ARG(vec<T, N>) b) {
    return length(a - b);
}
template <class T, int N>
inline vec<T, N> normalize(MB_SIM_ARG(vec<T, N>) a) {
    return a * rsqrt(dot(a, a));
}
template <class T>
inline vec<T, 3> cross(MB_SIM_ARG(vec<T, 3>) a, MB_SIM_ARG(vec<T, 3>) b) {
    return vec<T, 3>(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}

// --- reinterpretation

template <class To, class From>
inline To as_type(MB_SIM_ARG(From) x) {
    static_assert(sizeof(To) == sizeof(From), "as_type: sizes differ");
    To r;
    __builtin_memcpy(&r, &x, sizeof(To));
    return r;
}

// --- precise:: and fast:: forms compute as the plain ones

#define MB_SIM_MATH_NAMES(X)                                                                   \
    X(acos) X(acosh) X(asin) X(asinh) X(atan) X(atanh) X(atan2) X(ceil) X(clamp) X(copysign) \
    X(cos) X(cosh) X(cospi) X(divide) X(exp) X(exp2) X(exp10) X(fabs) X(fdim) X(floor)       \
    X(fma) X(fmax) X(fmin) X(fmod) X(fract) X(log) X(log2) X(log10) X(max) X(min) X(pow)     \
    X(powr) X(rint) X(round) X(rsqrt) X(saturate) X(sin) X(sinh) X(sinpi) X(sqrt) X(tan)     \
    X(tanh) X(tanpi) X(trunc) X(normalize) X(length) X(distance)
#define MB_SIM_USING(name) using metal::name;
namespace precise {
MB_SIM_MATH_NAMES(MB_SIM_USING)
}
namespace fast {
MB_SIM_MATH_NAMES(MB_SIM_USING)
}
#undef MB_SIM_USING
#undef MB_SIM_MATH_NAMES

// --- numeric_limits

template <class T>
struct numeric_limits;
#define MB_SIM_LIMITS(T, lo, hi, lowest_, eps, inf, qnan)                 \
    template <>                                                          \
    struct numeric_limits<T> {                                           \
        static constexpr T min() { return lo; }                          \
        static constexpr T max() { return hi; }                          \
        static constexpr T lowest() { return lowest_; }                  \
        static constexpr T epsilon() { return eps; }                     \
        static constexpr T infinity() { return inf; }                    \
        static constexpr T quiet_NaN() { return qnan; }                  \
    };
MB_SIM_LIMITS(float, FLT_MIN, FLT_MAX, -FLT_MAX, FLT_EPSILON, __builtin_inff(), __builtin_nanf(""))
MB_SIM_LIMITS(half, static_cast<half>(0x1p-14f), static_cast<half>(65504.0f),
              static_cast<half>(-65504.0f), static_cast<half>(0x1p-10f),
              static_cast<half>(__builtin_inff()), static_cast<half>(__builtin_nanf("")))
MB_SIM_LIMITS(char, -128, 127, -128, 0, 0, 0)
MB_SIM_LIMITS(uchar, 0, 255, 0, 0, 0, 0)
MB_SIM_LIMITS(short, -32768, 32767, -32768, 0, 0, 0)
MB_SIM_LIMITS(ushort, 0, 65535, 0, 0, 0, 0)
MB_SIM_LIMITS(int, INT_MIN, INT_MAX, INT_MIN, 0, 0, 0)
MB_SIM_LIMITS(uint, 0, UINT_MAX, 0, 0, 0, 0)
#undef MB_SIM_LIMITS

// ---------------------------------------------------------------- atomics

enum memory_order {
    memory_order_relaxed,
    memory_order_acquire,
    memory_order_release,
    memory_order_acq_rel,
    memory_order_seq_cst,
};

// Threadgroups run on several host threads, so device atomics are real atomics.
template <class T>
struct atomic {
    T value_;
};
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<bool> atomic_bool;
typedef atomic<float> atomic_float;

namespace mbsim_detail {
template <class T>
using bits_t = std::conditional_t<sizeof(T) == 4, uint32_t, std::conditional_t<sizeof(T) == 8, uint64_t, T>>;

template <class T, class F>
inline T atomic_update(volatile atomic<T>* obj, F f) {
    using B = bits_t<T>;
    auto* p = reinterpret_cast<volatile B*>(&obj->value_);
    B old_bits = __atomic_load_n(p, __ATOMIC_RELAXED);
    for (;;) {
        T old_value = as_type<T>(old_bits);
        B new_bits = as_type<B>(static_cast<T>(f(old_value)));
        if (__atomic_compare_exchange_n(p, &old_bits, new_bits, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            return old_value;
        }
    }
}

template <class T>
struct atomic_value;
template <class T>
struct atomic_value<atomic<T>> {
    using type = T;
};
// The value type of an atomic object A (any address space and cv); the object must be in device
// or threadgroup memory, as MSL declares its atomic functions.
template <class A>
using atomic_value_t =
    typename atomic_value<std::remove_cv_t<mb::sim::msl::remove_address_space_t<A>>>::type;
template <class A>
inline volatile atomic<atomic_value_t<A>>* atomic_object(volatile A* obj) {
    static_assert(mb::sim::msl::device_or_threadgroup<A>, "atomic functions take a device or threadgroup atomic");
    return (volatile atomic<atomic_value_t<A>>*)obj;
}
}  // namespace mbsim_detail

template <class A, class T = mbsim_detail::atomic_value_t<A>>
inline void atomic_store_explicit(volatile A* obj, mb::sim::msl::identity_t<T> v, memory_order) {
    __atomic_store(&mbsim_detail::atomic_object(obj)->value_, &v, __ATOMIC_RELAXED);
}
template <class A, class T = mbsim_detail::atomic_value_t<A>>
inline T atomic_load_explicit(volatile A* obj, memory_order) {
    T r;
    __atomic_load(&mbsim_detail::atomic_object(obj)->value_, &r, __ATOMIC_RELAXED);
    return r;
}
template <class A, class T = mbsim_detail::atomic_value_t<A>>
inline T atomic_exchange_explicit(volatile A* obj, mb::sim::msl::identity_t<T> v, memory_order) {
    T r;
    __atomic_exchange(&mbsim_detail::atomic_object(obj)->value_, &v, &r, __ATOMIC_RELAXED);
    return r;
}
template <class A, class T = mbsim_detail::atomic_value_t<A>>
inline bool atomic_compare_exchange_weak_explicit(volatile A* obj, T* expected, mb::sim::msl::identity_t<T> desired,
                                                  memory_order, memory_order) {
    return __atomic_compare_exchange(&mbsim_detail::atomic_object(obj)->value_, expected, &desired, false,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
#define MB_SIM_ATOMIC_RMW(name, expr)                                                                       \
    template <class A, class T = mbsim_detail::atomic_value_t<A>>                                           \
    inline T atomic_fetch_##name##_explicit(volatile A* obj, mb::sim::msl::identity_t<T> v, memory_order) { \
        return mbsim_detail::atomic_update(mbsim_detail::atomic_object(obj), [v](T a) { return expr; });    \
    }
MB_SIM_ATOMIC_RMW(add, a + v)
MB_SIM_ATOMIC_RMW(sub, a - v)
MB_SIM_ATOMIC_RMW(and, a & v)
MB_SIM_ATOMIC_RMW(or, a | v)
MB_SIM_ATOMIC_RMW(xor, a ^ v)
MB_SIM_ATOMIC_RMW(min, v < a ? v : a)
MB_SIM_ATOMIC_RMW(max, a < v ? v : a)
#undef MB_SIM_ATOMIC_RMW

// ---------------------------------------------------------------- synchronisation

enum class mem_flags : uint32_t {
    mem_none = 0,
    mem_device = 1,
    mem_threadgroup = 2,
    mem_texture = 4,
    mem_threadgroup_imageblock = 8,
    mem_object_data = 16,
};
constexpr mem_flags operator|(mem_flags a, mem_flags b) {
    return static_cast<mem_flags>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}

// The call site's file and line (the .metal line, through #line) identify a barrier in
// error messages; barriers at different lines never match.
inline void threadgroup_barrier(mem_flags, const char* file = __builtin_FILE(),
                                unsigned line = __builtin_LINE()) {
    mb::sim::abi::threadgroup_barrier(file, line);
}
inline void simdgroup_barrier(mem_flags, const char* file = __builtin_FILE(),
                              unsigned line = __builtin_LINE()) {
    uint32_t lane;
    mb::sim::abi::simd_exchange(mb::sim::abi::SyncOp::SimdgroupBarrier, mb::sim::abi::SimdSlot{}, file,
                                line, &lane);
}

namespace mbsim_detail {

using mb::sim::abi::SimdExchange;
using mb::sim::abi::SyncOp;

template <class T>
inline T slot(const mb::sim::abi::SimdSlot& s) {
    T v;
    __builtin_memcpy(&v, s.bytes, sizeof(T));
    return v;
}

template <class T>
inline SimdExchange* exchange(SyncOp op, const T& x, const char* file, unsigned line, uint32_t& lane) {
    static_assert(sizeof(T) <= mb::sim::abi::kSimdSlotBytes, "simd_*: value larger than 16 bytes");
    static_assert(std::is_trivially_copyable_v<T>, "simd_*: value not trivially copyable");
    mb::sim::abi::SimdSlot s{};
    __builtin_memcpy(s.bytes, &x, sizeof(T));
    return mb::sim::abi::simd_exchange(op, s, file, line, &lane);
}

// A reduction is computed once per simdgroup operation, by the first lane that reads
// it, as a pairwise tree over the lanes (inactive lanes contribute `identity`).
template <class T, class F>
inline T reduce(SimdExchange* ex, const T& identity, F f) {
    if (!ex->resolved) {
        T v[32];
        for (int i = 0; i < 32; ++i) v[i] = (ex->active >> i) & 1u ? slot<T>(ex->in[i]) : identity;
        for (int w = 16; w >= 1; w /= 2) {
            for (int i = 0; i < w; ++i) v[i] = f(v[i], v[i + w]);
        }
        __builtin_memcpy(ex->out[0].bytes, &v[0], sizeof(T));
        ex->resolved = true;
    }
    return slot<T>(ex->out[0]);
}

inline int first_active(const SimdExchange* ex) { return __builtin_ctz(ex->active); }

template <class T, class F>
inline T reduce_op(SyncOp op, const T& x, const char* file, unsigned line, F f, bool idempotent,
                   const T& identity) {
    uint32_t lane;
    SimdExchange* ex = exchange(op, x, file, line, lane);
    return reduce(ex, idempotent ? slot<T>(ex->in[first_active(ex)]) : identity, f);
}

// Inclusive or exclusive scan over the active lanes in lane order.
template <class T, class F>
inline T scan_op(SyncOp op, const T& x, const char* file, unsigned line, F f, const T& identity,
                 bool inclusive) {
    uint32_t lane;
    SimdExchange* ex = exchange(op, x, file, line, lane);
    if (!ex->resolved) {
        T acc = identity;
        for (int i = 0; i < 32; ++i) {
            if (!((ex->active >> i) & 1u)) continue;
            T in = slot<T>(ex->in[i]);
            T next = f(acc, in);
            const T& out = inclusive ? next : acc;
            __builtin_memcpy(ex->out[i].bytes, &out, sizeof(T));
            acc = next;
        }
        ex->resolved = true;
    }
    return slot<T>(ex->out[lane]);
}

// Value of lane `src`, or the caller's own value when `src` is outside the simdgroup
// or has returned.
template <class T>
inline T from_lane(SyncOp op, const T& x, int (*pick)(uint32_t, uint32_t), uint32_t arg,
                   const char* file, unsigned line) {
    uint32_t lane;
    SimdExchange* ex = exchange(op, x, file, line, lane);
    int src = pick(lane, arg);
    if (src < 0 || src >= 32 || !((ex->active >> src) & 1u)) return x;
    return slot<T>(ex->in[src]);
}

}  // namespace mbsim_detail

#define MB_SIM_SITE const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()

template <class T>
inline T simd_sum(T x, MB_SIM_SITE) {
    return mbsim_detail::reduce_op(mbsim_detail::SyncOp::SimdSum, x, file, line,
                             [](const T& a, const T& b) { return static_cast<T>(a + b); }, false, T(0));
}
template <class T>
inline T simd_product(T x, MB_SIM_SITE) {
    return mbsim_detail::reduce_op(mbsim_detail::SyncOp::SimdProduct, x, file, line,
                             [](const T& a, const T& b) { return static_cast<T>(a * b); }, false, T(1));
}
template <class T>
inline T simd_min(T x, MB_SIM_SITE) {
    return mbsim_detail::reduce_op(mbsim_detail::SyncOp::SimdMin, x, file, line,
                             [](const T& a, const T& b) { return min(a, b); }, true, x);
}
template <class T>
inline T simd_max(T x, MB_SIM_SITE) {
    return mbsim_detail::reduce_op(mbsim_detail::SyncOp::SimdMax, x, file, line,
                             [](const T& a, const T& b) { return max(a, b); }, true, x);
}
template <class T>
inline T simd_and(T x, MB_SIM_SITE) {
    return mbsim_detail::reduce_op(mbsim_detail::SyncOp::SimdAnd, x, file, line,
                             [](const T& a, const T& b) { return static_cast<T>(a & b); }, true, x);
}
template <class T>
inline T simd_or(T x, MB_SIM_SITE) {
    return mbsim_detail::reduce_op(mbsim_detail::SyncOp::SimdOr, x, file, line,
                             [](const T& a, const T& b) { return static_cast<T>(a | b); }, true, x);
}
template <class T>
inline T simd_xor(T x, MB_SIM_SITE) {
    return mbsim_detail::reduce_op(mbsim_detail::SyncOp::SimdXor, x, file, line,
                             [](const T& a, const T& b) { return static_cast<T>(a ^ b); }, false, T(0));
}
template <class T>
inline T simd_prefix_inclusive_sum(T x, MB_SIM_SITE) {
    return mbsim_detail::scan_op(mbsim_detail::SyncOp::SimdPrefixInclusiveSum, x, file, line,
                           [](const T& a, const T& b) { return static_cast<T>(a + b); }, T(0), true);
}
template <class T>
inline T simd_prefix_exclusive_sum(T x, MB_SIM_SITE) {
    return mbsim_detail::scan_op(mbsim_detail::SyncOp::SimdPrefixExclusiveSum, x, file, line,
                           [](const T& a, const T& b) { return static_cast<T>(a + b); }, T(0), false);
}
template <class T>
inline T simd_prefix_inclusive_product(T x, MB_SIM_SITE) {
    return mbsim_detail::scan_op(mbsim_detail::SyncOp::SimdPrefixInclusiveProduct, x, file, line,
                           [](const T& a, const T& b) { return static_cast<T>(a * b); }, T(1), true);
}
template <class T>
inline T simd_prefix_exclusive_product(T x, MB_SIM_SITE) {
    return mbsim_detail::scan_op(mbsim_detail::SyncOp::SimdPrefixExclusiveProduct, x, file, line,
                           [](const T& a, const T& b) { return static_cast<T>(a * b); }, T(1), false);
}

template <class T>
inline T simd_shuffle(T x, ushort src, MB_SIM_SITE) {
    return mbsim_detail::from_lane(mbsim_detail::SyncOp::SimdShuffle, x,
                             [](uint32_t, uint32_t s) { return static_cast<int>(s); }, src, file, line);
}
template <class T>
inline T simd_broadcast(T x, ushort src, MB_SIM_SITE) {
    return mbsim_detail::from_lane(mbsim_detail::SyncOp::SimdBroadcast, x,
                             [](uint32_t, uint32_t s) { return static_cast<int>(s); }, src, file, line);
}
template <class T>
inline T simd_shuffle_down(T x, ushort delta, MB_SIM_SITE) {
    return mbsim_detail::from_lane(mbsim_detail::SyncOp::SimdShuffleDown, x,
                             [](uint32_t l, uint32_t d) { return static_cast<int>(l + d); }, delta, file, line);
}
template <class T>
inline T simd_shuffle_up(T x, ushort delta, MB_SIM_SITE) {
    return mbsim_detail::from_lane(mbsim_detail::SyncOp::SimdShuffleUp, x,
                             [](uint32_t l, uint32_t d) { return static_cast<int>(l) - static_cast<int>(d); },
                             delta, file, line);
}
template <class T>
inline T simd_shuffle_xor(T x, ushort mask, MB_SIM_SITE) {
    return mbsim_detail::from_lane(mbsim_detail::SyncOp::SimdShuffleXor, x,
                             [](uint32_t l, uint32_t m) { return static_cast<int>(l ^ m); }, mask, file, line);
}
template <class T>
inline T simd_shuffle_rotate_down(T x, ushort delta, MB_SIM_SITE) {
    return mbsim_detail::from_lane(mbsim_detail::SyncOp::SimdShuffleRotateDown, x,
                             [](uint32_t l, uint32_t d) { return static_cast<int>((l + d) & 31u); }, delta,
                             file, line);
}
template <class T>
inline T simd_shuffle_rotate_up(T x, ushort delta, MB_SIM_SITE) {
    return mbsim_detail::from_lane(mbsim_detail::SyncOp::SimdShuffleRotateUp, x,
                             [](uint32_t l, uint32_t d) { return static_cast<int>((l - d) & 31u); }, delta,
                             file, line);
}
template <class T>
inline T simd_broadcast_first(T x, MB_SIM_SITE) {
    uint32_t lane;
    mbsim_detail::SimdExchange* ex = mbsim_detail::exchange(mbsim_detail::SyncOp::SimdBroadcastFirst,
                                                            x, file, line, lane);
    return mbsim_detail::slot<T>(ex->in[mbsim_detail::first_active(ex)]);
}

// The lanes of a simdgroup as a bit mask.
class simd_vote {
public:
    typedef uint64_t vote_t;
    explicit constexpr simd_vote(vote_t v = 0, vote_t active = ~vote_t(0)) : v_(v), active_(active) {}
    explicit constexpr operator vote_t() const { return v_; }
    constexpr bool all() const { return (v_ & active_) == active_; }
    constexpr bool any() const { return v_ != 0; }

private:
    vote_t v_;
    vote_t active_;
};

inline simd_vote simd_ballot(bool x, MB_SIM_SITE) {
    uint32_t lane;
    mbsim_detail::SimdExchange* ex = mbsim_detail::exchange(mbsim_detail::SyncOp::SimdBallot, x, file, line, lane);
    uint32_t bits = 0;
    for (int i = 0; i < 32; ++i) {
        if (((ex->active >> i) & 1u) && mbsim_detail::slot<bool>(ex->in[i])) bits |= 1u << i;
    }
    return simd_vote(bits, ex->active);
}
inline simd_vote simd_active_threads_mask(MB_SIM_SITE) { return simd_ballot(true, file, line); }
inline bool simd_all(bool x, MB_SIM_SITE) {
    uint32_t lane;
    mbsim_detail::SimdExchange* ex = mbsim_detail::exchange(mbsim_detail::SyncOp::SimdAll, x, file, line, lane);
    for (int i = 0; i < 32; ++i) {
        if (((ex->active >> i) & 1u) && !mbsim_detail::slot<bool>(ex->in[i])) return false;
    }
    return true;
}
inline bool simd_any(bool x, MB_SIM_SITE) {
    uint32_t lane;
    mbsim_detail::SimdExchange* ex = mbsim_detail::exchange(mbsim_detail::SyncOp::SimdAny, x, file, line, lane);
    for (int i = 0; i < 32; ++i) {
        if (((ex->active >> i) & 1u) && mbsim_detail::slot<bool>(ex->in[i])) return true;
    }
    return false;
}
inline bool simd_is_first(MB_SIM_SITE) {
    uint32_t lane;
    mbsim_detail::SimdExchange* ex = mbsim_detail::exchange(mbsim_detail::SyncOp::SimdIsFirst, false, file, line, lane);
    return static_cast<int>(lane) == mbsim_detail::first_active(ex);
}

// ---------------------------------------------------------------- simdgroup matrices

namespace mbsim_detail {

// half -> float for every input (subnormals, inf, nan). On x86-64 without F16C the
// compiler calls a library routine per conversion; this is inlined in tile loads.
inline float half_bits_to_float(uint16_t h) {
    const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    const uint32_t em = static_cast<uint32_t>(h) & 0x7fffu;
    uint32_t bits;
    if (em >= 0x7c00u) {
        bits = sign | 0x7f800000u | (em & 0x3ffu) << 13 | (em & 0x3ffu ? 0x400000u : 0u);  // nan turns quiet
    } else if (em >= 0x0400u) {
        bits = sign | ((em << 13) + 0x38000000u);  // exponent bias 15 -> 127
    } else {
        const float f = static_cast<float>(em) * 0x1p-24f;  // subnormal: exact
        __builtin_memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float r;
    __builtin_memcpy(&r, &bits, 4);
    return r;
}

template <class T>
inline float to_float(T x) {
    return static_cast<float>(x);
}
#if defined(__x86_64__) && !defined(__F16C__)
template <>
inline float to_float<half>(half x) {
    uint16_t b;
    __builtin_memcpy(&b, &x, 2);
    return half_bits_to_float(b);
}
#endif

// The float nearest to x that T can hold.
template <class T>
inline float round_to(float x) {
    if constexpr (std::is_same_v<T, float>) {
        return x;
    } else {
        return to_float(static_cast<T>(x));
    }
}

}  // namespace mbsim_detail

// Elements are held as float whatever T is (every value stays representable in T), so
// that products never convert; only lane 0 of the simdgroup holds meaningful values.
template <class T, unsigned Cols, unsigned Rows>
struct simdgroup_matrix {
    float e[Rows][Cols];  // row-major

    simdgroup_matrix() = default;
    // A diagonal matrix, as MSL's simdgroup_matrix(T).
    explicit simdgroup_matrix(T diagonal) {
        const float d = mbsim_detail::round_to<T>(static_cast<float>(diagonal));
        for (unsigned r = 0; r < Rows; ++r) {
            for (unsigned c = 0; c < Cols; ++c) e[r][c] = r == c ? d : 0.0f;
        }
    }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

namespace mbsim_detail {
// True in lane 0, which performs the simdgroup's matrix operations. Another lane that
// gets further than lane 0 is in non-uniform control flow.
inline bool matrix_leader(const char* file, unsigned line) {
    mb::sim::abi::LaneInfo* li = mb::sim::abi::tls_lane;
    if (li->lane == 0) {
        ++*li->lane0_matrix_ops;
        return true;
    }
    if (++li->matrix_ops > *li->lane0_matrix_ops) {
        mb::sim::abi::fail("simdgroup matrix operation in non-uniform control flow", file, line);
    }
    return false;
}
}  // namespace mbsim_detail

template <class T, unsigned Cols, unsigned Rows>
inline simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(mb::sim::msl::identity_t<T> value) {
    simdgroup_matrix<T, Cols, Rows> m;
    const float v = mbsim_detail::round_to<T>(static_cast<float>(value));
    for (unsigned r = 0; r < Rows; ++r) {
        for (unsigned c = 0; c < Cols; ++c) m.e[r][c] = v;
    }
    return m;
}

// matrix_origin is (column, row) of the tile's first element in the source.
// The source and destination are device or threadgroup memory, as MSL declares these functions.
template <class T, unsigned Cols, unsigned Rows, class P>
inline void simdgroup_load(simdgroup_matrix<T, Cols, Rows>& d, P* src, ulong elements_per_row = Cols,
                           ulong2 matrix_origin = ulong2(0ul), bool transpose_matrix = false, MB_SIM_SITE) {
    static_assert(std::is_same_v<mb::sim::msl::element_t<P>, T>,
                  "simdgroup_load: pointer and matrix element types differ");
    static_assert(mb::sim::msl::device_or_threadgroup<P>,
                  "simdgroup_load: source must be device or threadgroup memory");
    if (!mbsim_detail::matrix_leader(file, line)) return;
    const T* base = mb::sim::msl::generic(src) + matrix_origin.y * elements_per_row + matrix_origin.x;
    for (unsigned r = 0; r < Rows; ++r) {
        for (unsigned c = 0; c < Cols; ++c) {
            d.e[r][c] = mbsim_detail::to_float(transpose_matrix ? base[c * elements_per_row + r]
                                                                : base[r * elements_per_row + c]);
        }
    }
}

template <class T, unsigned Cols, unsigned Rows, class P>
inline void simdgroup_store(const simdgroup_matrix<T, Cols, Rows>& a, P* dst, ulong elements_per_row = Cols,
                            ulong2 matrix_origin = ulong2(0ul), bool transpose_matrix = false, MB_SIM_SITE) {
    static_assert(std::is_same_v<mb::sim::msl::remove_address_space_t<P>, T>,
                  "simdgroup_store: pointer and matrix element types differ (or the pointer is const)");
    static_assert(mb::sim::msl::device_or_threadgroup<P>,
                  "simdgroup_store: destination must be device or threadgroup memory");
    if (!mbsim_detail::matrix_leader(file, line)) return;
    T* base = mb::sim::msl::generic(dst) + matrix_origin.y * elements_per_row + matrix_origin.x;
    for (unsigned r = 0; r < Rows; ++r) {
        for (unsigned c = 0; c < Cols; ++c) {
            if (transpose_matrix) {
                base[c * elements_per_row + r] = static_cast<T>(a.e[r][c]);
            } else {
                base[r * elements_per_row + c] = static_cast<T>(a.e[r][c]);
            }
        }
    }
}

// d = a * b + c, accumulated in float.
template <class TD, class TA, class TB, class TC, unsigned M, unsigned N, unsigned K>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<TD, N, M>& d, const simdgroup_matrix<TA, K, M>& a,
                                          const simdgroup_matrix<TB, N, K>& b,
                                          const simdgroup_matrix<TC, N, M>& c, MB_SIM_SITE) {
    if (!mbsim_detail::matrix_leader(file, line)) return;
    float acc[M][N];
    for (unsigned i = 0; i < M; ++i) {
        for (unsigned j = 0; j < N; ++j) acc[i][j] = c.e[i][j];
        for (unsigned k = 0; k < K; ++k) {
            const float aik = a.e[i][k];
            for (unsigned j = 0; j < N; ++j) acc[i][j] += aik * b.e[k][j];
        }
    }
    for (unsigned i = 0; i < M; ++i) {
        for (unsigned j = 0; j < N; ++j) d.e[i][j] = mbsim_detail::round_to<TD>(acc[i][j]);
    }
}

template <class TD, class TA, class TB, unsigned M, unsigned N, unsigned K>
inline void simdgroup_multiply(simdgroup_matrix<TD, N, M>& d, const simdgroup_matrix<TA, K, M>& a,
                               const simdgroup_matrix<TB, N, K>& b, MB_SIM_SITE) {
    if (!mbsim_detail::matrix_leader(file, line)) return;
    float acc[M][N] = {};
    for (unsigned i = 0; i < M; ++i) {
        for (unsigned k = 0; k < K; ++k) {
            const float aik = a.e[i][k];
            for (unsigned j = 0; j < N; ++j) acc[i][j] += aik * b.e[k][j];
        }
    }
    for (unsigned i = 0; i < M; ++i) {
        for (unsigned j = 0; j < N; ++j) d.e[i][j] = mbsim_detail::round_to<TD>(acc[i][j]);
    }
}

#undef MB_SIM_SITE

// Types are reachable as metal::float4 as well.
#define MB_SIM_ALIAS(name) using MB_SIM_TOP::name##2; using MB_SIM_TOP::name##3; using MB_SIM_TOP::name##4;
MB_SIM_ALIAS(bool)
MB_SIM_ALIAS(char)
MB_SIM_ALIAS(uchar)
MB_SIM_ALIAS(short)
MB_SIM_ALIAS(ushort)
MB_SIM_ALIAS(int)
MB_SIM_ALIAS(uint)
MB_SIM_ALIAS(long)
MB_SIM_ALIAS(ulong)
MB_SIM_ALIAS(float)
MB_SIM_ALIAS(half)
MB_SIM_ALIAS(bfloat)
#undef MB_SIM_ALIAS

}  // namespace metal

// ---------------------------------------------------------------- kernel parameters

// How tools/metalsim/metal_sim_gen.py binds each kernel parameter: one type per attribute.
namespace mb::sim::bind {

using abi::Group;
using abi::Param;
using abi::ParamKind;
using abi::Thread;

template <class A>
inline A position(uint32_t x, uint32_t y, uint32_t z) {
    if constexpr (msl::is_vec<A>::value) {
        static_assert(A::size == 2 || A::size == 3, "position attribute: 2- or 3-vector or scalar");
        if constexpr (A::size == 2) {
            return A(x, y);
        } else {
            return A(x, y, z);
        }
    } else {
        (void)y;
        (void)z;
        return static_cast<A>(x);
    }
}

struct Builtin {
    template <class A>
    static constexpr Param param() {
        return Param{ParamKind::Builtin, 0, false, 0};
    }
};

template <unsigned Slot, bool Optional = false>
struct Buffer {
    static_assert(Slot < abi::kMaxBufferSlots, "[[buffer(N)]]: N > 30");
    template <class A>
    static A get(const Group& g, const Thread&) {
#if defined(MB_MSL_STRICT_ADDRESS_SPACES)
        constexpr msl::space s = msl::space_of<std::remove_pointer_t<std::remove_reference_t<A>>>();
        static_assert(s == msl::space::device || s == msl::space::constant,
                      "[[buffer(N)]] parameter must point to or refer to device or constant memory");
#endif
        if constexpr (std::is_pointer_v<A>) {
            return msl::from_runtime<A>(g.buffers[Slot]);
        } else {
            static_assert(std::is_reference_v<A>, "[[buffer(N)]] parameter must be a pointer or reference");
            return *msl::from_runtime<std::remove_reference_t<A>*>(g.buffers[Slot]);
        }
    }
    template <class A>
    static constexpr Param param() {
        return Param{ParamKind::Buffer, static_cast<uint8_t>(Slot), Optional,
                     std::is_reference_v<A> ? static_cast<uint32_t>(sizeof(std::remove_reference_t<A>)) : 0u};
    }
};

template <unsigned Slot>
struct Threadgroup {
    static_assert(Slot < abi::kMaxThreadgroupSlots, "[[threadgroup(N)]]: N > 30");
    template <class A>
    static A get(const Group& g, const Thread&) {
        static_assert(std::is_pointer_v<A>, "[[threadgroup(N)]] parameter must be a pointer");
#if defined(MB_MSL_STRICT_ADDRESS_SPACES)
        static_assert(msl::space_of<std::remove_pointer_t<A>>() == msl::space::threadgroup,
                      "[[threadgroup(N)]] parameter must point to threadgroup memory");
#endif
        return msl::from_runtime<A>(g.threadgroup[Slot]);
    }
    template <class A>
    static constexpr Param param() {
        return Param{ParamKind::Threadgroup, static_cast<uint8_t>(Slot), false, 0};
    }
};

struct ThreadPositionInGrid : Builtin {
    template <class A>
    static A get(const Group& g, const Thread& t) {
        return position<A>(g.tgpig.x * g.tptg.x + t.tpitg.x, g.tgpig.y * g.tptg.y + t.tpitg.y,
                           g.tgpig.z * g.tptg.z + t.tpitg.z);
    }
};
struct ThreadPositionInThreadgroup : Builtin {
    template <class A>
    static A get(const Group&, const Thread& t) {
        return position<A>(t.tpitg.x, t.tpitg.y, t.tpitg.z);
    }
};
struct ThreadgroupPositionInGrid : Builtin {
    template <class A>
    static A get(const Group& g, const Thread&) {
        return position<A>(g.tgpig.x, g.tgpig.y, g.tgpig.z);
    }
};
struct ThreadsPerThreadgroup : Builtin {
    template <class A>
    static A get(const Group& g, const Thread&) {
        return position<A>(g.tptg.x, g.tptg.y, g.tptg.z);
    }
};
struct ThreadgroupsPerGrid : Builtin {
    template <class A>
    static A get(const Group& g, const Thread&) {
        return position<A>(g.tgpg.x, g.tgpg.y, g.tgpg.z);
    }
};
struct ThreadsPerGrid : Builtin {
    template <class A>
    static A get(const Group& g, const Thread&) {
        return position<A>(g.tgpg.x * g.tptg.x, g.tgpg.y * g.tptg.y, g.tgpg.z * g.tptg.z);
    }
};
struct ThreadIndexInThreadgroup : Builtin {
    template <class A>
    static A get(const Group&, const Thread& t) {
        return static_cast<A>(t.tiitg);
    }
};
struct ThreadIndexInSimdgroup : Builtin {
    template <class A>
    static A get(const Group&, const Thread& t) {
        return static_cast<A>(t.tiitg % abi::kSimdWidth);
    }
};
struct SimdgroupIndexInThreadgroup : Builtin {
    template <class A>
    static A get(const Group&, const Thread& t) {
        return static_cast<A>(t.tiitg / abi::kSimdWidth);
    }
};
struct ThreadsPerSimdgroup : Builtin {
    template <class A>
    static A get(const Group&, const Thread&) {
        return static_cast<A>(abi::kSimdWidth);
    }
};
struct SimdgroupsPerThreadgroup : Builtin {
    template <class A>
    static A get(const Group& g, const Thread&) {
        return static_cast<A>((g.tptg.x * g.tptg.y * g.tptg.z + abi::kSimdWidth - 1) / abi::kSimdWidth);
    }
};

template <class Sig, Sig F, class... Ps>
struct EntryImpl;

template <class... As, void (*F)(As...), class... Ps>
struct EntryImpl<void (*)(As...), F, Ps...> {
    static_assert(sizeof...(As) == sizeof...(Ps), "kernel parameter count differs from its bindings");

    static void run_thread(const Group& g, const Thread& t) { F(Ps::template get<As>(g, t)...); }

    static void run_group(const Group& g) {
        Thread t;
        t.tiitg = 0;
        for (uint32_t z = 0; z < g.tptg.z; ++z) {
            for (uint32_t y = 0; y < g.tptg.y; ++y) {
                for (uint32_t x = 0; x < g.tptg.x; ++x) {
                    t.tpitg = abi::U3{x, y, z};
                    F(Ps::template get<As>(g, t)...);
                    ++t.tiitg;
                }
            }
        }
    }

    static constexpr Param params[sizeof...(Ps)] = {Ps::template param<As>()...};
};

template <auto F, class... Ps>
using Entry = EntryImpl<decltype(F), F, Ps...>;

template <auto F, class... Ps>
constexpr abi::KernelInfo make_kernel(const char* name, const char* source, bool may_sync, uint32_t max_threads,
                                 const abi::FcDecl* constants, uint32_t n_constants, const uint16_t* required,
                                 uint32_t n_required) {
    using E = Entry<F, Ps...>;
    return abi::KernelInfo{name,      source,      &E::run_thread, may_sync ? nullptr : &E::run_group,
                           E::params, sizeof...(Ps), max_threads, constants,
                           n_constants, required,  n_required};
}

template <class T>
constexpr abi::FcType fc_type() {
    if constexpr (std::is_same_v<T, bool>) {
        return abi::FcType::Bool;
    } else if constexpr (std::is_same_v<T, short>) {
        return abi::FcType::Int16;
    } else if constexpr (std::is_same_v<T, ushort>) {
        return abi::FcType::UInt16;
    } else if constexpr (std::is_same_v<T, int>) {
        return abi::FcType::Int32;
    } else if constexpr (std::is_same_v<T, uint>) {
        return abi::FcType::UInt32;
    } else if constexpr (std::is_same_v<T, float>) {
        return abi::FcType::Float;
    } else {
        static_assert(std::is_same_v<T, half>, "function constant type: bool, short, ushort, int, uint, float, half");
        return abi::FcType::Half;
    }
}

template <class T>
abi::FcDecl function_constant(uint32_t index, const char* name, T* value, bool* defined) {
    return abi::FcDecl{index, fc_type<T>(), name, value, defined};
}

}  // namespace mb::sim::bind

// ---------------------------------------------------------------- MSL keywords

// Last, so that none of the headers above sees them. tools/metalsim/metal_sim_gen.py removes
// [[threadgroup(N)]] before `threadgroup` disappears and #undefs these after the source.
#define kernel
#define device MB_SIM_AS_DEVICE
#define thread
#define threadgroup MB_SIM_AS_THREADGROUP
#define constant const MB_SIM_AS_CONSTANT
#define is_function_constant_defined(name) (name##_mbsim_defined)
