#include "core/ops.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "core/context.h"
#include "core/errors.h"

namespace mb::ops {

namespace {

std::string desc(const Tensor* t) { return t ? t->describe() : std::string("None"); }

[[noreturn]] void reject(const char* who, const std::string& what) {
    throw InvalidArgumentError(std::string("[ops.") + who + "] " + what);
}

// Checks a build-time condition; the message (shapes formatted into a string) is built only when it
// fails, so a valid graph costs no string formatting.
#define MB_REQUIRE(ok, who, what) \
    do {                          \
        if (!(ok)) {              \
            reject(who, what);    \
        }                         \
    } while (0)

void need(const Tensor* t, const char* who, const char* arg) {
    MB_REQUIRE(t != nullptr, who, std::string(arg) + " is None");
}

void same_context(const char* who, std::initializer_list<const Tensor*> ts) {
    const Context* ctx = nullptr;
    for (const Tensor* t : ts) {
        if (!t) continue;
        if (!ctx) ctx = t->ctx;
        MB_REQUIRE(t->ctx == ctx, who, "all tensors must belong to one Context (" + desc(t) + " does not)");
    }
}

bool can_repeat(const Tensor* small, const Tensor* big) {
    for (int i = 0; i < kMaxDims; ++i) {
        if (small->ne[i] == 0) {
            if (big->ne[i] != 0) return false;
        } else if (big->ne[i] % small->ne[i] != 0) {
            return false;
        }
    }
    return true;
}

Tensor* result(Tensor* like, Type type, const int64_t ne[kMaxDims], int n_dims, Op op,
               std::initializer_list<Tensor*> srcs) {
    Tensor* t = like->ctx->new_tensor(type, ne, n_dims);
    t->op = op;
    int i = 0;
    for (Tensor* s : srcs) t->src[i++] = s;
    return t;
}

Tensor* like(Tensor* a, Op op, std::initializer_list<Tensor*> srcs) {
    return result(a, a->type, a->ne, a->n_dims, op, srcs);
}

// A result that aliases `target`'s memory with its shape (CPY, SET_ROWS).
Tensor* into(Tensor* target, Op op, Tensor* src0, Tensor* src1, Tensor* src2 = nullptr) {
    Tensor* t = target->ctx->new_view(target, op, target->ne, target->nb, target->n_dims, 0);
    t->src[0] = src0;
    t->src[1] = src1;
    t->src[2] = src2;
    t->name.clear();
    return t;
}

Tensor* binary(Op op, const char* who, Tensor* a, Tensor* b) {
    need(a, who, "a");
    need(b, who, "b");
    same_context(who, {a, b});
    MB_REQUIRE(can_repeat(b, a), who,
            "cannot broadcast b " + desc(b) + " over a " + desc(a) + ": each dim of a must be a multiple of b's");
    return like(a, op, {a, b});
}


// A view of a block-quantized tensor must keep each row's dim 0 as whole blocks laid end to end
// (ggml's kernels and dequantizers walk a row block by block from its first byte); strides or an
// offset that cut a block would make every consumer read bytes of the wrong blocks.
void require_whole_blocks(const char* who, const Tensor* a, const int64_t ne[kMaxDims], const size_t nb[kMaxDims],
                          size_t view_offs) {
    const auto& tr = type_traits(a->type);
    if (tr.block_size == 1) return;
    const size_t blk = tr.type_size;
    bool ok = ne[0] % tr.block_size == 0 && nb[0] == blk && view_offs % blk == 0;
    for (int i = 1; i < kMaxDims && ok; ++i) ok = ne[i] <= 1 || nb[i] % blk == 0;
    if (ok) return;
    std::ostringstream os;
    if (ne[0] % tr.block_size != 0) {
        os << "a view of " << desc(a) << " with " << ne[0] << " values in dim 0 (the innermost axis) "
           "would cut its blocks: type "
           << tr.name << " stores blocks of " << tr.block_size << " values, so dim 0 must be a multiple of "
           << tr.block_size << "; dequantize it first (cpy to f32)";
        reject(who, os.str());
    }
    os << "a view of " << desc(a) << " with ne=(" << ne[0] << ", " << ne[1] << ", " << ne[2] << ", " << ne[3]
       << ") nb=(" << nb[0] << ", " << nb[1] << ", " << nb[2] << ", " << nb[3] << ") at byte offset " << view_offs
       << " would cut its blocks: type " << tr.name << " stores " << tr.block_size << " values in blocks of " << blk
       << " bytes, so dim 0 (the innermost axis) must stay in place with nb[0] == " << blk
       << " and every other stride and the offset must be multiples of " << blk << "; dequantize it first (cpy to f32)";
    reject(who, os.str());
}

// A permute or transpose of a block-quantized tensor means element (.., i, j) of the view is
// element (.., j, i) of the source; ggml's kernels read a row's dim 0 as consecutive blocks, which
// is that meaning only while the source's dim 0 stays the view's dim 0. Checking the strides alone
// is not enough: when a row is exactly one block, the block size and the row stride are equal and a
// transpose of (64, 32) q4_0 looked like whole blocks (its cont and mul_mat were wrong).
void require_dim0_kept(const char* who, const Tensor* a, int from) {
    const auto& tr = type_traits(a->type);
    if (tr.block_size == 1 || from == 0) return;
    std::ostringstream os;
    os << "moving dim 0 (the innermost axis) of " << desc(a) << " to dim " << from
       << " would cut its blocks: type " << tr.name << " stores dim 0 in blocks of " << tr.block_size
       << " values, which only stay whole where dim 0 stays in place; dequantize it first (cpy to f32)";
    reject(who, os.str());
}

}  // namespace

Tensor* add(Tensor* a, Tensor* b) { return binary(Op::ADD, "add", a, b); }
Tensor* sub(Tensor* a, Tensor* b) { return binary(Op::SUB, "sub", a, b); }
Tensor* mul(Tensor* a, Tensor* b) { return binary(Op::MUL, "mul", a, b); }
Tensor* div(Tensor* a, Tensor* b) { return binary(Op::DIV, "div", a, b); }

Tensor* scale(Tensor* a, float s, float b) {
    need(a, "scale", "a");
    Tensor* t = like(a, Op::SCALE, {a});
    t->set_param_f(0, s);
    t->set_param_f(1, b);
    return t;
}

Tensor* clamp(Tensor* a, float min, float max) {
    need(a, "clamp", "a");
    if (min > max) {
        std::ostringstream os;
        os << "min " << min << " is greater than max " << max;
        reject("clamp", os.str());
    }
    Tensor* t = like(a, Op::CLAMP, {a});
    t->set_param_f(0, min);
    t->set_param_f(1, max);
    return t;
}

Tensor* unary(Op op, Tensor* a) {
    need(a, "unary", "a");
    MB_REQUIRE(op_valid(op) && op_info(op).kind == OpKind::Map, "unary",
               std::string(op_name(op)) + " is not a one-argument element-wise op");
    return like(a, op, {a});
}

Tensor* leaky_relu(Tensor* a, float negative_slope) {
    need(a, "leaky_relu", "a");
    Tensor* t = like(a, Op::LEAKY_RELU, {a});
    t->set_param_f(0, negative_slope);
    return t;
}

Tensor* xielu(Tensor* a, float alpha_n, float alpha_p, float beta, float eps) {
    need(a, "xielu", "a");
    // ggml's softplus: x > 20 ? x : log(1 + exp(x)), in f32.
    auto softplus = [](float v) { return v > 20.0f ? v : std::log(1.0f + std::exp(v)); };
    Tensor* t = like(a, Op::XIELU, {a});
    t->set_param_f(0, beta + softplus(alpha_n));
    t->set_param_f(1, softplus(alpha_p));
    t->set_param_f(2, beta);
    t->set_param_f(3, eps);
    return t;
}

Tensor* glu(Op op, Tensor* a, Tensor* b, bool swapped, float alpha, float limit) {
    MB_REQUIRE(op_family(op) == OpFamily::Glu, "glu", std::string(op_name(op)) + " is not a gated linear unit");
    std::string who_s = std::string(op_info(op).py) + (b ? "_split" : "");
    const char* who = who_s.c_str();
    need(a, who, "a");
    same_context(who, {a, b});
    MB_REQUIRE(a->type == Type::F32 || a->type == Type::F16, who, "a must be f32 or f16, got " + desc(a));
    int64_t ne[kMaxDims] = {a->ne[0], a->ne[1], a->ne[2], a->ne[3]};
    if (b) {
        MB_REQUIRE(b->type == a->type, who, "b must have a's type, got a " + desc(a) + ", b " + desc(b));
        bool same = true;
        for (int i = 0; i < kMaxDims; ++i) same = same && a->ne[i] == b->ne[i];
        MB_REQUIRE(same, who, "a " + desc(a) + " and b " + desc(b) + " must have the same shape");
    } else {
        MB_REQUIRE(a->ne[0] % 2 == 0, who,
                   "the last axis of a " + desc(a) + " must be even: it splits into the value and gate halves");
        ne[0] = a->ne[0] / 2;
    }
    MB_REQUIRE(op != Op::SWIGLU_OAI || limit > 0.0f, who, "limit must be > 0, got " + std::to_string(limit));
    Tensor* t = b ? result(a, a->type, ne, a->n_dims, op, {a, b}) : result(a, a->type, ne, a->n_dims, op, {a});
    t->op_params[0] = swapped && !b ? 1 : 0;
    t->set_param_f(1, alpha);
    t->set_param_f(2, limit);
    return t;
}

static Tensor* norm_like(Op op, const char* who, Tensor* a, float eps) {
    need(a, who, "a");
    MB_REQUIRE(eps >= 0.0f, who, "eps must be >= 0, got " + std::to_string(eps));
    Tensor* t = like(a, op, {a});
    t->set_param_f(0, eps);
    return t;
}

Tensor* norm(Tensor* a, float eps) { return norm_like(Op::NORM, "norm", a, eps); }
Tensor* rms_norm(Tensor* a, float eps) { return norm_like(Op::RMS_NORM, "rms_norm", a, eps); }
Tensor* l2_norm(Tensor* a, float eps) { return norm_like(Op::L2_NORM, "l2_norm", a, eps); }

Tensor* soft_max_ext(Tensor* a, Tensor* mask, float scale, float max_bias, Tensor* sinks) {
    const char* who = "soft_max_ext";
    need(a, who, "a");
    same_context(who, {a, mask, sinks});
    if (mask) {
        MB_REQUIRE(mask->type == Type::F32 || mask->type == Type::F16, who,
                   "mask must be f32 or f16, got " + desc(mask));
        MB_REQUIRE(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
                    a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0,
                who, "mask " + desc(mask) + " does not fit a " + desc(a) +
                         ": needs the same row length, at least as many rows, and dims 2,3 dividing a's");
    }
    if (sinks) {
        MB_REQUIRE(sinks->type == Type::F32 && sinks->nelements() == a->ne[2], who,
                "sinks must be f32 with one value per head (dim 2 of a), got " + desc(sinks) + " for a " + desc(a));
    }
    MB_REQUIRE(max_bias >= 0.0f, who, "max_bias must be >= 0");
    Tensor* t = like(a, Op::SOFT_MAX, {a, mask, sinks});
    t->set_param_f(0, scale);
    t->set_param_f(1, max_bias);
    return t;
}

static Tensor* row_reduce(Op op, const char* who, Tensor* a) {
    need(a, who, "a");
    int64_t ne[kMaxDims] = {1, a->ne[1], a->ne[2], a->ne[3]};
    return result(a, a->type, ne, a->n_dims, op, {a});
}

Tensor* sum_rows(Tensor* a) { return row_reduce(Op::SUM_ROWS, "sum_rows", a); }
Tensor* mean(Tensor* a) { return row_reduce(Op::MEAN, "mean", a); }

Tensor* argmax(Tensor* a) {
    need(a, "argmax", "a");
    MB_REQUIRE(a->ne[2] == 1 && a->ne[3] == 1, "argmax", "a must be at most 2-D, got " + desc(a));
    int64_t ne[kMaxDims] = {a->ne[1], 1, 1, 1};
    return result(a, Type::I32, ne, 1, Op::ARGMAX, {a});
}

Tensor* flash_attn_ext(Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale, float max_bias, float softcap) {
    const char* who = "flash_attn_ext";
    need(q, who, "q");
    need(k, who, "k");
    need(v, who, "v");
    same_context(who, {q, k, v, mask});
    std::string shapes = "q " + desc(q) + ", k " + desc(k) + ", v " + desc(v) + ", mask " + desc(mask);
    MB_REQUIRE(q->type == Type::F32, who, "q must be f32 (" + shapes + ")");
    MB_REQUIRE(k->type == v->type, who, "k and v must have one type (" + shapes + ")");
    MB_REQUIRE(q->ne[0] == k->ne[0], who, "q and k must have the same head size (" + shapes + ")");
    MB_REQUIRE(k->ne[1] == v->ne[1], who, "k and v must have the same length (" + shapes + ")");
    MB_REQUIRE(k->ne[2] == v->ne[2] && k->ne[2] > 0 && q->ne[2] % k->ne[2] == 0, who,
            "heads of q must be a multiple of the heads of k and v (" + shapes + ")");
    MB_REQUIRE(k->ne[3] == v->ne[3] && k->ne[3] > 0 && q->ne[3] % k->ne[3] == 0, who,
               "batch mismatch (" + shapes + ")");
    if (mask) {
        MB_REQUIRE(mask->type == Type::F16 || mask->type == Type::F32, who, "mask must be f16 or f32 (" + shapes + ")");
        MB_REQUIRE(mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
                    q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0,
                who, "mask must be [n_kv, >= n_q, heads dividing, batch dividing] (" + shapes + ")");
    }
    MB_REQUIRE(softcap >= 0.0f && max_bias >= 0.0f, who, "softcap and max_bias must be >= 0");
    int64_t ne[kMaxDims] = {v->ne[0], q->ne[2], q->ne[1], q->ne[3]};
    Tensor* t = result(q, Type::F32, ne, 4, Op::FLASH_ATTN_EXT, {q, k, v, mask});
    t->set_param_f(0, scale);
    t->set_param_f(1, max_bias);
    t->set_param_f(2, softcap);
    return t;
}

Tensor* mul_mat(Tensor* a, Tensor* b, bool int8_activations) {
    const char* who = "mul_mat";
    need(a, who, "a");
    need(b, who, "b");
    MB_REQUIRE(!int8_activations || type_traits(a->type).is_quantized, who,
            "int8 activations need quantized weights; a " + desc(a) + " is not quantized");
    same_context(who, {a, b});
    MB_REQUIRE(a->ne[0] == b->ne[0], who,
            "a " + desc(a) + " and b " + desc(b) + " must have the same inner (last) dimension");
    MB_REQUIRE(a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0, who,
            "cannot broadcast a " + desc(a) + " over b " + desc(b) + " on the batch dims");
    int64_t ne[kMaxDims] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    int n_dims = std::max(b->n_dims, a->n_dims == 2 ? 1 : a->n_dims);
    if (ne[1] != 1) n_dims = std::max(n_dims, 2);
    Tensor* t = result(a, Type::F32, ne, n_dims, Op::MUL_MAT, {a, b});
    t->op_params[kMulMatInt8Param] = int8_activations ? 1 : 0;
    return t;
}

Tensor* dup(Tensor* a) {
    need(a, "dup", "a");
    return like(a, Op::DUP, {a});
}

Tensor* cont(Tensor* a) {
    need(a, "cont", "a");
    return like(a, Op::CONT, {a});
}

Tensor* cpy(Tensor* a, Tensor* b) {
    need(a, "cpy", "a");
    need(b, "cpy", "b");
    same_context("cpy", {a, b});
    MB_REQUIRE(a->nelements() == b->nelements(), "cpy",
            "a " + desc(a) + " and b " + desc(b) + " must have the same number of elements");
    return into(b, Op::CPY, a, b);
}

Tensor* get_rows(Tensor* a, Tensor* idx) {
    const char* who = "get_rows";
    need(a, who, "a");
    need(idx, who, "idx");
    same_context(who, {a, idx});
    MB_REQUIRE(idx->type == Type::I32, who, "idx must be i32, got " + desc(idx));
    MB_REQUIRE(idx->ne[3] == 1 && a->ne[2] == idx->ne[1] && a->ne[3] == idx->ne[2], who,
            "idx " + desc(idx) + " does not match the batch dims of a " + desc(a));
    int64_t ne[kMaxDims] = {a->ne[0], idx->ne[0], idx->ne[1], idx->ne[2]};
    int n_dims = std::max(2, idx->n_dims + 1);
    return result(a, Type::F32, ne, n_dims, Op::GET_ROWS, {a, idx});
}

Tensor* set_rows(Tensor* dst, Tensor* src, Tensor* idx) {
    const char* who = "set_rows";
    need(dst, who, "dst");
    need(src, who, "src");
    need(idx, who, "idx");
    same_context(who, {dst, src, idx});
    MB_REQUIRE(src->type == Type::F32, who, "src must be f32, got " + desc(src));
    MB_REQUIRE(idx->type == Type::I32, who, "idx must be i32, got " + desc(idx));
    MB_REQUIRE(dst->ne[0] == src->ne[0] && dst->ne[2] == src->ne[2] && dst->ne[3] == src->ne[3] &&
                idx->ne[0] == src->ne[1] && idx->ne[1] == src->ne[2] && idx->ne[2] == src->ne[3],
            who, "shapes do not fit: dst " + desc(dst) + ", src " + desc(src) + ", idx " + desc(idx));
    return into(dst, Op::SET_ROWS, src, idx, dst);
}

static int64_t conv_out(int64_t in, int64_t k, int s, int p, int d) {
    return (in + 2 * p - static_cast<int64_t>(d) * (k - 1) - 1) / s + 1;
}

Tensor* im2col(Tensor* kernel, Tensor* data, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2d,
               Type dst_type) {
    const char* who = "im2col";
    need(kernel, who, "kernel");
    need(data, who, "data");
    same_context(who, {kernel, data});
    MB_REQUIRE(dst_type == Type::F32 || dst_type == Type::F16, who, "dst type must be f32 or f16");
    MB_REQUIRE(s0 > 0 && d0 > 0 && p0 >= 0 && (!is_2d || (s1 > 0 && d1 > 0 && p1 >= 0)), who,
            "strides and dilations must be > 0 and paddings >= 0");
    std::string shapes = "kernel " + desc(kernel) + ", data " + desc(data);
    int64_t ne[kMaxDims];
    if (is_2d) {
        MB_REQUIRE(kernel->ne[2] == data->ne[2], who, "input channels differ (" + shapes + ")");
        int64_t ow = conv_out(data->ne[0], kernel->ne[0], s0, p0, d0);
        int64_t oh = conv_out(data->ne[1], kernel->ne[1], s1, p1, d1);
        MB_REQUIRE(ow > 0 && oh > 0, who, "the kernel is larger than the padded input (" + shapes + ")");
        int64_t v[kMaxDims] = {kernel->ne[0] * kernel->ne[1] * kernel->ne[2], ow, oh, data->ne[3]};
        std::copy(v, v + kMaxDims, ne);
    } else {
        MB_REQUIRE(kernel->ne[1] == data->ne[1], who, "input channels differ (" + shapes + ")");
        int64_t ol = conv_out(data->ne[0], kernel->ne[0], s0, p0, d0);
        MB_REQUIRE(ol > 0, who, "the kernel is larger than the padded input (" + shapes + ")");
        int64_t v[kMaxDims] = {kernel->ne[0] * kernel->ne[1], ol, data->ne[2], 1};
        std::copy(v, v + kMaxDims, ne);
    }
    Tensor* t = result(data, dst_type, ne, is_2d ? 4 : 3, Op::IM2COL, {kernel, data});
    int32_t params[7] = {s0, s1, p0, p1, d0, d1, is_2d ? 1 : 0};
    std::copy(params, params + 7, t->op_params);
    return t;
}

Tensor* conv_1d(Tensor* kernel, Tensor* data, int s0, int p0, int d0) {
    need(kernel, "conv_1d", "kernel");
    need(data, "conv_1d", "data");
    Type col_type = kernel->type == Type::F16 ? Type::F16 : Type::F32;
    Tensor* cols = im2col(kernel, data, s0, 0, p0, 0, d0, 0, false, col_type);  // [IC*K, OL, N]
    const int64_t ick = cols->ne[0], ol = cols->ne[1], n = cols->ne[2], oc = kernel->ne[2];
    int64_t ne_cols[kMaxDims] = {ick, ol * n, 1, 1};
    int64_t ne_kern[kMaxDims] = {ick, oc, 1, 1};
    MB_REQUIRE(kernel->is_contiguous(), "conv_1d", "kernel must be contiguous, got " + desc(kernel));
    Tensor* prod = mul_mat(reshape(cols, ne_cols, 2), reshape(kernel, ne_kern, 2));  // [OL*N, OC]
    int64_t ne3[kMaxDims] = {ol, n, oc, 1};
    Tensor* out = reshape(prod, ne3, 3);  // [OL, N, OC]
    if (n == 1) {
        int64_t ne_out[kMaxDims] = {ol, oc, 1, 1};
        return reshape(out, ne_out, 3);
    }
    return cont(permute(out, 0, 2, 1, 3));  // [OL, OC, N]
}

Tensor* concat(Tensor* a, Tensor* b, int dim) {
    const char* who = "concat";
    need(a, who, "a");
    need(b, who, "b");
    same_context(who, {a, b});
    MB_REQUIRE(dim >= 0 && dim < kMaxDims, who, "dim must be in [0, 3] (ggml order), got " + std::to_string(dim));
    MB_REQUIRE(a->type == b->type, who, "a " + desc(a) + " and b " + desc(b) + " must have one type");
    int64_t ne[kMaxDims];
    for (int i = 0; i < kMaxDims; ++i) {
        MB_REQUIRE(i == dim || a->ne[i] == b->ne[i], who,
                "a " + desc(a) + " and b " + desc(b) + " differ outside the concatenated dim");
        ne[i] = i == dim ? a->ne[i] + b->ne[i] : a->ne[i];
    }
    int n_dims = std::max({a->n_dims, b->n_dims, dim + 1});
    Tensor* t = result(a, a->type, ne, n_dims, Op::CONCAT, {a, b});
    t->op_params[0] = dim;
    return t;
}

Tensor* repeat(Tensor* a, Tensor* b) {
    need(a, "repeat", "a");
    need(b, "repeat", "b");
    same_context("repeat", {a, b});
    MB_REQUIRE(can_repeat(a, b), "repeat", "cannot tile a " + desc(a) + " to the shape of b " + desc(b));
    return result(a, a->type, b->ne, std::max(a->n_dims, b->n_dims), Op::REPEAT, {a, b});
}

Tensor* pad(Tensor* a, int p0, int p1, int p2, int p3) {
    need(a, "pad", "a");
    int p[kMaxDims] = {p0, p1, p2, p3};
    int64_t ne[kMaxDims];
    int n_dims = a->n_dims;
    for (int i = 0; i < kMaxDims; ++i) {
        MB_REQUIRE(p[i] >= 0, "pad", "paddings must be >= 0");
        ne[i] = a->ne[i] + p[i];
        if (p[i] > 0) n_dims = std::max(n_dims, i + 1);
    }
    Tensor* t = result(a, a->type, ne, n_dims, Op::PAD, {a});
    std::copy(p, p + kMaxDims, t->op_params);
    return t;
}

Tensor* pad_reflect_1d(Tensor* a, int p0, int p1) {
    const char* who = "pad_reflect_1d";
    need(a, who, "a");
    MB_REQUIRE(!type_traits(a->type).is_quantized, who, "a " + desc(a) + " must not be quantized");
    MB_REQUIRE(p0 >= 0 && p1 >= 0 && p0 < a->ne[0] && p1 < a->ne[0], who,
            "p0 " + std::to_string(p0) + " and p1 " + std::to_string(p1) + " must be in [0, ne0 - 1] for a " +
            desc(a));
    int64_t ne[kMaxDims] = {a->ne[0] + p0 + p1, a->ne[1], a->ne[2], a->ne[3]};
    Tensor* t = result(a, a->type, ne, std::max(a->n_dims, 1), Op::PAD_REFLECT_1D, {a});
    t->op_params[0] = p0;
    t->op_params[1] = p1;
    return t;
}

Tensor* rope(Tensor* a, Tensor* pos, int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale,
             float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    const char* who = "rope";
    need(a, who, "a");
    need(pos, who, "pos");
    same_context(who, {a, pos});
    MB_REQUIRE(pos->type == Type::I32 && pos->ne[0] == a->ne[2] && pos->nelements() == pos->ne[0], who,
            "pos must be i32 with one position per token (dim 2 of a " + desc(a) + "), got " + desc(pos));
    MB_REQUIRE(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0], who,
            "n_dims must be even and in [2, " + std::to_string(a->ne[0]) + "], got " + std::to_string(n_dims));
    MB_REQUIRE(mode == 0 || mode == 2, who, "mode must be 0 (normal) or 2 (neox), got " + std::to_string(mode));
    MB_REQUIRE(freq_base > 0.0f && freq_scale > 0.0f, who, "freq_base and freq_scale must be > 0");
    Tensor* t = like(a, Op::ROPE, {a, pos});
    t->op_params[0] = n_dims;
    t->op_params[1] = mode;
    t->op_params[2] = n_ctx_orig;
    float f[6] = {freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow};
    for (int i = 0; i < 6; ++i) t->set_param_f(3 + i, f[i]);
    return t;
}

