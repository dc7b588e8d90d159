// The table of ops: each op is named here once. Everything that lists ops is generated from it: the
// Op enum and op_name (src/core/op.h), op_family, the view and element-wise sets, the unary ids the
// shaders switch on (MB_UNARY_<NAME>, shaders/kargs.h), the one-argument Python bindings
// (src/bindings/ops.cpp) and mb._core.op_table() that the table test checks every consumer against.
//
//   MB_OP(NAME, FAMILY, KIND, PY)   FAMILY: an OpFamily (the kernel files of every device)
//   MB_UNARY(NAME, KIND, PY)        a row of family Unary: also gets a shader id, in table order
//   MB_GLU(NAME, PY)                a row of family Glu (kind OP): also gets a shader id
//   KIND: VIEW (no kernel runs), MAP (one f32 input, element-wise, no parameters: bound generically
//         as mb.ops.PY(a)), EW (element-wise with parameters, bound by hand), OP (bound by hand)
//   PY:   the name in mb.ops ("" for NONE)
//
// A consumer defines MB_OP (and MB_UNARY / MB_GLU where those rows need their own expansion) and
// includes this file (no include guard: it is included once per expansion); both are undefined at its end.
// Lives in shaders/ because the shader library includes
// it (through kargs.h) and the embedded library may only include files of this folder.
#ifndef MB_UNARY
#define MB_UNARY(NAME, KIND, PY) MB_OP(NAME, Unary, KIND, PY)
#endif
#ifndef MB_GLU
#define MB_GLU(NAME, PY) MB_OP(NAME, Glu, OP, PY)
#endif

