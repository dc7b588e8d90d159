// Graph construction: each function validates its inputs, creates the result tensor in the inputs'
// context and records op, sources and params. Nothing is computed here. Shape and type errors raise
// InvalidArgumentError naming the op and the shapes involved (numpy order), at build time.
//
// Conventions (ggml's): ne[0] innermost. "rows" are ne[0]-long runs. Broadcasting of b over a is by
// modulo: a.ne[i] % b.ne[i] == 0 on every dimension.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace mb::ops {

// Element-wise a (op) b with b broadcast over a; result: a's shape and type.
Tensor* add(Tensor* a, Tensor* b);
// ADD1 (ggml_add1): a + b with b a single element (f32 or f16), a f32.
Tensor* add1(Tensor* a, Tensor* b);
Tensor* sub(Tensor* a, Tensor* b);
Tensor* mul(Tensor* a, Tensor* b);
Tensor* div(Tensor* a, Tensor* b);

// x*s + b per element.
Tensor* scale(Tensor* a, float s, float b = 0.0f);
Tensor* clamp(Tensor* a, float min, float max);
// FILL (ggml_fill): like a (f32 or f16), every element c. params f[0] = c.
Tensor* fill(Tensor* a, float c);
// The MAP rows of op_table.h (one f32 input, no parameters: SQR, GELU, ...); result like a.
Tensor* unary(Op op, Tensor* a);

// x > 0 ? x : negative_slope * x; params f[0] = negative_slope.
Tensor* leaky_relu(Tensor* a, float negative_slope);
// XIELU (ggml_xielu): stores beta + softplus(alpha_n), softplus(alpha_p), beta, eps as params f[0..3].
Tensor* xielu(Tensor* a, float alpha_n, float alpha_p, float beta, float eps);

// Gated linear units (ggml_glu / ggml_glu_split): op one of the Glu rows (REGLU ... SWIGLU_OAI).
// b null: a's ne[0] (even) splits in halves x | g (swapped: g | x) -> [ne0/2, ne1, ne2, ne3]; else
// x = a, g = b (same shape). act(x) * g; SWIGLU_OAI: min(x, limit) * sigmoid(alpha * min(x, limit)) *
// (clamp(g, -limit, limit) + 1). f32 only. params i[0] = swapped, f[1] = alpha, f[2] = limit.
Tensor* glu(Op op, Tensor* a, Tensor* b, bool swapped, float alpha = 0.0f, float limit = 0.0f);

// Per row (ne[0]); result like a. eps in params f[0]. L2_NORM: x / max(||x||_2, eps).
Tensor* norm(Tensor* a, float eps);
Tensor* rms_norm(Tensor* a, float eps);
Tensor* l2_norm(Tensor* a, float eps);

// softmax(a*scale + slope*mask) per row. mask: f32 or f16, mask.ne[0] == a.ne[0], mask.ne[1] >= a.ne[1],
// broadcast over dims 2,3 by modulo. max_bias > 0 enables ALiBi slopes per head (dim 2). sinks: f32
// [a.ne[2]] logits added to every row's denominator as exp(sink - max). Result like a (f32).
Tensor* soft_max_ext(Tensor* a, Tensor* mask, float scale, float max_bias, Tensor* sinks = nullptr);

// Row reductions: SUM_ROWS and MEAN give ne[0] = 1; ARGMAX gives i32 [a.ne[1]] (a 2-D at most).
Tensor* sum_rows(Tensor* a);
Tensor* mean(Tensor* a);
Tensor* argmax(Tensor* a);

// q: [D, n_q, H, B] f32; k: [D, n_kv, H_kv, B]; v: [Dv, n_kv, H_kv, B] (k, v f16/f32/quantized, same
// type); H % H_kv == 0. mask: f16 [n_kv, n_q_padded >= n_q, 1 or H, 1 or B] or null, added to the
// scores. Scores = q.k * scale (then softcap: softcap*tanh(s/softcap) when softcap > 0, then
// + slope*mask). Result: f32 [Dv, H, n_q, B] (ggml's permuted layout), contiguous.
Tensor* flash_attn_ext(Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale, float max_bias = 0.0f,
                       float softcap = 0.0f);