Tensor* arange(Context* ctx, float start, float stop, float step) {
    MB_REQUIRE(ctx != nullptr, "arange", "ctx is None");
    MB_REQUIRE(step != 0.0f && std::isfinite(start) && std::isfinite(stop) && std::isfinite(step), "arange",
               "start, stop and step must be finite and step != 0, got start " + std::to_string(start) + ", stop " +
                   std::to_string(stop) + ", step " + std::to_string(step));
    const double count = std::ceil((double(stop) - double(start)) / double(step));
    MB_REQUIRE(count >= 0.0 && count <= double(INT32_MAX), "arange",
               "start " + std::to_string(start) + ", stop " + std::to_string(stop) + ", step " + std::to_string(step) +
                   " give " + std::to_string(count) + " values (must be in [0, 2^31))");
    int64_t ne[kMaxDims] = {int64_t(count), 1, 1, 1};
    Tensor* t = ctx->new_tensor(Type::F32, ne, 1);
    t->op = Op::ARANGE;
    t->set_param_f(0, start);
    t->set_param_f(1, stop);
    t->set_param_f(2, step);
    return t;
}

Tensor* argsort(Tensor* a, bool descending) {
    need(a, "argsort", "a");
    MB_REQUIRE(a->type == Type::F32, "argsort", "a must be f32, got " + desc(a));
    Tensor* t = result(a, Type::I32, a->ne, a->n_dims, Op::ARGSORT, {a});
    t->op_params[0] = descending ? 1 : 0;
    return t;
}