MB_OP(NONE, None, VIEW, "")
// element-wise binary, src1 broadcast over src0 by modulo on every dimension
MB_OP(ADD, Binary, OP, "add")
MB_OP(SUB, Binary, OP, "sub")
MB_OP(MUL, Binary, OP, "mul")
MB_OP(DIV, Binary, OP, "div")
// element-wise unary (ggml nests the activations under GGML_OP_UNARY; here each is an op)
MB_UNARY(SCALE, EW, "scale")  // params f[0] = s, f[1] = b: x*s + b
MB_UNARY(CLAMP, EW, "clamp")  // params f[0] = min, f[1] = max
MB_UNARY(SQR, MAP, "sqr")
MB_UNARY(SQRT, MAP, "sqrt")
MB_UNARY(LOG, MAP, "log")
MB_UNARY(SIN, MAP, "sin")
MB_UNARY(COS, MAP, "cos")
MB_UNARY(GELU, MAP, "gelu")              // tanh approximation
MB_UNARY(GELU_ERF, MAP, "gelu_erf")      // exact, with erf
MB_UNARY(GELU_QUICK, MAP, "gelu_quick")  // x * sigmoid(1.702 x)
MB_UNARY(SILU, MAP, "silu")
MB_UNARY(RELU, MAP, "relu")
MB_UNARY(TANH, MAP, "tanh")
MB_UNARY(SIGMOID, MAP, "sigmoid")
MB_UNARY(NEG, MAP, "neg")
MB_UNARY(ABS, MAP, "abs")
MB_UNARY(EXP, MAP, "exp")
MB_UNARY(EXPM1, MAP, "expm1")            // exp(x) - 1
MB_UNARY(SGN, MAP, "sgn")                  // -1, 0 or 1
MB_UNARY(STEP, MAP, "step")                // 1 where x > 0, else 0
MB_UNARY(ELU, MAP, "elu")                  // x > 0 ? x : exp(x) - 1
MB_UNARY(HARDSWISH, MAP, "hardswish")      // x * min(1, max(0, (x + 3) / 6))
MB_UNARY(HARDSIGMOID, MAP, "hardsigmoid")  // min(1, max(0, (x + 3) / 6))
MB_UNARY(SOFTPLUS, MAP, "softplus")        // x > 20 ? x : log(1 + exp(x))
MB_UNARY(FLOOR, MAP, "floor")
MB_UNARY(CEIL, MAP, "ceil")
MB_UNARY(ROUND, MAP, "round")  // halves away from zero
MB_UNARY(TRUNC, MAP, "trunc")
MB_UNARY(LEAKY_RELU, EW, "leaky_relu")  // params f[0] = negative_slope: x > 0 ? x : slope * x
// params f[0] = alpha_n (beta + softplus(alpha_n) as given), f[1] = alpha_p (softplus), f[2] beta, f[3] eps:
// x > 0 ? alpha_p x^2 + beta x : (expm1(min(x, eps)) - x) alpha_n + beta x
MB_UNARY(XIELU, EW, "xielu")
// gated linear units: act(x) * g over rows; x, g the two halves of src0's ne0 (swapped: params
// i[0] = 1 puts g first) or src0 and src1 (the _split forms)
MB_GLU(REGLU, "reglu")
MB_GLU(GEGLU, "geglu")              // gelu, tanh approximation
MB_GLU(SWIGLU, "swiglu")            // silu
MB_GLU(GEGLU_ERF, "geglu_erf")
MB_GLU(GEGLU_QUICK, "geglu_quick")
MB_GLU(SWIGLU_OAI, "swiglu_oai")    // f[1] alpha, f[2] limit: min(x, l) sigmoid(alpha min(x, l)) (clamp(g, -l, l) + 1)
// rows
MB_OP(NORM, Norm, OP, "norm")          // params f[0] = eps: (x - mean) / sqrt(var + eps) over ne0
MB_OP(RMS_NORM, Norm, OP, "rms_norm")  // params f[0] = eps: x / sqrt(mean(x^2) + eps) over ne0
MB_OP(L2_NORM, Norm, OP, "l2_norm")    // params f[0] = eps: x / max(||x||_2, eps) over ne0
MB_OP(GROUP_NORM, Norm, OP, "group_norm")  // params i[0] = n_groups, f[1] = eps: over groups of channels (ne2)
MB_OP(SOFT_MAX, SoftMax, OP, "soft_max_ext")  // src1 mask or null, src2 sinks or null; f[0] scale, f[1] max_bias
MB_OP(SUM_ROWS, Reduce, OP, "sum_rows")  // -> ne0 = 1
MB_OP(MEAN, Reduce, OP, "mean")          // -> ne0 = 1
MB_OP(ARGMAX, Reduce, OP, "argmax")      // f32 rows -> i32, one per row (ne = [ne1])
// attention and matrices
MB_OP(FLASH_ATTN_EXT, FlashAttnExt, OP, "flash_attn_ext")  // q, k, v, mask; f[0] scale, f[1] max_bias, f[2] softcap
MB_OP(MUL_MAT, MulMat, OP, "mul_mat")  // out[i,j] = sum_k a[j,k] * b[i,k], broadcast on dims 2,3
MB_OP(MUL_MAT_ID, MulMatId, OP, "mul_mat_id")  // experts as, b, i32 ids: dst[:, e, t] = as[ids[e, t]] @ b[:, e % ne11, t]
MB_OP(ADD_ID, AddId, OP, "add_id")             // a + b[:, ids[i1, i2]]
MB_OP(ACC, Acc, OP, "acc")  // a with b added into its view at i[3] bytes, strides i[0..2] = nb1, nb2, nb3
// data movement
MB_OP(DUP, Copy, OP, "dup")            // copy into a new contiguous tensor of the same type
MB_OP(CPY, Copy, OP, "cpy")            // src0 converted into src1; the result views src1
MB_OP(CONT, Copy, OP, "cont")          // contiguous copy of a (possibly permuted) view
MB_OP(GET_ROWS, Rows, OP, "get_rows")  // src0 rows selected by i32 src1 -> f32
MB_OP(SET_ROWS, Rows, OP, "set_rows")  // f32 src0 rows written into the rows of dst named by i32 src1
MB_OP(IM2COL, Im2col, OP, "im2col")    // params s0, s1, p0, p1, d0, d1, is_2d; src0 kernel (shape), src1 data
MB_OP(CONCAT, Layout, OP, "concat")    // params i[0] = dim
MB_OP(REPEAT, Layout, OP, "repeat")    // src0 tiled to the shape of dst
MB_OP(PAD, Layout, OP, "pad")          // params i[0..3] = zeros appended at the end of each dimension
MB_OP(PAD_REFLECT_1D, Layout, OP, "pad_reflect_1d")  // i[0] = p0, i[1] = p1: ne0 mirrored p0 before, p1 after
MB_OP(ROPE, Rope, OP, "rope")          // src1 i32 positions; see ops.h
// convolution, pooling, resampling, state-space models
MB_OP(CONV_TRANSPOSE_1D, ConvTranspose1d, OP, "conv_transpose_1d")  // src0 kernel, src1 data; i[0..2] s0, p0, d0
MB_OP(POOL_2D, Pool2d, OP, "pool_2d")     // i[0] 0 max / 1 avg, i[1..6] k0, k1, s0, s1, p0, p1
// UPSCALE: to dst's shape; i[0] = mode (0 nearest, 1 bilinear, 2 bicubic) | 256 align corners | 512 antialias
MB_OP(UPSCALE, Upscale, OP, "upscale")
MB_OP(SSM_CONV, SsmConv, OP, "ssm_conv")  // src0 sx, src1 c
MB_OP(SSM_SCAN, SsmScan, OP, "ssm_scan")  // s, x, dt, A, B, C, ids -> y then the final states, one f32 vector
MB_OP(RWKV_WKV6, RwkvWkv, OP, "rwkv_wkv6")  // k, v, r, tf, td, state -> [S*H, T + S*n_seqs]: y rows, then states
MB_OP(RWKV_WKV7, RwkvWkv, OP, "rwkv_wkv7")  // r, w, k, v, a, b, state -> [S*H, T + S*n_seqs]
// generators and sorting
MB_OP(ARANGE, Arange, OP, "arange")     // no sources; params f[0] start, f[1] stop, f[2] step
MB_OP(ARGSORT, Argsort, OP, "argsort")  // f32 rows -> i32 indices; params i[0] = 1: descending
MB_OP(TIMESTEP_EMBEDDING, TimestepEmbedding, OP, "timestep_embedding")  // params i[0] = dim, i[1] = max_period
// views: no computation, the result aliases src0's memory
MB_OP(RESHAPE, None, VIEW, "reshape")
MB_OP(VIEW, None, VIEW, "view")
MB_OP(PERMUTE, None, VIEW, "permute")
MB_OP(TRANSPOSE, None, VIEW, "transpose")

#undef MB_GLU
#undef MB_UNARY
#undef MB_OP