// out[i, j] = sum_k a[j, k] * b[i, k] per matrix, broadcast on dims 2,3 (b.ne[2] % a.ne[2] == 0,
// b.ne[3] % a.ne[3] == 0). a.ne[0] == b.ne[0]. Result f32 [a.ne[1], b.ne[1], b.ne[2], b.ne[3]].
// int8_activations (quantized a only, else InvalidArgument): on the CPU, the activations are quantized
// to 8-bit blocks for every token count, so the many-token (GEMM) path also multiplies bytes against
// the weight codes (ggml's CPU arithmetic); without it that path dequantizes the weights to f32 and
// keeps the activations exact. Few tokens quantize the activations either way. Recorded in op
// param kMulMatInt8Param; other devices compute as they always do.
constexpr int kMulMatInt8Param = 1;
Tensor* mul_mat(Tensor* a, Tensor* b, bool int8_activations = false);

// DUP: contiguous copy, same type. CONT: contiguous copy of a view, same type (ne kept).
// CPY: a's values converted into b's type and written into b (same element count); result views b.
Tensor* dup(Tensor* a);
Tensor* cont(Tensor* a);
Tensor* cpy(Tensor* a, Tensor* b);

// GET_ROWS: a [ne0, n_rows, ne2, ne3] (any type), idx i32 [n, ne2, ne3] -> f32 [ne0, n, ne2, ne3]:
// out[:, i, j, k] = a[:, idx[i, j, k], j, k]. Out-of-range indices raise at compute time.
Tensor* get_rows(Tensor* a, Tensor* idx);
// SET_ROWS: rows of src (f32 [ne0, n, ne2, ne3]) written into dst rows idx[i, j, k] (i32), converted
// to dst's type. Result views dst.
Tensor* set_rows(Tensor* dst, Tensor* src, Tensor* idx);

// 1-D (is_2d false): kernel [K, IC, OC] (only its shape is used), data [L, IC, N] ->
// dst_type [IC*K, OL, N] with out[(n*OL + ol)*IC*K + ic*K + k] = data[n][ic][ol*s0 + k*d0 - p0] or 0.
// 2-D: kernel [KW, KH, IC, OC], data [W, H, IC, N] -> [IC*KH*KW, OW, OH, N].
// params: i[0..6] = s0, s1, p0, p1, d0, d1, is_2d.
Tensor* im2col(Tensor* kernel, Tensor* data, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2d,
               Type dst_type);
// conv_1d = im2col (in the kernel's type) then mul_mat; kernel [K, IC, OC], data [L, IC, N] -> f32 [OL, OC, N].
Tensor* conv_1d(Tensor* kernel, Tensor* data, int s0, int p0, int d0);

// CONCAT along dim (0..3): all other dims equal. REPEAT: a tiled to b's shape (b.ne[i] % a.ne[i] == 0).
// PAD: zeros appended at the end of each dim.
Tensor* concat(Tensor* a, Tensor* b, int dim);
Tensor* repeat(Tensor* a, Tensor* b);
Tensor* pad(Tensor* a, int p0, int p1, int p2, int p3);
// PAD_REFLECT_1D: ne0 padded by p0 elements before and p1 after, mirrored about the first and last
// element (ggml_pad_reflect_1d; [a b c d], 2, 2 -> [c b a b c d c b]); p0, p1 in [0, ne0 - 1].
Tensor* pad_reflect_1d(Tensor* a, int p0, int p1);

// ROPE: a [D, H, T, B] with pos i32 [T]: rotates the first n_dims values of each row. mode 0: adjacent
// pairs (x_2i, x_2i+1); mode 2 (NEOX): pairs (x_i, x_{i + n_dims/2}). theta_i = pos * freq_scale *
// freq_base^(-2i/n_dims); YaRN (ext_factor, attn_factor, beta_fast, beta_slow) as ggml.
// params: i[0] = n_dims, i[1] = mode, i[2] = n_ctx_orig, f[3] = freq_base, f[4] = freq_scale,
// f[5] = ext_factor, f[6] = attn_factor, f[7] = beta_fast, f[8] = beta_slow.
Tensor* rope(Tensor* a, Tensor* pos, int n_dims, int mode, int n_ctx_orig = 0, float freq_base = 10000.0f,
             float freq_scale = 1.0f, float ext_factor = 0.0f, float attn_factor = 1.0f, float beta_fast = 32.0f,
             float beta_slow = 1.0f);