Tensor* mul_mat_id(Tensor* as, Tensor* b, Tensor* ids) {
    const char* who = "mul_mat_id";
    need(as, who, "as");
    need(b, who, "b");
    need(ids, who, "ids");
    same_context(who, {as, b, ids});
    const std::string shapes = "as " + desc(as) + ", b " + desc(b) + ", ids " + desc(ids);
    MB_REQUIRE(b->type == Type::F32, who, "b must be f32 (" + shapes + ")");
    MB_REQUIRE(ids->type == Type::I32, who, "ids must be i32 (" + shapes + ")");
    MB_REQUIRE(as->ne[3] == 1 && b->ne[3] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1, who,
               "as and b must be at most 3-D and ids at most 2-D (" + shapes + ")");
    MB_REQUIRE(as->ne[0] == b->ne[0], who, "as and b must have the same inner (last) dimension (" + shapes + ")");
    MB_REQUIRE(ids->ne[1] == b->ne[2], who, "ids must have one row per token of b (" + shapes + ")");
    MB_REQUIRE(b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0, who,
               "b's rows per token must divide the experts per token of ids (" + shapes + ")");
    int64_t ne[kMaxDims] = {as->ne[1], ids->ne[0], b->ne[2], 1};
    return result(as, Type::F32, ne, 3, Op::MUL_MAT_ID, {as, b, ids});
}

