// metal_backend.ops: graph construction. Axes and shapes are numpy order here; the core is ggml order.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bindings/tensor.h"
#include "core/errors.h"
#include "core/ops.h"

namespace mb::bindings {

namespace {

using T = TensorHandle;

Tensor* ptr(const T& t) { return t.get(); }

// numpy axis (negative allowed) of an n-dim tensor -> ggml dim.
int ggml_dim(int axis, int n_dims, const char* who) {
    if (axis < -n_dims || axis >= n_dims) {
        fail<OutOfRangeError>(who, "axis ", axis, " is out of range for ", n_dims, " dimension(s)");
    }
    if (axis < 0) axis += n_dims;
    return n_dims - 1 - axis;
}

// ggml's scale mode word from the Python names: nearest 0, bilinear 1, bicubic 2, | 256 align corners.
int scale_mode(const char* who, const std::string& mode, bool align_corners, bool antialias) {
    int m = 0;
    if (mode == "nearest") {
        m = 0;
    } else if (mode == "bilinear") {
        m = 1;
    } else if (mode == "bicubic") {
        m = 2;
    } else {
        fail<InvalidArgumentError>(who, "mode \"", mode, "\" is not supported; modes: \"nearest\", \"bilinear\", "
                                   "\"bicubic\"");
    }
    if (antialias && m != 1) {
        fail<InvalidArgumentError>(who, "antialias applies to mode \"bilinear\" only, got mode \"", mode, "\"");
    }
    return m | (align_corners ? 256 : 0) | (antialias ? 512 : 0);
}

T reshape_to(const T& a, py::object shape) {
    int64_t ne[kMaxDims];
    int n_dims;
    shape_to_ne(shape, "ops.reshape", ne, &n_dims);
    return handle(ops::reshape(ptr(a), ne, n_dims));
}

T view_of(const T& a, py::object shape, py::object strides, size_t offset) {
    int64_t ne[kMaxDims];
    int n_dims;
    shape_to_ne(shape, "ops.view", ne, &n_dims);
    size_t nb[kMaxDims];
    if (strides.is_none()) {
        // Rows keep the source's row stride, as ggml's view_2d/3d do with the source's nb.
        contiguous_strides(a->type, ne, nb);
        for (int i = 1; i < n_dims && i < a->n_dims; ++i) nb[i] = a->nb[i];
        for (int i = 1; i < kMaxDims; ++i) {
            if (i >= n_dims) nb[i] = nb[i - 1] * static_cast<size_t>(ne[i - 1]);
        }
    } else {
        if (!PySequence_Check(strides.ptr())) {
            throw py::type_error("[ops.view] strides must be a sequence of ints, got " +
                                 std::string(py::repr(strides)));
        }
        std::vector<int64_t> s;
        for (py::handle v : strides) s.push_back(to_int64(v, "ops.view", "stride"));
        if (static_cast<int>(s.size()) != n_dims) {
            fail<InvalidArgumentError>("ops.view", "strides ", std::string(py::repr(strides)),
                                       " must have one entry per dim of shape ",
                                       std::string(py::repr(shape)));
        }
        contiguous_strides(a->type, ne, nb);
        for (int i = 0; i < n_dims; ++i) {
            if (s[i] < 0) fail<InvalidArgumentError>("ops.view", "negative strides are not supported");
            nb[n_dims - 1 - i] = static_cast<size_t>(s[i]);
        }
        for (int i = n_dims; i < kMaxDims; ++i) nb[i] = nb[i - 1] * static_cast<size_t>(ne[i - 1]);
    }
    return handle(ops::view(ptr(a), ne, nb, n_dims, offset));
}

T permute_axes(const T& a, std::vector<int> axes) {
    const int n = a->n_dims;
    if (static_cast<int>(axes.size()) != n) {
        fail<InvalidArgumentError>("ops.permute", "axes must list each of the ", n,
                                   " axes of ", a->describe(), " once");
    }
    int ax[kMaxDims] = {0, 1, 2, 3};
    for (int j = 0; j < n; ++j) ax[ggml_dim(axes[j], n, "ops.permute")] = n - 1 - j;
    return handle(ops::permute(ptr(a), ax[0], ax[1], ax[2], ax[3]));
}

T unary_op(Op op, const T& a) { return handle(ops::unary(op, ptr(a))); }

}  // namespace

void init_ops(py::module_& root) {
    root.def("op_table", [] {
        py::list rows;
        for (int32_t i = 0; i < static_cast<int32_t>(Op::COUNT); ++i) {
            const OpInfo& r = op_info(static_cast<Op>(i));
            rows.append(py::make_tuple(r.name, op_family_name(r.family), op_kind_name(r.kind), r.py));
        }
        return rows;
    }, "The table of ops (shaders/op_table.h): (name, family, kind, python name) per op, in enum order.");
    py::module_ m = root.def_submodule("ops", "Graph construction: ggml's ops over Tensors of one Context.");

    m.def("add", [](T a, T b) { return handle(ops::add(ptr(a), ptr(b))); },
          py::arg("a"), py::arg("b"), "a + b, b broadcast over a.");
    m.def("sub", [](T a, T b) { return handle(ops::sub(ptr(a), ptr(b))); },
          py::arg("a"), py::arg("b"), "a - b, b broadcast over a.");
    m.def("mul", [](T a, T b) { return handle(ops::mul(ptr(a), ptr(b))); },
          py::arg("a"), py::arg("b"), "a * b, b broadcast over a.");
    m.def("div", [](T a, T b) { return handle(ops::div(ptr(a), ptr(b))); },
          py::arg("a"), py::arg("b"), "a / b, b broadcast over a.");
    m.def("scale", [](T a, float s, float b) { return handle(ops::scale(ptr(a), s, b)); }, py::arg("a"), py::arg("s"),
          py::arg("b") = 0.0f, "a*s + b.");
    m.def("clamp", [](T a, float lo, float hi) { return handle(ops::clamp(ptr(a), lo, hi)); }, py::arg("a"),
          py::arg("min"), py::arg("max"));

    // The MAP rows of the table of ops: one f32 input, no parameters.
    const std::pair<const char*, Op> unaries[] = {
#define MB_OP(NAME, FAMILY, KIND, PY) MB_BIND_##KIND(NAME, PY)
#define MB_BIND_MAP(NAME, PY) {PY, Op::NAME},
#define MB_BIND_EW(NAME, PY)
#define MB_BIND_OP(NAME, PY)
#define MB_BIND_VIEW(NAME, PY)
#include "op_table.h"
#undef MB_BIND_MAP
#undef MB_BIND_EW
#undef MB_BIND_OP
#undef MB_BIND_VIEW
    };
    for (const auto& [name, op] : unaries) {
        Op o = op;
        m.def(name, [o](T a) { return unary_op(o, a); }, py::arg("a"),
              (std::string("Element-wise ") + name + ".").c_str());
    }

    m.def("leaky_relu", [](T a, float slope) { return handle(ops::leaky_relu(ptr(a), slope)); }, py::arg("a"),
          py::arg("negative_slope") = 0.01f, "x if x > 0 else negative_slope * x.");
    m.def("xielu", [](T a, float alpha_n, float alpha_p, float beta, float eps) {
        return handle(ops::xielu(ptr(a), alpha_n, alpha_p, beta, eps));
    }, py::arg("a"), py::arg("alpha_n") = 0.8f, py::arg("alpha_p") = 0.8f, py::arg("beta") = 0.5f,
       py::arg("eps") = -1e-6f,
       "xIELU (ggml_xielu): with an = beta + softplus(alpha_n), ap = softplus(alpha_p): x > 0: ap x^2 + beta x, "
       "else (expm1(min(x, eps)) - x) an + beta x.");
    // The Glu rows: NAME(a, swapped=False) over the halves of the last axis, NAME_split(a, b).
    const std::pair<const char*, Op> glus[] = {
#define MB_OP(NAME, FAMILY, KIND, PY)
#define MB_GLU(NAME, PY) {PY, Op::NAME},
#include "op_table.h"
    };
    for (const auto& [name, op] : glus) {
        Op o = op;
        if (o == Op::SWIGLU_OAI) continue;
        m.def(name, [o](T a, bool swapped) { return handle(ops::glu(o, ptr(a), nullptr, swapped)); }, py::arg("a"),
              py::arg("swapped") = false,
              (std::string("ggml_") + name + ": the last axis split in halves x | g "
               "(swapped: g | x); act(x) * g.").c_str());
        m.def((std::string(name) + "_split").c_str(),
              [o](T a, T b) { return handle(ops::glu(o, ptr(a), ptr(b), false)); },
              py::arg("a"), py::arg("b"), (std::string("ggml_") + name + "_split: act(a) * b.").c_str());
    }
    m.def("swiglu_oai", [](T a, T b, float alpha, float limit, bool swapped) {
        return handle(ops::glu(Op::SWIGLU_OAI, ptr(a), ptr(b), swapped, alpha, limit));
    }, py::arg("a"), py::arg("b") = py::none(), py::arg("alpha") = 1.702f, py::arg("limit") = 7.0f,
       py::arg("swapped") = false,
       "gpt-oss's SwiGLU: x = min(a, limit), g = clamp(b, -limit, limit): x * sigmoid(alpha * x) * (g + 1). "
       "b None: the halves of a's last axis.");
    m.def("arange", [](std::shared_ptr<Context> ctx, float start, float stop, float step) {
        return handle(ops::arange(ctx.get(), start, stop, step));
    }, py::arg("ctx"), py::arg("start"), py::arg("stop"), py::arg("step") = 1.0f,
       "f32 1-D: start, start + step, ... below stop (ggml_arange).");
    m.def("argsort", [](T a, bool descending) { return handle(ops::argsort(ptr(a), descending)); }, py::arg("a"),
          py::arg("descending") = false, "i32 indices sorting each row (last axis); ties in index order, NaNs last.");
    m.def("mul_mat_id", [](T as, T b, T ids) { return handle(ops::mul_mat_id(ptr(as), ptr(b), ptr(ids))); },
          py::arg("as_"), py::arg("b"), py::arg("ids"),
          "Expert routing (ggml_mul_mat_id): as_ (E,N,K), b (T,n_b,K) f32, ids (T,n_used) i32 -> (T,n_used,N) f32; "
          "out[t, e] = as_[ids[t, e]] @ b[t, e % n_b].");
    m.def("add_id", [](T a, T b, T ids) { return handle(ops::add_id(ptr(a), ptr(b), ptr(ids))); }, py::arg("a"),
          py::arg("b"), py::arg("ids"), "a (n2,n1,C) + b[ids] with b (n,C) and i32 ids (n2,n1): a per-row bias.");
    m.def("group_norm", [](T a, int n_groups, float eps) { return handle(ops::group_norm(ptr(a), n_groups, eps)); },
          py::arg("a"), py::arg("n_groups"), py::arg("eps") = 1e-6f,
          "a (N,C,H,W): channels in n_groups groups, each normalised over its channels and H, W (ggml order: dim 2).");
    m.def("timestep_embedding", [](T t, int dim, int max_period) {
        return handle(ops::timestep_embedding(ptr(t), dim, max_period));
    }, py::arg("timesteps"), py::arg("dim"), py::arg("max_period") = 10000,
       "Sinusoidal embedding of f32 timesteps (N,) -> (N, dim): cos then sin halves.");
    m.def("conv_transpose_1d", [](T kernel, T data, int stride, int padding, int dilation) {
        return handle(ops::conv_transpose_1d(ptr(kernel), ptr(data), stride, padding, dilation));
    }, py::arg("kernel"), py::arg("data"), py::arg("stride") = 1, py::arg("padding") = 0, py::arg("dilation") = 1,
       "kernel (IC,OC,K) f32/f16, data (N,IC,L) f32 -> (N,OC,OL) f32, "
       "OL = (L-1)*stride - 2*padding + dilation*(K-1) + 1.");
    m.def("pool_2d", [](T a, const std::string& op, int k0, int k1, int s0, int s1, int p0, int p1) {
        if (op != "max" && op != "avg") {
            fail<InvalidArgumentError>("ops.pool_2d", "op must be \"max\" or \"avg\", got \"", op, "\"");
        }
        return handle(ops::pool_2d(ptr(a), op == "avg", k0, k1, s0, s1, p0, p1));
    }, py::arg("a"), py::arg("op"), py::arg("k0"), py::arg("k1"), py::arg("s0"), py::arg("s1"), py::arg("p0") = 0,
       py::arg("p1") = 0, "a (N,C,H,W): k0/s0/p0 along W, k1/s1/p1 along H; avg divides by k0*k1 (ggml).");
    m.def("upscale", [](T a, int scale_factor, const std::string& mode, bool align_corners, bool antialias) {
        return handle(
            ops::upscale(ptr(a), scale_factor, scale_mode("ops.upscale", mode, align_corners, antialias)));
    }, py::arg("a"), py::arg("scale_factor"), py::arg("mode") = "nearest", py::arg("align_corners") = false,
       py::arg("antialias") = false,
       "The last two axes scale_factor times larger; mode \"nearest\", \"bilinear\" or \"bicubic\" (ggml's); "
       "antialias (bilinear only): torch's antialias=True triangle filter.");
    m.def("interpolate", [](T a, py::object shape, const std::string& mode, bool align_corners, bool antialias) {
        int64_t ne[kMaxDims];
        int n_dims;
        shape_to_ne(shape, "ops.interpolate", ne, &n_dims);
        return handle(ops::interpolate(ptr(a), ne, scale_mode("ops.interpolate", mode, align_corners, antialias)));
    }, py::arg("a"), py::arg("shape"), py::arg("mode") = "nearest", py::arg("align_corners") = false,
       py::arg("antialias") = false,
       "a resampled to a numpy-order shape (ggml_interpolate); bilinear and bicubic act on the last two axes; "
       "antialias (bilinear only, ggml's GGML_SCALE_FLAG_ANTIALIAS): a triangle filter as wide as the source "
       "pixels one output pixel covers, as torch's antialias=True.");
    m.def("ssm_conv", [](T sx, T c) { return handle(ops::ssm_conv(ptr(sx), ptr(c))); }, py::arg("sx"), py::arg("c"),
          "Mamba's conv: sx (n_s, d_inner, d_conv-1+n_t), c (d_inner, d_conv) -> (n_s, n_t, d_inner).");
    m.def("ssm_scan", [](T s, T x, T dt, T A, T B, T C, T ids) {
        return handle(ops::ssm_scan(ptr(s), ptr(x), ptr(dt), ptr(A), ptr(B), ptr(C), ptr(ids)));
    }, py::arg("s"), py::arg("x"), py::arg("dt"), py::arg("A"), py::arg("B"), py::arg("C"), py::arg("ids"),
       "Mamba's selective scan (ggml_ssm_scan), numpy order: s (n_rs, n_head, head_dim, d_state), x (n_s, n_t, "
       "n_head, head_dim), dt (n_s, n_t, n_head), A (n_head, d_state or 1), B = C (n_s, n_t, n_group, d_state), "
       "ids (n_s,) i32 -> 1-D f32: y (x's size), then the final state of each sequence.");
    m.def("rwkv_wkv6", [](T k, T v, T r, T tf, T td, T state) {
        return handle(ops::rwkv_wkv6(ptr(k), ptr(v), ptr(r), ptr(tf), ptr(td), ptr(state)));
    }, py::arg("k"), py::arg("v"), py::arg("r"), py::arg("tf"), py::arg("td"), py::arg("state"),
       "RWKV-6's WKV (ggml_rwkv_wkv6): k, v, r, td (T, H, S), tf (H, S), state (n_seqs, S*S*H) -> "
       "(T + S*n_seqs, S*H): y rows, then the new states.");
    m.def("rwkv_wkv7", [](T r, T w, T k, T v, T a, T b, T state) {
        return handle(ops::rwkv_wkv7(ptr(r), ptr(w), ptr(k), ptr(v), ptr(a), ptr(b), ptr(state)));
    }, py::arg("r"), py::arg("w"), py::arg("k"), py::arg("v"), py::arg("a"), py::arg("b"), py::arg("state"),
       "RWKV-7's WKV (ggml_rwkv_wkv7): r, w, k, v, a, b (T, H, S), state (n_seqs, S*S*H) -> "
       "(T + S*n_seqs, S*H): y rows, then the new states.");
    m.def("acc", [](T a, T b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
        return handle(ops::acc(ptr(a), ptr(b), nb1, nb2, nb3, offset));
    }, py::arg("a"), py::arg("b"), py::arg("nb1"), py::arg("nb2"), py::arg("nb3"), py::arg("offset") = 0,
       "ggml_acc: a copy of a with b added into the view at byte offset, byte strides nb1..nb3 (ggml order).");
    m.def("l2_norm", [](T a, float eps) { return handle(ops::l2_norm(ptr(a), eps)); }, py::arg("a"),
          py::arg("eps") = 1e-6f, "x / max(||x||_2, eps) over each row (last axis).");
    m.def("norm", [](T a, float eps) { return handle(ops::norm(ptr(a), eps)); }, py::arg("a"), py::arg("eps") = 1e-5f,
          "(x - mean) / sqrt(var + eps) over each row (last axis).");
    m.def("rms_norm", [](T a, float eps) { return handle(ops::rms_norm(ptr(a), eps)); }, py::arg("a"),
          py::arg("eps") = 1e-6f, "x / sqrt(mean(x^2) + eps) over each row (last axis).");
    m.def("soft_max", [](T a) { return handle(ops::soft_max_ext(ptr(a), nullptr, 1.0f, 0.0f)); }, py::arg("a"),
          "softmax over each row (last axis).");
    m.def("soft_max_ext", [](T a, T mask, float scale, float max_bias, T sinks) {
        return handle(ops::soft_max_ext(ptr(a), ptr(mask), scale, max_bias, ptr(sinks)));
    }, py::arg("a"), py::arg("mask") = py::none(), py::arg("scale") = 1.0f, py::arg("max_bias") = 0.0f,
       py::arg("sinks") = py::none(), "softmax(a*scale + slope*mask) per row; ALiBi slopes when max_bias > 0.");
    m.def("sum_rows", [](T a) { return handle(ops::sum_rows(ptr(a))); }, py::arg("a"),
          "Sum over the last axis (kept, size 1).");
    m.def("mean", [](T a) { return handle(ops::mean(ptr(a))); }, py::arg("a"),
          "Mean over the last axis (kept, size 1).");
    m.def("argmax", [](T a) { return handle(ops::argmax(ptr(a))); }, py::arg("a"), "i32 index of the max of each row.");
    m.def("flash_attn_ext", [](T q, T k, T v, T mask, float scale, float max_bias, float softcap) {
        return handle(ops::flash_attn_ext(ptr(q), ptr(k), ptr(v), ptr(mask), scale, max_bias, softcap));
    }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask") = py::none(), py::arg("scale") = 1.0f,
       py::arg("max_bias") = 0.0f, py::arg("softcap") = 0.0f,
       "Attention: q (B,H,n_q,D) f32, k/v (B,H_kv,n_kv,D), mask (.., n_q_padded, n_kv) f16 -> (B,n_q,H,Dv) f32.");
    m.def("mul_mat", [](T a, T b, const std::string& compute_type) {
        if (compute_type != "float32" && compute_type != "int8") {
            fail<InvalidArgumentError>("ops.mul_mat", "compute_type must be \"float32\" or \"int8\", got \"",
                                       compute_type, "\"");
        }
        return handle(ops::mul_mat(ptr(a), ptr(b), compute_type == "int8"));
    }, py::arg("a"), py::arg("b"), py::arg("compute_type") = "float32",
       "b @ a.T over the last two axes, a broadcast over the leading ones -> f32. compute_type \"int8\" "
       "(quantized a only): on the CPU the activations are quantized to 8-bit blocks for every token count "
       "(byte dot products in the many-token path too); \"float32\" keeps that path in f32.");
    m.def("dup", [](T a) { return handle(ops::dup(ptr(a))); }, py::arg("a"), "A contiguous copy.");
    m.def("cont", [](T a) { return handle(ops::cont(ptr(a))); }, py::arg("a"), "A contiguous copy of a view.");
    m.def("cpy", [](T a, T b) { return handle(ops::cpy(ptr(a), ptr(b))); }, py::arg("a"), py::arg("b"),
          "Writes a (converted to b's type) into b; returns a view of b.");
    m.def("get_rows", [](T a, T idx) { return handle(ops::get_rows(ptr(a), ptr(idx))); }, py::arg("a"), py::arg("idx"),
          "Rows of a picked by i32 idx, as f32.");
    m.def("set_rows", [](T dst, T src, T idx) { return handle(ops::set_rows(ptr(dst), ptr(src), ptr(idx))); },
          py::arg("dst"), py::arg("src"), py::arg("idx"),
          "Writes rows of src into rows idx of dst; returns a view of dst.");
    m.def("im2col", [](T kernel, T data, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2d, Type dst_type) {
        return handle(ops::im2col(ptr(kernel), ptr(data), s0, s1, p0, p1, d0, d1, is_2d, dst_type));
    }, py::arg("kernel"), py::arg("data"), py::arg("s0"), py::arg("s1"), py::arg("p0"), py::arg("p1"), py::arg("d0"),
       py::arg("d1"), py::arg("is_2d"), py::arg("dst_type") = Type::F16, "ggml's im2col.");
    m.def("conv_1d", [](T kernel, T data, int stride, int padding, int dilation) {
        return handle(ops::conv_1d(ptr(kernel), ptr(data), stride, padding, dilation));
    }, py::arg("kernel"), py::arg("data"), py::arg("stride") = 1, py::arg("padding") = 0, py::arg("dilation") = 1,
       "kernel (OC,IC,K), data (N,IC,L) -> (N,OC,OL) f32, as im2col then mul_mat.");
    m.def("concat", [](T a, T b, int axis) {
        int n = std::max(a->n_dims, b->n_dims);
        return handle(ops::concat(ptr(a), ptr(b), ggml_dim(axis, n, "ops.concat")));
    }, py::arg("a"), py::arg("b"), py::arg("axis") = 0, "Concatenation along a numpy-order axis.");
    m.def("repeat", [](T a, T b) { return handle(ops::repeat(ptr(a), ptr(b))); }, py::arg("a"), py::arg("b"),
          "a tiled to b's shape.");
    m.def("pad", [](T a, std::vector<int> pads) {
        if (static_cast<int>(pads.size()) != a->n_dims) {
            fail<InvalidArgumentError>("ops.pad", "give one padding per axis of ", a->describe(),
                                       ", got ", pads.size());
        }
        int p[kMaxDims] = {0, 0, 0, 0};
        for (int j = 0; j < a->n_dims; ++j) p[a->n_dims - 1 - j] = pads[j];
        return handle(ops::pad(ptr(a), p[0], p[1], p[2], p[3]));
    }, py::arg("a"), py::arg("pads"), "Zeros appended at the end of each axis (numpy order).");
    m.def("pad_reflect_1d", [](T a, int p0, int p1) { return handle(ops::pad_reflect_1d(ptr(a), p0, p1)); },
          py::arg("a"), py::arg("p0"), py::arg("p1"),
          "The last axis reflect-padded: p0 elements before, p1 after, mirrored about the edge elements "
          "(ggml_pad_reflect_1d; numpy's mode='reflect'); p0, p1 in [0, n - 1].");
    m.def("rope", [](T a, T pos, int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale,
                     float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
        return handle(ops::rope(ptr(a), ptr(pos), n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                                attn_factor, beta_fast, beta_slow));
    }, py::arg("a"), py::arg("pos"), py::arg("n_dims"), py::arg("mode") = 0, py::arg("n_ctx_orig") = 0,
       py::arg("freq_base") = 10000.0f, py::arg("freq_scale") = 1.0f, py::arg("ext_factor") = 0.0f,
       py::arg("attn_factor") = 1.0f, py::arg("beta_fast") = 32.0f, py::arg("beta_slow") = 1.0f,
       "Rotary embedding; a (B,T,H,D) with pos i32 (T,). mode 0 normal, 2 neox.");
    m.def("reshape", &reshape_to, py::arg("a"), py::arg("shape"),
          "A view of contiguous a with a new numpy-order shape.");
    m.def("view", &view_of, py::arg("a"), py::arg("shape"), py::arg("strides") = py::none(), py::arg("offset") = 0,
          "A view of a's memory: numpy-order shape and byte strides, at a byte offset.");
    m.def("permute", &permute_axes, py::arg("a"), py::arg("axes"),
          "A view with axes reordered like numpy.transpose(a, axes).");
    m.def("transpose", [](T a) { return handle(ops::transpose(ptr(a))); }, py::arg("a"),
          "A view with the last two axes swapped.");

    // The view ops as Tensor methods too, as API.md lists them.
    py::object cls = py::type::of<Tensor>();
    cls.attr("reshape") = py::cpp_function([](T a, py::args shape) {
        return reshape_to(a, shape.size() == 1 && !PyLong_Check(shape[0].ptr())
                          ? py::object(shape[0]) : py::object(shape));
    }, py::is_method(cls), py::name("reshape"), "a.reshape(*shape) or a.reshape(shape): see ops.reshape.");
    cls.attr("view") = py::cpp_function(&view_of, py::is_method(cls), py::name("view"), py::arg("shape"),
                                        py::arg("strides") = py::none(), py::arg("offset") = 0, "See ops.view.");
    cls.attr("permute") = py::cpp_function([](T a, py::args axes) {
        py::object list = axes.size() == 1 && !PyLong_Check(axes[0].ptr()) ? py::object(axes[0]) : py::object(axes);
        if (!PySequence_Check(list.ptr())) {
            throw py::type_error("[ops.permute] axes must be ints or one sequence of ints, got " +
                                 std::string(py::repr(list)));
        }
        std::vector<int> ax;
        for (py::handle v : list) {
            const int64_t axis = to_int64(v, "ops.permute", "axis");
            if (axis < -kMaxDims || axis >= kMaxDims) {
                fail<InvalidArgumentError>("ops.permute", "axis ", axis, " is out of range for ", a->describe());
            }
            ax.push_back(static_cast<int>(axis));
        }
        return permute_axes(a, ax);
    }, py::is_method(cls), py::name("permute"), "a.permute(*axes) or a.permute(axes): like numpy.transpose.");
    cls.attr("transpose") = py::cpp_function([](T a) { return handle(ops::transpose(ptr(a))); }, py::is_method(cls),
                                             py::name("transpose"), "Swaps the last two axes (a view).");
}

}  // namespace mb::bindings
