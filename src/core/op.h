// The operations a graph node can hold, with ggml's names and semantics. Unary activations are ops of
// their own (ggml nests them under GGML_OP_UNARY); the rest follow ggml one for one.
#pragma once

#include <cstdint>

namespace mb {

enum class Op : int32_t {
    NONE,  // a leaf: data set by the user
    // element-wise binary, src1 broadcast over src0 by modulo on every dimension
    ADD,
    SUB,
    MUL,
    DIV,
    // element-wise with parameters
    SCALE,  // params f[0] = s, f[1] = b: x*s + b
    CLAMP,  // params f[0] = min, f[1] = max
    // element-wise unary
    SQR,
    SQRT,
    LOG,
    SIN,
    COS,
    GELU,        // tanh approximation
    GELU_ERF,    // exact, with erf
    GELU_QUICK,  // x * sigmoid(1.702 x)
    SILU,
    RELU,
    TANH,
    SIGMOID,
    NEG,
    ABS,
    EXP,
    // rows
    NORM,      // params f[0] = eps: (x - mean) / sqrt(var + eps) over ne0
    RMS_NORM,  // params f[0] = eps: x / sqrt(mean(x^2) + eps) over ne0
    SOFT_MAX,  // src1 = mask or null, src2 = sinks or null; params f[0] = scale, f[1] = max_bias
    SUM_ROWS,  // -> ne0 = 1
    MEAN,      // -> ne0 = 1
    ARGMAX,    // f32 rows -> i32, one per row (ne = [ne1])
    // attention and matrices
    FLASH_ATTN_EXT,  // q, k, v, mask or null; params f[0] = scale, f[1] = max_bias, f[2] = softcap
    MUL_MAT,         // out[i,j] = sum_k a[j,k] * b[i,k], broadcast on dims 2,3 (b.ne2 % a.ne2 == 0)
    // data movement
    DUP,       // copy into a new contiguous tensor of the same type
    CPY,       // src0 converted into src1 (src1 may be any supported type); result views src1
    CONT,      // contiguous copy of a (possibly permuted) view
    GET_ROWS,  // src0 rows selected by i32 src1 -> f32
    SET_ROWS,  // src0 (f32 rows) written into the rows of dst named by i32 src1; result views dst
    IM2COL,    // params: s0, s1, p0, p1, d0, d1, is_2d; src0 = kernel (shape only), src1 = data
    CONCAT,    // params i[0] = dim
    REPEAT,    // src0 tiled to the shape of dst
    PAD,       // params i[0..3] = zeros appended at the end of each dimension
    PAD_REFLECT_1D,  // params i[0] = p0, i[1] = p1: ne0 reflected p0 before, p1 after (edge not repeated)
    ROPE,      // src1 = i32 positions; params: n_dims, mode, n_ctx_orig, then f freq_base, freq_scale,
               // ext_factor, attn_factor, beta_fast, beta_slow
    // views: no computation, the result aliases src0's memory
    RESHAPE,
    VIEW,
    PERMUTE,
    TRANSPOSE,
    COUNT
};

const char* op_name(Op op);  // "ADD", "MUL_MAT", ...

// The ops one kernel family serves, on every device (src/cpu/kernels/<family>.cpp,
// src/metal/ops/<family>.cpp, shaders/<family>.metal). Views have none.
enum class OpFamily { None, Binary, Unary, Norm, SoftMax, Reduce, FlashAttnExt, MulMat, Copy, Rows, Im2col, Layout, Rope };
OpFamily op_family(Op op);

// Ops that only describe memory (no kernel runs for them).
inline bool op_is_view(Op op) {
    return op == Op::NONE || op == Op::RESHAPE || op == Op::VIEW || op == Op::PERMUTE || op == Op::TRANSPOSE;
}

}  // namespace mb