Tensor* add_id(Tensor* a, Tensor* b, Tensor* ids) {
    const char* who = "add_id";
    need(a, who, "a");
    need(b, who, "b");
    need(ids, who, "ids");
    same_context(who, {a, b, ids});
    const std::string shapes = "a " + desc(a) + ", b " + desc(b) + ", ids " + desc(ids);
    MB_REQUIRE(a->type == Type::F32 && b->type == Type::F32, who, "a and b must be f32 (" + shapes + ")");
    MB_REQUIRE(ids->type == Type::I32, who, "ids must be i32 (" + shapes + ")");
    MB_REQUIRE(a->ne[0] == b->ne[0] && b->ne[2] == 1 && b->ne[3] == 1 && a->ne[3] == 1, who,
               "b must be 2-D with a's row length, a at most 3-D (" + shapes + ")");
    MB_REQUIRE(ids->ne[0] == a->ne[1] && ids->ne[1] == a->ne[2] && ids->ne[2] == 1 && ids->ne[3] == 1, who,
               "ids must have one id per row of a (" + shapes + ")");
    return like(a, Op::ADD_ID, {a, b, ids});
}

Tensor* group_norm(Tensor* a, int n_groups, float eps) {
    need(a, "group_norm", "a");
    MB_REQUIRE(a->type == Type::F32, "group_norm", "a must be f32, got " + desc(a));
    MB_REQUIRE(n_groups > 0, "group_norm", "n_groups must be > 0, got " + std::to_string(n_groups));
    MB_REQUIRE(eps >= 0.0f, "group_norm", "eps must be >= 0, got " + std::to_string(eps));
    Tensor* t = like(a, Op::GROUP_NORM, {a});
    t->op_params[0] = n_groups;
    t->set_param_f(1, eps);
    return t;
}