// ARANGE: f32 [ceil((stop - start) / step)] holding start + i*step (ggml_arange). step != 0 and
// the count >= 0.
Tensor* arange(Context* ctx, float start, float stop, float step);
// ARGSORT: i32 like a (f32): each row's indices in ascending (or descending) order of its values;
// ties keep index order, NaNs last.
Tensor* argsort(Tensor* a, bool descending);
// TOP_K (ggml_top_k): i32 [k, ne1, ne2, ne3] from f32 a: each row's indices of its k largest values,
// largest first, ties in index order, NaNs last (ggml leaves the order open; this one is argsort's
// descending order cut at k). 0 <= k <= ne0.
Tensor* top_k(Tensor* a, int k);
// CUMSUM (ggml_cumsum): f32 like a (f32, any strides): the running sum along each row (ne0).
Tensor* cumsum(Tensor* a);
// SUM (ggml_sum): f32 [1] from f32 a (any strides): the sum of every element.
Tensor* sum(Tensor* a);

// MUL_MAT_ID (ggml_mul_mat_id): as [K, N, E] experts (any mul_mat weight type), b f32 [K, n_b, T],
// ids i32 [n_used, T] with n_used % n_b == 0 -> f32 [N, n_used, T]: dst[:, e, t] = as[ids[e, t]] @
// b[:, e % n_b, t]. Ids outside [0, E) raise at compute time.
Tensor* mul_mat_id(Tensor* as, Tensor* b, Tensor* ids);
// ADD_ID: a f32 [ne0, ne1, ne2], b f32 [ne0, n], ids i32 [ne1, ne2]: a + b[:, ids[i1, i2]].
Tensor* add_id(Tensor* a, Tensor* b, Tensor* ids);
// GROUP_NORM: a f32 [W, H, C, N]; channels in n_groups groups of ceil(C / n_groups), each group's
// values (all of W, H) normalised to mean 0, variance 1 (+ eps). params i[0] n_groups, f[1] eps.
Tensor* group_norm(Tensor* a, int n_groups, float eps);
// TIMESTEP_EMBEDDING: timesteps f32 [N] -> f32 [dim, N]: cos(t f_j) for j < dim/2, then sin(t f_j),
// f_j = max_period^(-j / (dim/2)); an odd dim ends in a 0. params i[0] dim, i[1] max_period.
Tensor* timestep_embedding(Tensor* timesteps, int dim, int max_period);

// CONV_TRANSPOSE_1D: kernel [K, OC, IC] f32/f16, data f32 [L, IC, N] -> f32 [OL, OC, N], OL =
// (L - 1)*s0 - 2*p0 + d0*(K - 1) + 1: out[n][oc][l*s0 + k*d0 - p0] += data[n][ic][l] * kernel[ic][oc][k]
// (ggml_conv_transpose_1d, which takes p0 = 0 and d0 = 1 only).
Tensor* conv_transpose_1d(Tensor* kernel, Tensor* data, int s0, int p0, int d0);
// POOL_2D: a f32 [W, H, C, N] -> [(W + 2p0 - k0)/s0 + 1, (H + 2p1 - k1)/s1 + 1, C, N]; avg divides by
// k0*k1 (padding counts as zeros), max takes the window's cells inside a.
Tensor* pool_2d(Tensor* a, bool avg, int k0, int k1, int s0, int s1, int p0, int p1);
// UPSCALE (ggml_interpolate): a f32 resampled to ne; mode MB_SCALE_NEAREST / BILINEAR / BICUBIC, optionally
// | MB_SCALE_ALIGN_CORNERS (shaders/kargs.h). upscale: [ne0*sf, ne1*sf, ne2, ne3].
Tensor* interpolate(Tensor* a, const int64_t ne[kMaxDims], int mode);
Tensor* upscale(Tensor* a, int scale_factor, int mode = 0);
// SSM_SCAN (ggml_ssm_scan, Mamba 1 and 2): s [d_state, head_dim, n_head, n_rs], x [head_dim, n_head, n_t,
// n_s], dt [n_head, n_t, n_s], A [d_state or 1, n_head], B and C [d_state, n_group, n_t, n_s], ids i32 [n_s]
// -> f32 [nelements(x) + d_state*head_dim*n_head*n_s]: y in x's shape, then the final state of each sequence.
Tensor* ssm_scan(Tensor* s, Tensor* x, Tensor* dt, Tensor* A, Tensor* B, Tensor* C, Tensor* ids);
// RWKV_WKV6: k, v, r, td [S, H, T], tf [S, H], state [S*S*H, n_seqs] -> f32 [S*H, T + S*n_seqs].
Tensor* rwkv_wkv6(Tensor* k, Tensor* v, Tensor* r, Tensor* tf, Tensor* td, Tensor* state);
// RWKV_WKV7: r, w, k, v, a, b [S, H, T], state [S*S*H, n_seqs] -> f32 [S*H, T + S*n_seqs].
Tensor* rwkv_wkv7(Tensor* r, Tensor* w, Tensor* k, Tensor* v, Tensor* a, Tensor* b, Tensor* state);
// SSM_CONV: sx f32 [d_conv - 1 + n_t, d_inner, n_s], c f32 [d_conv, d_inner] -> [d_inner, n_t, n_s].
Tensor* ssm_conv(Tensor* sx, Tensor* c);