Tensor* timestep_embedding(Tensor* timesteps, int dim, int max_period) {
    const char* who = "timestep_embedding";
    need(timesteps, who, "timesteps");
    MB_REQUIRE(timesteps->type == Type::F32 && timesteps->nelements() == timesteps->ne[0], who,
               "timesteps must be f32 and 1-D, got " + desc(timesteps));
    MB_REQUIRE(dim > 0 && max_period > 0, who,
               "dim and max_period must be > 0, got dim " + std::to_string(dim) + ", max_period " +
                   std::to_string(max_period));
    int64_t ne[kMaxDims] = {dim, timesteps->ne[0], 1, 1};
    Tensor* t = result(timesteps, Type::F32, ne, 2, Op::TIMESTEP_EMBEDDING, {timesteps});
    t->op_params[0] = dim;
    t->op_params[1] = max_period;
    return t;
}

Tensor* conv_transpose_1d(Tensor* kernel, Tensor* data, int s0, int p0, int d0) {
    const char* who = "conv_transpose_1d";
    need(kernel, who, "kernel");
    need(data, who, "data");
    same_context(who, {kernel, data});
    const std::string shapes = "kernel " + desc(kernel) + ", data " + desc(data);
    MB_REQUIRE(kernel->type == Type::F32 || kernel->type == Type::F16, who,
               "kernel must be f32 or f16 (" + shapes + ")");
    MB_REQUIRE(data->type == Type::F32, who, "data must be f32 (" + shapes + ")");
    MB_REQUIRE(kernel->ne[3] == 1 && data->ne[3] == 1, who, "kernel and data must be at most 3-D (" + shapes + ")");
    MB_REQUIRE(kernel->ne[2] == data->ne[1], who, "input channels differ (" + shapes + ")");
    MB_REQUIRE(s0 > 0 && d0 > 0 && p0 >= 0, who,
               "stride and dilation must be > 0 and padding >= 0, got stride " + std::to_string(s0) + ", padding " +
                   std::to_string(p0) + ", dilation " + std::to_string(d0));
    const int64_t ol = (data->ne[0] - 1) * s0 - 2 * int64_t(p0) + int64_t(d0) * (kernel->ne[0] - 1) + 1;
    MB_REQUIRE(ol > 0 || data->ne[0] == 0, who, "the padding leaves no output (" + shapes + ")");
    int64_t ne[kMaxDims] = {data->ne[0] == 0 ? 0 : ol, kernel->ne[1], data->ne[2], 1};
    Tensor* t = result(data, Type::F32, ne, 3, Op::CONV_TRANSPOSE_1D, {kernel, data});
    t->op_params[0] = s0;
    t->op_params[1] = p0;
    t->op_params[2] = d0;
    return t;
}

Tensor* pool_2d(Tensor* a, bool avg, int k0, int k1, int s0, int s1, int p0, int p1) {
    const char* who = "pool_2d";
    need(a, who, "a");
    MB_REQUIRE(a->type == Type::F32, who, "a must be f32, got " + desc(a));
    MB_REQUIRE(k0 > 0 && k1 > 0 && s0 > 0 && s1 > 0 && p0 >= 0 && p1 >= 0, who,
               "kernel sizes and strides must be > 0 and paddings >= 0, got k " + std::to_string(k0) + "x" +
                   std::to_string(k1) + ", s " + std::to_string(s0) + "x" + std::to_string(s1) + ", p " +
                   std::to_string(p0) + "x" + std::to_string(p1));
    const int64_t ow = (a->ne[0] + 2 * p0 - k0) / s0 + 1, oh = (a->ne[1] + 2 * p1 - k1) / s1 + 1;
    MB_REQUIRE(a->ne[0] + 2 * p0 >= k0 && a->ne[1] + 2 * p1 >= k1, who,
               "the window is larger than the padded input " + desc(a));
    int64_t ne[kMaxDims] = {ow, oh, a->ne[2], a->ne[3]};
    Tensor* t = result(a, Type::F32, ne, std::max(2, a->n_dims), Op::POOL_2D, {a});
    int32_t params[7] = {avg ? 1 : 0, k0, k1, s0, s1, p0, p1};
    std::copy(params, params + 7, t->op_params);
    return t;
}

Tensor* interpolate(Tensor* a, const int64_t ne[kMaxDims], int mode) {
    const char* who = "interpolate";
    need(a, who, "a");
    MB_REQUIRE(a->type == Type::F32, who, "a must be f32, got " + desc(a));
    const int base = mode & 0xFF;
    MB_REQUIRE(mode >= 0 && base <= 2 && (mode & ~0x3FF) == 0, who,
               "mode " + std::to_string(mode) +
                   " is not nearest (0), bilinear (1) or bicubic (2), | 256 align corners, | 512 antialias");
    MB_REQUIRE(!(mode & 512) || base == 1, who,
               "antialias (512) applies to bilinear (1) only, got mode " + std::to_string(mode));
    std::string shape = "(";
    for (int d = kMaxDims - 1; d >= 0; --d) shape += std::to_string(ne[d]) + (d ? ", " : ")");
    for (int d = 0; d < kMaxDims; ++d) {
        MB_REQUIRE(ne[d] >= 0, who, "the output shape " + shape + " has a negative size");
    }
    const bool out_empty = ne[0] * ne[1] * ne[2] * ne[3] == 0;
    MB_REQUIRE(out_empty || !a->is_empty(), who, "an empty a " + desc(a) + " cannot fill the shape " + shape);
    int n_dims = 1;
    for (int d = 1; d < kMaxDims; ++d) {
        if (ne[d] != 1) n_dims = d + 1;
    }
    Tensor* t = result(a, Type::F32, ne, std::max(n_dims, a->n_dims), Op::UPSCALE, {a});
    t->op_params[0] = mode;
    return t;
}

Tensor* upscale(Tensor* a, int scale_factor, int mode) {
    need(a, "upscale", "a");
    MB_REQUIRE(scale_factor > 0, "upscale", "scale_factor must be > 0, got " + std::to_string(scale_factor));
    int64_t ne[kMaxDims] = {a->ne[0] * scale_factor, a->ne[1] * scale_factor, a->ne[2], a->ne[3]};
    Tensor* t = interpolate(a, ne, mode);
    t->n_dims = std::max(2, a->n_dims);
    return t;
}

namespace {

bool packed_rows(const Tensor* t) {
    return t->nb[0] == type_traits(t->type).type_size && t->nb[1] == size_t(t->ne[0]) * t->nb[0];
}

}  // namespace