// ACC (ggml_acc): a (contiguous f32) with b (f32) added into the view of a's copy at byte offset
// `offset` with byte strides (4, nb1, nb2, nb3); the view must lie inside a and its rows, planes and
// volumes must not overlap. params i[0..3] = nb1, nb2, nb3, offset (the strides of size-1 dims
// normalised).
Tensor* acc(Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
// SET (ggml_set): as ACC, but b's values replace the view's instead of being added.
Tensor* set(Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset);

// ROLL (ggml_roll): like a (any non-quantized type): a shifted by shift[d] along ggml dim d with
// wrap-around (np.roll); |shift[d]| < ne[d]. params i[0..3] = the shifts.
Tensor* roll(Tensor* a, const int shift[kMaxDims]);
// OUT_PROD (ggml_out_prod): a f32 [M, K, A2, A3], b f32 [N, K, B2, B3] (A2 | B2, A3 | B3) -> f32
// [M, N, B2, B3]: dst[i3][i2][n][m] = sum_k a[i3 / (B3/A3)][i2 / (B2/A2)][k][m] * b[i3][i2][k][n].
Tensor* out_prod(Tensor* a, Tensor* b);
// POOL_1D (ggml_pool_1d): f32 [W, ...] -> f32 [(W + 2 p0 - k0) / s0 + 1, ...]; max, or the mean over
// the window's cells inside the row. k0, s0 > 0, 0 <= p0 < k0. params i[0] = avg, i[1..3] = k0, s0, p0.
Tensor* pool_1d(Tensor* a, bool avg, int k0, int s0, int p0);
// CONV_2D (ggml_conv_2d_direct): kernel [KW, KH, IC, OC] f32 or f16, data f32 [W, H, IC, N] ->
// f32 [OW, OH, OC, N]; CONV_2D_DW (ggml_conv_2d_dw_direct, depthwise): kernel [KW, KH, 1, C], data
// [W, H, C, N] -> [OW, OH, C, N]. params i[0..5] = s0, s1, p0, p1, d0, d1 (s, d > 0, p >= 0).
Tensor* conv_2d_direct(Tensor* kernel, Tensor* data, int s0, int s1, int p0, int p1, int d0, int d1);
Tensor* conv_2d_dw_direct(Tensor* kernel, Tensor* data, int s0, int s1, int p0, int p1, int d0, int d1);
// CONV_TRANSPOSE_2D (ggml_conv_transpose_2d_p0): kernel [KW, KH, OC, IC] f32 or f16, data f32
// [W, H, IC, N] (W, H > 0) -> f32 [(W - 1) s + KW, (H - 1) s + KH, OC, N]. params i[0] = s > 0.
Tensor* conv_transpose_2d_p0(Tensor* kernel, Tensor* data, int stride);
// TRI (ggml_tri): like a (f32 or f16, square in dims 0 and 1): the triangle of `type`
// (ggml_tri_type 0..3: upper with the diagonal, upper, lower with the diagonal, lower; upper means
// i0 >= i1), zeros elsewhere. params i[0] = type.
Tensor* tri(Tensor* a, int type);
// DIAG (ggml_diag): a [n, 1, ne2, ne3] (f32 or f16) -> [n, n, ne2, ne3] with a's row on the diagonal.
Tensor* diag(Tensor* a);
// DIAG_MASK_INF / DIAG_MASK_ZERO (ggml_diag_mask_inf/_zero): like a (f32 or f16), elements with
// i0 > n_past + i1 replaced by -inf / 0; n_past >= 0. params i[0] = n_past.
Tensor* diag_mask_inf(Tensor* a, int n_past);
Tensor* diag_mask_zero(Tensor* a, int n_past);

// Views: no copy; the result aliases a's memory.
Tensor* reshape(Tensor* a, const int64_t ne[kMaxDims], int n_dims);  // a contiguous, same element count
Tensor* view(Tensor* a, const int64_t ne[kMaxDims], const size_t nb[kMaxDims], int n_dims, size_t offset);
Tensor* permute(Tensor* a, int ax0, int ax1, int ax2, int ax3);  // ggml: source dim i goes to position ax_i
Tensor* transpose(Tensor* a);                                     // swaps dims 0 and 1

}  // namespace mb::ops