Tensor* ssm_scan(Tensor* s, Tensor* x, Tensor* dt, Tensor* A, Tensor* B, Tensor* C, Tensor* ids) {
    const char* who = "ssm_scan";
    need(s, who, "s");
    need(x, who, "x");
    need(dt, who, "dt");
    need(A, who, "A");
    need(B, who, "B");
    need(C, who, "C");
    need(ids, who, "ids");
    same_context(who, {s, x, dt, A, B, C, ids});
    const std::string shapes = "s " + desc(s) + ", x " + desc(x) + ", dt " + desc(dt) + ", A " + desc(A) + ", B " +
                               desc(B) + ", C " + desc(C) + ", ids " + desc(ids);
    for (const Tensor* t : {s, x, dt, A, B, C}) {
        MB_REQUIRE(t->type == Type::F32, who, "s, x, dt, A, B and C must be f32 (" + shapes + ")");
    }
    MB_REQUIRE(ids->type == Type::I32, who, "ids must be i32 (" + shapes + ")");
    MB_REQUIRE(s->is_contiguous() && dt->is_contiguous() && A->is_contiguous(), who,
               "s, dt and A must be contiguous (" + shapes + ")");
    MB_REQUIRE(packed_rows(x) && packed_rows(B) && packed_rows(C), who,
               "x, B and C must have packed rows (" + shapes + ")");
    const int64_t nc = s->ne[0], nr = x->ne[0], nh = x->ne[1], nt = x->ne[2], ns = x->ne[3];
    const int64_t ng = B->ne[1];
    bool ok = dt->ne[0] == nh && dt->ne[1] == nt && dt->ne[2] == ns && dt->ne[3] == 1;
    ok = ok && s->ne[1] == nr && s->ne[2] == nh;
    ok = ok && B->ne[0] == nc && B->ne[2] == nt && B->ne[3] == ns;
    for (int d = 0; d < kMaxDims; ++d) ok = ok && B->ne[d] == C->ne[d];
    ok = ok && ids->ne[0] == ns && ids->ne[1] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1;
    ok = ok && A->ne[1] == nh && A->ne[2] == 1 && A->ne[3] == 1 && (A->ne[0] == 1 || A->ne[0] == nc);
    MB_REQUIRE(ok, who,
               "shapes do not agree: want s [d_state, head_dim, n_head, *], x [head_dim, n_head, n_t, n_s], "
               "dt [n_head, n_t, n_s], A [d_state or 1, n_head], B = C [d_state, n_group, n_t, n_s], ids [n_s] "
               "(ggml order; " +
                   shapes + ")");
    MB_REQUIRE(ng > 0 && nh % ng == 0, who, "n_head must be a multiple of n_group (" + shapes + ")");
    MB_REQUIRE(ns == 0 || s->ne[3] > 0, who, "s holds no state to start from (" + shapes + ")");
    int64_t ne[kMaxDims] = {x->nelements() + nc * nr * nh * ns, 1, 1, 1};
    return result(x, Type::F32, ne, 1, Op::SSM_SCAN, {s, x, dt, A, B, C, ids});
}

namespace {

// The checks of RWKV_WKV6 and WKV7: every input f32 and contiguous, the token inputs [S, H, T], state
// [S*S*H, n_seqs] with T a multiple of n_seqs. Returns the result [S*H, T + S*n_seqs].
Tensor* rwkv_result(const char* who, Op op, std::initializer_list<std::pair<const char*, Tensor*>> tokens,
                    Tensor* tf, Tensor* state, std::initializer_list<Tensor*> srcs) {
    std::string shapes;
    for (const auto& [name, t] : tokens) {
        need(t, who, name);
        shapes += std::string(shapes.empty() ? "" : ", ") + name + " " + desc(t);
    }
    if (tf) shapes += ", tf " + desc(tf);
    need(state, who, "state");
    shapes += ", state " + desc(state);
    for (const Tensor* t : srcs) same_context(who, {*srcs.begin(), t});
    const Tensor* k = tokens.begin()->second;
    const int64_t S = k->ne[0], H = k->ne[1], T = k->ne[2];
    for (const Tensor* t : srcs) {
        MB_REQUIRE(t->type == Type::F32 && t->is_contiguous(), who,
                   "every input must be contiguous f32 (" + shapes + ")");
    }
    for (const auto& [name, t] : tokens) {
        (void)name;
        MB_REQUIRE(t->ne[0] == S && t->ne[1] == H && t->ne[2] == T && t->ne[3] == 1, who,
                   "the per-token inputs must all be [S, H, T] (ggml order; " + shapes + ")");
    }
    MB_REQUIRE(!tf || tf->nelements() == S * H, who, "tf must hold S*H values (" + shapes + ")");
    const int64_t n_seqs = state->ne[1];
    MB_REQUIRE(state->nelements() == S * S * H * n_seqs && state->ne[2] == 1 && state->ne[3] == 1, who,
               "state must be [S*S*H, n_seqs] (ggml order; " + shapes + ")");
    MB_REQUIRE(n_seqs > 0 && T % n_seqs == 0, who, "T must be a multiple of n_seqs > 0 (" + shapes + ")");
    int64_t ne[kMaxDims] = {S * H, T + S * n_seqs, 1, 1};
    Tensor* t = result(state, Type::F32, ne, 2, op, srcs);
    return t;
}

}  // namespace

Tensor* rwkv_wkv6(Tensor* k, Tensor* v, Tensor* r, Tensor* tf, Tensor* td, Tensor* state) {
    need(tf, "rwkv_wkv6", "tf");
    return rwkv_result("rwkv_wkv6", Op::RWKV_WKV6, {{"k", k}, {"v", v}, {"r", r}, {"td", td}}, tf, state,
                       {k, v, r, tf, td, state});
}

Tensor* rwkv_wkv7(Tensor* r, Tensor* w, Tensor* k, Tensor* v, Tensor* a, Tensor* b, Tensor* state) {
    return rwkv_result("rwkv_wkv7", Op::RWKV_WKV7, {{"k", k}, {"r", r}, {"w", w}, {"v", v}, {"a", a}, {"b", b}},
                       nullptr, state, {r, w, k, v, a, b, state});
}

Tensor* ssm_conv(Tensor* sx, Tensor* c) {
    const char* who = "ssm_conv";
    need(sx, who, "sx");
    need(c, who, "c");
    same_context(who, {sx, c});
    const std::string shapes = "sx " + desc(sx) + ", c " + desc(c);
    MB_REQUIRE(sx->type == Type::F32 && c->type == Type::F32, who, "sx and c must be f32 (" + shapes + ")");
    MB_REQUIRE(sx->ne[3] == 1 && c->ne[2] == 1 && c->ne[3] == 1, who, "sx must be at most 3-D, c 2-D (" + shapes + ")");
    MB_REQUIRE(c->ne[1] == sx->ne[1], who, "sx and c must have the same channels (d_inner) (" + shapes + ")");
    MB_REQUIRE(c->ne[0] > 0 && sx->ne[0] >= c->ne[0], who,
               "sx must hold d_conv - 1 + n_t >= d_conv steps per channel (" + shapes + ")");
    int64_t ne[kMaxDims] = {sx->ne[1], sx->ne[0] - c->ne[0] + 1, sx->ne[2], 1};
    return result(sx, Type::F32, ne, 3, Op::SSM_CONV, {sx, c});
}

Tensor* acc(Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const char* who = "acc";
    need(a, who, "a");
    need(b, who, "b");
    same_context(who, {a, b});
    const std::string shapes = "a " + desc(a) + ", b " + desc(b) + ", nb1 " + std::to_string(nb1) + ", nb2 " +
                               std::to_string(nb2) + ", nb3 " + std::to_string(nb3) +
                               ", offset " + std::to_string(offset);
    MB_REQUIRE(a->type == Type::F32 && b->type == Type::F32, who, "a and b must be f32 (" + shapes + ")");
    MB_REQUIRE(a->is_contiguous(), who, "a must be contiguous (" + shapes + ")");
    size_t nb[kMaxDims] = {sizeof(float), nb1, nb2, nb3};
    // A size-1 dim's stride is never used: normalised to the nested value, so the check below and
    // the kernels' position arithmetic hold for every view ggml would accept.
    for (int i = 1; i < kMaxDims; ++i) {
        if (b->ne[i] <= 1) nb[i] = nb[i - 1] * size_t(std::max<int64_t>(b->ne[i - 1], 1));
    }
    bool ok = offset % sizeof(float) == 0;
    for (int i = 1; i < kMaxDims; ++i) {
        ok = ok && nb[i] % sizeof(float) == 0 && nb[i] >= nb[i - 1] * size_t(std::max<int64_t>(b->ne[i - 1], 1));
    }
    MB_REQUIRE(ok, who, "strides and offset must be multiples of 4 and nest without overlap (" + shapes + ")");
    if (b->nelements() > 0) {
        size_t last = offset + sizeof(float);
        for (int i = 0; i < kMaxDims; ++i) last += size_t(b->ne[i] - 1) * nb[i];
        MB_REQUIRE(last <= a->nbytes(), who, "the view reaches past the end of a (" + shapes + ")");
    }
    MB_REQUIRE(nb[1] <= size_t(INT32_MAX) && nb[2] <= size_t(INT32_MAX) && nb[3] <= size_t(INT32_MAX) &&
                   offset <= size_t(INT32_MAX),
               who, "strides and offset must be below 2^31 bytes (" + shapes + ")");
    Tensor* t = like(a, Op::ACC, {a, b});
    t->op_params[0] = int32_t(nb[1]);
    t->op_params[1] = int32_t(nb[2]);
    t->op_params[2] = int32_t(nb[3]);
    t->op_params[3] = int32_t(offset);
    return t;
}

Tensor* reshape(Tensor* a, const int64_t ne[kMaxDims], int n_dims) {
    need(a, "reshape", "a");
    MB_REQUIRE(a->is_contiguous(), "reshape", "a " + desc(a) + " is not contiguous; use cont() first");
    int64_t n = 1;
    for (int i = 0; i < kMaxDims; ++i) n *= ne[i];
    MB_REQUIRE(n == a->nelements(), "reshape", "cannot reshape a " + desc(a) + " of " + std::to_string(a->nelements()) +
                                                " elements into " + std::to_string(n) + " elements");
    size_t nb[kMaxDims];
    contiguous_strides(a->type, ne, nb);
    require_whole_blocks("reshape", a, ne, nb, a->view_offs);
    return a->ctx->new_view(a, Op::RESHAPE, ne, nb, n_dims, 0);
}

Tensor* view(Tensor* a, const int64_t ne[kMaxDims], const size_t nb[kMaxDims], int n_dims, size_t offset) {
    need(a, "view", "a");
    Tensor probe;
    probe.type = a->type;
    for (int i = 0; i < kMaxDims; ++i) {
        probe.ne[i] = ne[i];
        probe.nb[i] = nb[i];
    }
    const Tensor& root = a->root();
    size_t start = a->view_offs + offset;
    size_t span = probe.nbytes();
    MB_REQUIRE(start <= root.nbytes() && span <= root.nbytes() - start, "view",
            "view of " + std::to_string(span) + " bytes at offset " + std::to_string(offset) +
                " reaches past the end of " + desc(a) + " (" + std::to_string(root.nbytes()) + " bytes in its memory)");
    require_whole_blocks("view", a, ne, nb, start);
    return a->ctx->new_view(a, Op::VIEW, ne, nb, n_dims, offset);
}

Tensor* permute(Tensor* a, int ax0, int ax1, int ax2, int ax3) {
    need(a, "permute", "a");
    int ax[kMaxDims] = {ax0, ax1, ax2, ax3};
    bool seen[kMaxDims] = {};
    for (int i = 0; i < kMaxDims; ++i) {
        MB_REQUIRE(ax[i] >= 0 && ax[i] < kMaxDims && !seen[ax[i]], "permute", "axes must be a permutation of 0..3");
        seen[ax[i]] = true;
    }
    int64_t ne[kMaxDims];
    size_t nb[kMaxDims];
    int n_dims = a->n_dims;
    for (int i = 0; i < kMaxDims; ++i) {
        ne[ax[i]] = a->ne[i];
        nb[ax[i]] = a->nb[i];
        if (ax[i] != i) n_dims = std::max(n_dims, std::max(ax[i], i) + 1);
    }
    require_whole_blocks("permute", a, ne, nb, a->view_offs);
    require_dim0_kept("permute", a, ax[0]);
    return a->ctx->new_view(a, Op::PERMUTE, ne, nb, n_dims, 0);
}

Tensor* transpose(Tensor* a) {
    need(a, "transpose", "a");
    int64_t ne[kMaxDims] = {a->ne[1], a->ne[0], a->ne[2], a->ne[3]};
    size_t nb[kMaxDims] = {a->nb[1], a->nb[0], a->nb[2], a->nb[3]};
    require_whole_blocks("transpose", a, ne, nb, a->view_offs);
    require_dim0_kept("transpose", a, 1);
    return a->ctx->new_view(a, Op::TRANSPOSE, ne, nb, std::max(2, a->n_dims), 0);
}

#undef MB_REQUIRE

}  // namespace mb::ops
