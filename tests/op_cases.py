"""The table of op conformance cases: op x type x shape, each with a float64 numpy reference.

Every case names its inputs (shape in numpy order, mb type, how to draw values), builds its graph with
mb.ops from the input tensors, and gives either a reference computed in float64 from the values the
inputs actually hold after `set` (so f16/bf16/quantized rounding of the inputs is not counted against
the op) compared by normalised mean squared error, or the exact bytes the output must hold.

test_conformance.py runs every case on every device. Shapes are odd on purpose (rows not multiples of
4 or 32), broadcast, taken through transposed/permuted views, empty, and a few are Whisper-sized.

Thresholds (NMSE = sum((out - ref)^2) / sum(ref^2)):
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

import metal_backend as mb

# Data movement (copies, gathers, concat, im2col into f32): every value must come through unchanged.
EXACT = 0.0
# One f32 rounding per element: relative error <= 2^-24, so NMSE <= ~4e-15; 1e-12 keeps a margin for a
# fused multiply-add or a reciprocal instead of a division.
ARITH = 1e-12
# exp/tanh/erf/sin/log in f32 (a polynomial exp on the CPU, fast-math on GPUs) stay within ~1e-6
# relative of float64, i.e. NMSE <= 1e-12; 1e-10 leaves room while still catching a wrong formula
# (a GELU with the wrong constant is off by ~1e-4 -> NMSE ~1e-8).
TRANSC = 1e-10
# Row reductions and normalisations: sums of up to a few thousand f32 terms have relative error
# ~sqrt(n) * 2^-24 ~ 1e-6, NMSE ~1e-12.
ROWS = 1e-10
# ROPE: angles pos * base^(-2i/n) reach thousands of radians; computed in f32 (as ggml and Metal do)
# they are off by up to ~1e-4 rad, NMSE up to ~1e-8. A wrong frequency or pairing is off by O(1).
ROPE = 1e-7
# Results stored in f16: relative rounding error <= 2^-11, NMSE <= 1e-7.
F16_OUT = 1e-6
# MUL_MAT with f32/f16 weights: GPU tiles hold the weights and activations in half precision, and a
# CPU may round the activations to f16 for f16 weights (relative 2^-11 per term): NMSE ~1e-7.
MM_F = 1e-6
# bf16 weights: activations may be rounded to bf16 for the dot product (relative 2^-8): NMSE ~5e-6.
MM_BF16 = 5e-5
# Quantized weights: activations are quantized to 8 bits per block as ggml does (NMSE ~1e-5 to 1e-4
# against the exact product of the dequantized weights); 5e-4 is ggml's own threshold.
MM_Q = 5e-4
# FLASH_ATTN_EXT: Metal takes Q.K^T and P.V with half-precision operands (ggml's threshold, 5e-4);
# the CPU converts K/V exactly and stays near 1e-12.
FA = 5e-4
# FLASH_ATTN_EXT with bf16 keys and values: the scaled query and the softmax weights are rounded to
# bf16 (relative 2^-9 each) for the products.
FA_BF16 = 5e-5


@dataclass(frozen=True)
class In:
    """One input tensor: numpy-order shape, mb type, and how its values are drawn.

    gen: "normal" (standard normal), "positive" (U(0.1, 4)), "uniform" (U(-1, 1)), "zeros",
    "index:N" (integers in [0, N)), "perm:N" (distinct integers in [0, N) along the last axis), "mask" (U(-2, 0.5)
    with a -inf every 7th entry), "causal:OFF"
    (0, or -inf where key j > query i + OFF; the last two axes are (query, key)), "masked_rows" ("mask"
    with, along the last two axes (query, key), every third query row -inf over all its keys and the
    next one -inf over its first half and one: fully masked rows, and rows whose first key tiles are).
    """

    shape: tuple
    type: Any = mb.f32
    gen: str = "normal"


@dataclass(frozen=True)
class Case:
    name: str
    op: str
    inputs: tuple
    build: Callable[..., Any]
    ref: Optional[Callable[..., np.ndarray]] = None
    nmse: float = 0.0
    # Instead of ref: the exact bytes the output must hold, from (stored values, stored raw bytes) of
    # the inputs, each a list in input order.
    ref_bytes: Optional[Callable[[list, list], bytes]] = None

    def __str__(self) -> str:
        return self.name


def draw(spec: In, rng: np.random.Generator) -> np.ndarray:
    shape = spec.shape
    gen = spec.gen
    if gen == "normal":
        return rng.standard_normal(shape).astype(np.float32)
    if gen == "positive":
        return rng.uniform(0.1, 4.0, shape).astype(np.float32)
    if gen == "uniform":
        return rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    if gen == "zeros":
        return np.zeros(shape, np.float32)
    if gen == "blocks":
        return grid_blocks(spec.type, shape, rng)
    if gen.startswith("perm:"):
        n = int(gen.split(":")[1])
        rows = [rng.permutation(n)[: shape[-1]] for _ in range(int(np.prod(shape[:-1])))]
        return np.array(rows, np.int32).reshape(shape)
    if gen.startswith("index:"):
        return rng.integers(0, int(gen.split(":")[1]), shape).astype(np.int32)
    if gen == "mask":
        m = rng.uniform(-2.0, 0.5, shape).astype(np.float32)
        m.reshape(-1)[::7] = -np.inf
        return m
    if gen == "masked_rows":
        m = rng.uniform(-2.0, 0.5, shape).astype(np.float32)
        m.reshape(-1)[::7] = -np.inf
        nkv = shape[-1]
        m[..., 0::3, :] = -np.inf
        m[..., 1::3, : nkv // 2 + 1] = -np.inf
        return m
    if gen.startswith("causal:"):
        off = int(gen.split(":")[1])
        nq, nkv = shape[-2], shape[-1]
        i = np.arange(nq)[:, None]
        j = np.arange(nkv)[None, :]
        m = np.where(j > i + off, -np.inf, 0.0).astype(np.float32)
        return np.broadcast_to(m, shape).copy()
    raise ValueError(f"unknown generator {gen!r}")


def grid_blocks(t, shape, rng: np.random.Generator) -> np.ndarray:
    """Raw bytes of random blocks of type t for a tensor of `shape` (the grid types, which nothing
    quantizes to): random codes, signs and sub-scales, the f16 scale drawn from U(0.001, 0.01)."""
    n_blocks = int(np.prod(shape)) // t.block_size
    raw = rng.integers(0, 256, (n_blocks, t.type_size), dtype=np.uint8)
    d = rng.uniform(0.001, 0.01, n_blocks).astype(np.float16).view(np.uint16)
    if t.name == "iq1_m":  # the f16 scale is the top nibbles of the four scale words (bytes 48..55)
        words = raw[:, 48:56].copy().view(np.uint16)
        for k in range(4):
            words[:, k] = (words[:, k] & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12)
        raw[:, 48:56] = words.view(np.uint8)
    else:
        raw[:, 0:2] = d.reshape(-1, 1).view(np.uint8)
    return raw.reshape(-1)


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


# ------------------------------------------------------------------------------------------ helpers

def tile_to(b: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """b repeated by modulo to `shape` (ggml's broadcast: each dim of b divides the target's)."""
    b = b.reshape((1,) * (len(shape) - b.ndim) + b.shape)
    return np.tile(b, [s // d if d else 1 for s, d in zip(shape, b.shape)])


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * x * (1.0 + 0.044715 * x * x)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2.0)))


UNARY = {
    "sqr": (lambda x: x * x, "normal"),
    "sqrt": (np.sqrt, "positive"),
    "log": (np.log, "positive"),
    "sin": (np.sin, "normal"),
    "cos": (np.cos, "normal"),
    "gelu": (gelu_tanh, "normal"),
    "gelu_erf": (gelu_erf, "normal"),
    "gelu_quick": (lambda x: x / (1.0 + np.exp(-1.702 * x)), "normal"),
    "silu": (lambda x: x / (1.0 + np.exp(-x)), "normal"),
    "relu": (lambda x: np.maximum(x, 0.0), "normal"),
    "tanh": (np.tanh, "normal"),
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), "normal"),
    "neg": (lambda x: -x, "normal"),
    "abs": (np.abs, "normal"),
    "exp": (np.exp, "normal"),
    "expm1": (np.expm1, "normal"),
    "sgn": (np.sign, "normal"),
    "step": (lambda x: (x > 0).astype(np.float64), "normal"),
    "elu": (lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))), "normal"),
    "hardswish": (lambda x: x * np.clip((x + 3.0) / 6.0, 0.0, 1.0), "normal"),
    "hardsigmoid": (lambda x: np.clip((x + 3.0) / 6.0, 0.0, 1.0), "normal"),
    "softplus": (lambda x: np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0)))), "normal"),
    "floor": (np.floor, "normal"),
    "ceil": (np.ceil, "normal"),
    # ggml's roundf: halves away from zero (numpy's round goes to even).
    "round": (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), "normal"),
    "trunc": (np.trunc, "normal"),
}
EXACT_UNARY = {"sqr", "neg", "abs", "relu", "sqrt", "sgn", "step", "floor", "ceil", "round", "trunc"}
# hardswish/hardsigmoid: a division and a product, two roundings.
ARITH_UNARY = {"hardswish", "hardsigmoid"}


def softplus_f32(x):
    x = np.float32(x)
    return x if x > 20 else np.float32(np.log(np.float32(1.0) + np.exp(x)))


def xielu_ref(x, alpha_n, alpha_p, beta, eps):
    an = float(np.float32(beta) + softplus_f32(alpha_n))
    ap = float(softplus_f32(alpha_p))
    eps = float(np.float32(eps))
    beta = float(np.float32(beta))
    return np.where(x > 0, ap * x * x + beta * x, (np.expm1(np.minimum(x, eps)) - x) * an + beta * x)


def alibi_slopes(n_head: int, max_bias: float) -> np.ndarray:
    if max_bias <= 0:
        return np.ones(n_head)
    n_log2 = 2 ** int(math.floor(math.log2(n_head)))
    m0 = 2.0 ** (-max_bias / n_log2)
    m1 = 2.0 ** (-(max_bias / 2.0) / n_log2)
    h = np.arange(n_head)
    return np.where(h < n_log2, m0 ** (h + 1), m1 ** (2 * (h - n_log2) + 1))


def softmax_ref(x, mask=None, scale=1.0, max_bias=0.0, sinks=None):
    """x (..., H, rows, n) in numpy order; mask (..., rows_m >= rows, n) broadcast over the two
    leading axes by modulo; ALiBi slope per head (axis -3); sinks (H,)."""
    x4 = x.reshape((1,) * (4 - x.ndim) + x.shape)
    w = x4 * scale
    if mask is not None:
        m4 = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)[:, :, : x4.shape[2], :]
        m4 = tile_to(m4, x4.shape)
        slopes = alibi_slopes(x4.shape[1], max_bias)[None, :, None, None]
        with np.errstate(invalid="ignore"):
            w = w + slopes * m4
    mx = w.max(axis=-1, keepdims=True)
    if sinks is not None:
        mx = np.maximum(mx, sinks[None, :, None, None])
    e = np.exp(w - mx)
    s = e.sum(axis=-1, keepdims=True)
    if sinks is not None:
        s = s + np.exp(sinks[None, :, None, None] - mx)
    return (e / s).reshape(x.shape)


def flash_attn_ref(q, k, v, mask=None, scale=1.0, max_bias=0.0, softcap=0.0):
    """q (B, H, nq, D), k (B, Hkv, nkv, D), v (B, Hkv, nkv, Dv), mask (Bm, Hm, >= nq, nkv)
    -> (B, nq, H, Dv). Heads of k/v serve H/Hkv consecutive heads of q (ggml's grouping)."""
    B, H, nq, _ = q.shape
    r = H // k.shape[1]
    kk = np.repeat(k, r, axis=1)
    vv = np.repeat(v, r, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, kk) * scale
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    if mask is not None:
        m = tile_to(mask[:, :, :nq, :], s.shape)
        s = s + alibi_slopes(H, max_bias)[None, :, None, None] * m
    mx = s.max(axis=-1, keepdims=True)
    fully_masked = ~np.isfinite(mx)
    e = np.exp(s - np.where(fully_masked, 0.0, mx))
    e = np.where(fully_masked, 0.0, e)
    den = e.sum(axis=-1, keepdims=True)
    out = np.einsum("bhqk,bhkd->bhqd", e, vv) / np.where(den == 0, 1.0, den)
    return out.transpose(0, 2, 1, 3)


def mul_mat_ref(a, b):
    """out = b @ a^T; a's batch dims repeat over b's (each a matrix serves consecutive b matrices)."""
    a4 = a.reshape((1,) * (4 - a.ndim) + a.shape)
    b4 = b.reshape((1,) * (4 - b.ndim) + b.shape)
    a4 = np.repeat(np.repeat(a4, b4.shape[0] // a4.shape[0], axis=0), b4.shape[1] // a4.shape[1], axis=1)
    out = b4 @ np.swapaxes(a4, -1, -2)
    nd = max(a.ndim, b.ndim)
    return out.reshape(out.shape[4 - nd:])


def conv_out(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def im2col_1d_ref(data, k, s, p, d):
    """data (N, IC, L) -> (N, OL, IC*K)."""
    n, ic, length = data.shape
    ol = conv_out(length, k, s, p, d)
    padded = np.zeros((n, ic, length + 2 * p + d * k + s * ol))
    padded[:, :, p : p + length] = data
    out = np.zeros((n, ol, ic, k))
    for kk in range(k):
        idx = np.arange(ol) * s + kk * d
        out[:, :, :, kk] = padded[:, :, idx].transpose(0, 2, 1)
    return out.reshape(n, ol, ic * k)


def im2col_2d_ref(data, kh, kw, s0, s1, p0, p1, d0, d1):
    """data (N, IC, H, W) -> (N, OH, OW, IC*KH*KW)."""
    n, ic, h, w = data.shape
    oh = conv_out(h, kh, s1, p1, d1)
    ow = conv_out(w, kw, s0, p0, d0)
    out = np.zeros((n, oh, ow, ic, kh, kw))
    for y in range(oh):
        for x in range(ow):
            for ky in range(kh):
                for kx in range(kw):
                    iy = y * s1 + ky * d1 - p1
                    ix = x * s0 + kx * d0 - p0
                    if 0 <= iy < h and 0 <= ix < w:
                        out[:, y, x, :, ky, kx] = data[:, :, iy, ix]
    return out.reshape(n, oh, ow, ic * kh * kw)


def conv_1d_ref(kernel, data, s, p, d):
    """kernel (OC, IC, K), data (N, IC, L) -> (N, OC, OL)."""
    cols = im2col_1d_ref(data, kernel.shape[2], s, p, d)  # (N, OL, IC*K)
    return np.einsum("nlc,oc->nol", cols, kernel.reshape(kernel.shape[0], -1))


def to_f16(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float64)


def rope_ref(x, pos, n_dims, mode, n_ctx_orig=0, base=10000.0, freq_scale=1.0, ext_factor=0.0, attn_factor=1.0,
             beta_fast=32.0, beta_slow=1.0):
    """x (B, T, H, D), pos (T,). YaRN as ggml defines it."""
    half = n_dims // 2
    i = np.arange(half)
    extrap = pos[:, None] * base ** (-2.0 * i / n_dims)[None, :]  # (T, half)
    theta = freq_scale * extrap
    mscale = attn_factor
    if ext_factor != 0.0:
        def corr(n_rot):
            return n_dims * math.log(n_ctx_orig / (n_rot * 2 * math.pi)) / (2 * math.log(base))
        lo = max(0.0, math.floor(corr(beta_fast)))
        hi = min(n_dims - 1.0, math.ceil(corr(beta_slow)))
        y = (i - lo) / max(0.001, hi - lo)
        mix = (1.0 - np.clip(y, 0.0, 1.0)) * ext_factor
        theta = theta * (1 - mix) + extrap * mix
        mscale *= 1.0 + 0.1 * math.log(1.0 / freq_scale)
    c = (np.cos(theta) * mscale)[None, :, None, :]
    s = (np.sin(theta) * mscale)[None, :, None, :]
    out = x.copy()
    if mode == 0:
        x0, x1 = x[..., 0:n_dims:2], x[..., 1:n_dims:2]
        out[..., 0:n_dims:2] = x0 * c - x1 * s
        out[..., 1:n_dims:2] = x0 * s + x1 * c
    else:
        x0, x1 = x[..., :half], x[..., half:n_dims]
        out[..., :half] = x0 * c - x1 * s
        out[..., half:n_dims] = x0 * s + x1 * c
    return out


def quantized_bytes(values: np.ndarray, t) -> bytes:
    return bytes(mb.quantize(np.asarray(values, np.float32), t))


# ------------------------------------------------------------------------------------------ cases

CASES: list[Case] = []


def case(name, op, inputs, build, ref=None, nmse=0.0, ref_bytes=None):
    CASES.append(Case(name, op, tuple(inputs), build, ref, nmse, ref_bytes))


def binary_cases():
    ops = {
        "add": (mb.ops.add, np.add),
        "sub": (mb.ops.sub, np.subtract),
        "mul": (mb.ops.mul, np.multiply),
        "div": (mb.ops.div, np.divide),
    }
    shapes = [
        ("same", (5, 7, 33), (5, 7, 33)),
        ("row", (5, 7, 33), (33,)),
        ("col", (2, 3, 5, 33), (2, 3, 5, 1)),
        ("mid", (2, 3, 5, 33), (1, 3, 1, 33)),
        ("scalar", (4, 9), (1, 1)),
        ("modulo", (4, 10), (2, 5)),
        ("vec1", (1,), (1,)),
        ("long", (100003,), (1,)),
    ]
    for opname, (fn, npfn) in ops.items():
        gb = "positive" if opname == "div" else "normal"
        for label, sa, sb in shapes:
            case(f"{opname}/f32/{label}", opname.upper(), [In(sa), In(sb, gen=gb)],
                 lambda a, b, fn=fn: fn(a, b),
                 lambda a, b, npfn=npfn: npfn(a, tile_to(b, a.shape)), ARITH)
        case(f"{opname}/f32xf16/row", opname.upper(), [In((6, 45)), In((45,), mb.f16, gb)],
             lambda a, b, fn=fn: fn(a, b), lambda a, b, npfn=npfn: npfn(a, tile_to(b, a.shape)), ARITH)
        case(f"{opname}/f32/transposed", opname.upper(), [In((9, 13)), In((13, 9), gen=gb)],
             lambda a, b, fn=fn: fn(a.transpose(), b), lambda a, b, npfn=npfn: npfn(a.T, b), ARITH)
        case(f"{opname}/f32/permuted_both", opname.upper(), [In((3, 5, 7)), In((7, 3, 5), gen=gb)],
             lambda a, b, fn=fn: fn(a.permute(2, 0, 1), b.permute(0, 1, 2)),
             lambda a, b, npfn=npfn: npfn(a.transpose(2, 0, 1), b), ARITH)
        case(f"{opname}/f32/empty", opname.upper(), [In((0, 33)), In((1, 33), gen=gb)],
             lambda a, b, fn=fn: fn(a, b), lambda a, b, npfn=npfn: npfn(a, tile_to(b, a.shape)), ARITH)
    case("add/f32/whisper_bias", "ADD", [In((1500, 384)), In((384,))], mb.ops.add,
         lambda a, b: a + b, ARITH)
    case("add/f32/whisper_residual", "ADD", [In((1500, 384)), In((1500, 384))], mb.ops.add,
         lambda a, b: a + b, ARITH)


def unary_cases():
    for name, (npfn, gen) in UNARY.items():
        fn = getattr(mb.ops, name)
        thr = ARITH if name in EXACT_UNARY | ARITH_UNARY else TRANSC
        case(f"{name}/f32/rows", name.upper(), [In((3, 1003), gen=gen)], fn, npfn, thr)
        case(f"{name}/f32/4d", name.upper(), [In((2, 3, 5, 7), gen=gen)], fn, npfn, thr)
        case(f"{name}/f32/transposed", name.upper(), [In((17, 6), gen=gen)],
             lambda a, fn=fn: fn(a.transpose()), lambda a, npfn=npfn: npfn(a.T), thr)
        case(f"{name}/f32/empty", name.upper(), [In((0, 5), gen=gen)], fn, npfn, thr)
        # f16 in and out (ggml's f16 unary ops): computed in f32, rounded once to f16.
        case(f"{name}/f16/rows", name.upper(), [In((3, 257), mb.f16, gen)], fn, npfn, F16_OUT)
        case(f"{name}/f16/transposed", name.upper(), [In((9, 6), mb.f16, gen)],
             lambda a, fn=fn: fn(a.transpose()), lambda a, npfn=npfn: npfn(a.T), F16_OUT)
    # Wide range for the exp-based ones: tails of exp, saturation of tanh/sigmoid.
    for name in ("exp", "tanh", "sigmoid", "gelu", "silu", "gelu_erf", "elu", "softplus", "hardswish", "round"):
        npfn = UNARY[name][0]
        case(f"{name}/f32/wide", name.upper(), [In((7, 129))],
             lambda a, name=name: getattr(mb.ops, name)(mb.ops.scale(a, 12.0)),
             lambda a, npfn=npfn: npfn(a * 12.0), TRANSC)
    for label, shape, slope in [("rows", (5, 37), 0.01), ("4d", (2, 3, 4, 9), 0.2)]:
        case(f"leaky_relu/f32/{label}", "LEAKY_RELU", [In(shape)],
             lambda a, slope=slope: mb.ops.leaky_relu(a, slope),
             lambda a, slope=slope: np.where(a > 0, a, a * slope), ARITH)
    for label, shape, (an, ap, beta, eps) in [("rows", (5, 37), (0.8, 0.8, 0.5, -1e-6)),
                                              ("4d", (2, 3, 4, 9), (-0.3, 1.7, 0.25, -0.01))]:
        case(f"xielu/f32/{label}", "XIELU", [In(shape)],
             lambda a, p=(an, ap, beta, eps): mb.ops.xielu(mb.ops.scale(a, 3.0), *p),
             lambda a, p=(an, ap, beta, eps): xielu_ref(a * 3.0, *p), TRANSC)
    case("xielu/f16/rows", "XIELU", [In((4, 33), mb.f16)], lambda a: mb.ops.xielu(a, -0.3, 1.7, 0.25, -0.01),
         lambda a: xielu_ref(a, -0.3, 1.7, 0.25, -0.01), F16_OUT)
    case("scale/f16/rows", "SCALE", [In((5, 37), mb.f16)], lambda a: mb.ops.scale(a, 0.7, 0.5),
         lambda a: a * 0.7 + 0.5, F16_OUT)
    case("xielu/f32/transposed", "XIELU", [In((9, 4))], lambda a: mb.ops.xielu(a.transpose()),
         lambda a: xielu_ref(a.T, 0.8, 0.8, 0.5, -1e-6), TRANSC)
    case("leaky_relu/f32/transposed", "LEAKY_RELU", [In((9, 4))], lambda a: mb.ops.leaky_relu(a.transpose(), 0.1),
         lambda a: np.where(a.T > 0, a.T, a.T * 0.1), ARITH)
    case("gelu/f32/whisper_mlp", "GELU", [In((1500, 1536))], mb.ops.gelu, gelu_tanh, TRANSC)
    for label, shape, s, b in [("rows", (5, 37), 0.7, 0.0), ("bias", (2, 3, 33), -1.5, 0.25),
                               ("single", (1,), 3.0, 1.0)]:
        case(f"scale/f32/{label}", "SCALE", [In(shape)], lambda a, s=s, b=b: mb.ops.scale(a, s, b),
             lambda a, s=s, b=b: a * s + b, ARITH)
    case("scale/f32/transposed", "SCALE", [In((9, 4))], lambda a: mb.ops.scale(a.transpose(), 2.0, 1.0),
         lambda a: a.T * 2.0 + 1.0, ARITH)
    for label, shape, lo, hi in [("rows", (5, 37), -0.5, 0.75), ("4d", (2, 2, 3, 9), 0.0, 1.0)]:
        case(f"clamp/f32/{label}", "CLAMP", [In(shape)], lambda a, lo=lo, hi=hi: mb.ops.clamp(a, lo, hi),
             lambda a, lo=lo, hi=hi: np.clip(a, lo, hi), EXACT)


GLU = {
    "reglu": lambda x: np.maximum(x, 0.0),
    "geglu": gelu_tanh,
    "swiglu": lambda x: x / (1.0 + np.exp(-x)),
    "geglu_erf": gelu_erf,
    "geglu_quick": lambda x: x / (1.0 + np.exp(-1.702 * x)),
}


def swiglu_oai_ref(x, g, alpha, limit):
    x = np.minimum(x, limit)
    g = np.clip(g, -limit, limit)
    return x / (1.0 + np.exp(-alpha * x)) * (g + 1.0)


def glu_cases():
    for name, act in GLU.items():
        fn = getattr(mb.ops, name)
        split = getattr(mb.ops, name + "_split")
        op = name.upper()
        thr = ARITH if name == "reglu" else TRANSC
        for label, shape in [("rows", (5, 2 * 37)), ("4d", (2, 3, 2, 2 * 9)), ("whisper", (1500, 2 * 384))]:
            h = shape[-1] // 2
            case(f"{name}/f32/{label}", op, [In(shape)], fn,
                 lambda a, act=act, h=h: act(a[..., :h]) * a[..., h:], thr)
        case(f"{name}/f32/swapped", op, [In((4, 2 * 33))], lambda a, fn=fn: fn(a, swapped=True),
             lambda a, act=act: act(a[..., 33:]) * a[..., :33], thr)
        case(f"{name}/f32/split", op, [In((6, 41)), In((6, 41))], split, lambda a, b, act=act: act(a) * b, thr)
        case(f"{name}/f32/split_transposed", op, [In((13, 7)), In((7, 13))],
             lambda a, b, split=split: split(a.transpose(), b), lambda a, b, act=act: act(a.T) * b, thr)
        case(f"{name}/f32/empty", op, [In((0, 8))], fn, lambda a, act=act: act(a[..., :4]) * a[..., 4:], thr)
        case(f"{name}/f16/rows", op, [In((5, 2 * 37), mb.f16)], fn,
             lambda a, act=act: act(a[..., :37]) * a[..., 37:], F16_OUT)
        case(f"{name}/f16/split_transposed", op, [In((13, 7), mb.f16), In((7, 13), mb.f16)],
             lambda a, b, split=split: split(a.transpose(), b), lambda a, b, act=act: act(a.T) * b, F16_OUT)
    case("swiglu_oai/f32/split", "SWIGLU_OAI", [In((7, 45)), In((7, 45))],
         lambda a, b: mb.ops.swiglu_oai(a, b, 1.702, 1.5), lambda a, b: swiglu_oai_ref(a, b, 1.702, 1.5), TRANSC)
    case("swiglu_oai/f16/split", "SWIGLU_OAI", [In((3, 45), mb.f16), In((3, 45), mb.f16)],
         lambda a, b: mb.ops.swiglu_oai(a, b, 1.702, 1.5), lambda a, b: swiglu_oai_ref(a, b, 1.702, 1.5), F16_OUT)
    case("swiglu_oai/f32/halves", "SWIGLU_OAI", [In((3, 2 * 20))],
         lambda a: mb.ops.swiglu_oai(mb.ops.scale(a, 4.0), None, 1.0, 7.0),
         lambda a: swiglu_oai_ref(4 * a[..., :20], 4 * a[..., 20:], 1.0, 7.0), TRANSC)


def argsort_ref(a, descending):
    # Stable, as the devices sort (ties in index order).
    return np.argsort(-a if descending else a, axis=-1, kind="stable").astype(np.float64)


def sort_cases():
    for label, shape in [("rows", (5, 37)), ("pow2", (3, 64)), ("4d", (2, 3, 2, 19)), ("one", (4, 1)),
                         ("wide", (2, 1000)), ("long", (2, 3000)), ("empty", (0, 9))]:
        for desc in (False, True):
            order = "desc" if desc else "asc"
            case(f"argsort/f32/{label}_{order}", "ARGSORT", [In(shape)],
                 lambda a, desc=desc: mb.ops.argsort(a, desc), lambda a, desc=desc: argsort_ref(a, desc), EXACT)
    case("argsort/f32/ties", "ARGSORT", [In((6, 50))], lambda a: mb.ops.argsort(mb.ops.floor(mb.ops.scale(a, 2.0))),
         lambda a: argsort_ref(np.floor(a * 2.0), False), EXACT)
    case("argsort/f32/transposed", "ARGSORT", [In((23, 7))], lambda a: mb.ops.argsort(a.transpose(), True),
         lambda a: argsort_ref(a.T, True), EXACT)
    # log(floor(2a)): NaN (negatives, last in either order), -inf (zeros, tied), 0 (ones, tied), finite values.
    for desc in (False, True):
        case(f"argsort/f32/nan_inf_{'desc' if desc else 'asc'}", "ARGSORT", [In((4, 300))],
             lambda a, desc=desc: mb.ops.argsort(mb.ops.log(mb.ops.floor(mb.ops.scale(a, 2.0))), desc),
             lambda a, desc=desc: argsort_ref(_log_floor2(a), desc), EXACT)
    # -0 and +0 compare equal: index order.
    case("argsort/f32/signed_zeros", "ARGSORT", [In((3, 40))],
         lambda a: mb.ops.argsort(mb.ops.mul(mb.ops.floor(a), mb.ops.scale(mb.ops.floor(a), 0.0)), True),
         lambda a: argsort_ref(np.floor(a) * 0.0, True), EXACT)


def _log_floor2(a):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(np.floor(a * 2.0))


def arange_cases():
    for label, (start, stop, step) in {"int": (0.0, 17.0, 1.0), "frac": (-2.5, 3.0, 0.25), "down": (5.0, -4.0, -1.5),
                                       "long": (0.0, 5000.0, 0.5), "empty": (3.0, 3.0, 1.0)}.items():
        # The graph needs an input tensor to give the case its context; the output ignores it.
        case(f"arange/f32/{label}", "ARANGE", [In((1,))],
             lambda a, r=(start, stop, step): mb.ops.arange(a.context, *r),
             lambda a, r=(start, stop, step): np.float32(r[0]) + np.arange(int(np.ceil((r[1] - r[0]) / r[2])),
                                                                          dtype=np.float64) * np.float32(r[2]),
             ARITH)


def mul_mat_id_ref(as_, b, ids):
    t, n_used = ids.shape
    out = np.zeros((t, n_used, as_.shape[1]))
    for i in range(t):
        for e in range(n_used):
            out[i, e] = as_[int(ids[i, e])] @ b[i, e % b.shape[1]]
    return out


def group_norm_ref(a, n_groups, eps):
    out = np.empty_like(a)
    c = a.shape[-3]
    per = -(-c // n_groups)
    for g in range(n_groups):
        sl = a[..., g * per:min((g + 1) * per, c), :, :]
        if sl.shape[-3] == 0:
            continue
        axes = (-3, -2, -1)
        m = sl.mean(axis=axes, keepdims=True)
        v = ((sl - m) ** 2).mean(axis=axes, keepdims=True)
        out[..., g * per:min((g + 1) * per, c), :, :] = (sl - m) / np.sqrt(v + eps)
    return out


def timestep_embedding_ref(t, dim, max_period):
    half = dim // 2
    freqs = np.exp(-math.log(max_period) * np.arange(half) / half)
    args = t[:, None] * freqs[None, :]
    out = np.concatenate([np.cos(args), np.sin(args)], axis=-1)
    if dim % 2:
        out = np.concatenate([out, np.zeros((len(t), 1))], axis=-1)
    return out


def moe_cases():
    for label, (e, n, k, t, nb, nu), wt, thr in [
        ("f32", (4, 33, 64, 5, 2, 2), mb.f32, MM_F), ("f32_bcast", (6, 17, 96, 3, 1, 3), mb.f32, MM_F),
        ("f16", (4, 40, 64, 4, 2, 2), mb.f16, MM_F), ("q4_0", (3, 16, 64, 3, 1, 2), mb.q4_0, MM_Q),
        ("q8_0", (3, 16, 64, 3, 2, 2), mb.q8_0, MM_Q), ("one_token", (8, 64, 128, 1, 1, 2), mb.f32, MM_F),
        ("bf16", (3, 9, 48, 2, 1, 2), mb.bf16, MM_BF16), ("q5_1", (3, 7, 96, 2, 2, 2), mb.q5_1, MM_Q),
        ("q4_K", (3, 6, 256, 2, 1, 2), mb.q4_K, MM_Q), ("q6_K", (2, 5, 512, 2, 1, 2), mb.q6_K, MM_Q),
        ("iq4_nl", (3, 5, 64, 2, 1, 2), mb.iq4_nl, MM_Q),
    ]:
        case(f"mul_mat_id/{label}", "MUL_MAT_ID", [In((e, n, k), wt), In((t, nb, k)), In((t, nu), mb.i32, f"perm:{e}")],
             mb.ops.mul_mat_id, mul_mat_id_ref, thr)
    case("mul_mat_id/f32/empty", "MUL_MAT_ID", [In((2, 8, 32)), In((0, 1, 32)), In((0, 2), mb.i32, "index:2")],
         mb.ops.mul_mat_id, mul_mat_id_ref, MM_F)
    for label, sa, n in [("rows", (3, 5, 16), 4), ("2d", (7, 33), 3)]:
        ids_shape = sa[:-1]
        case(f"add_id/f32/{label}", "ADD_ID", [In(sa), In((n, sa[-1])), In(ids_shape, mb.i32, f"index:{n}")],
             mb.ops.add_id, lambda a, b, ids: a + b[ids.astype(int)], ARITH)
    case("add_id/f32/transposed", "ADD_ID", [In((9, 6)), In((2, 9)), In((6,), mb.i32, "index:2")],
         lambda a, b, ids: mb.ops.add_id(a.transpose(), b, ids), lambda a, b, ids: a.T + b[ids.astype(int)], ARITH)


def group_norm_cases():
    for label, shape, groups in [("even", (2, 6, 5, 7), 3), ("uneven", (1, 5, 4, 4), 2), ("each", (1, 8, 3, 3), 8),
                                 ("more_groups", (1, 3, 2, 5), 4), ("unet", (1, 64, 16, 16), 32),
                                 ("chunks", (2, 4, 48, 65), 2)]:  # groups of 6240 values: several pieces
        case(f"group_norm/f32/{label}", "GROUP_NORM", [In(shape)],
             lambda a, g=groups: mb.ops.group_norm(a, g, 1e-6), lambda a, g=groups: group_norm_ref(a, g, 1e-6), ROWS)
    case("group_norm/f32/offset", "GROUP_NORM", [In((2, 4, 3, 3), gen="positive")],
         lambda a: mb.ops.group_norm(mb.ops.scale(a, 1.0, 50.0), 2, 1e-5),
         lambda a: group_norm_ref(a + 50.0, 2, 1e-5), ROWS)
    case("group_norm/f32/strided_rows", "GROUP_NORM", [In((1, 4, 6, 5))],
         lambda a: mb.ops.group_norm(a.permute(0, 1, 3, 2), 2, 1e-6),
         lambda a: group_norm_ref(a.transpose(0, 1, 3, 2), 2, 1e-6), ROWS)
    case("group_norm/f32/permuted", "GROUP_NORM", [In((4, 2, 3, 5))],
         lambda a: mb.ops.group_norm(a.permute(1, 0, 2, 3), 2, 1e-6),
         lambda a: group_norm_ref(a.transpose(1, 0, 2, 3), 2, 1e-6), ROWS)


def timestep_cases():
    for label, n, dim, period in [("even", 7, 64, 10000), ("odd", 5, 33, 10000), ("period", 3, 16, 100)]:
        case(f"timestep_embedding/f32/{label}", "TIMESTEP_EMBEDDING", [In((n,), gen="positive")],
             lambda t, d=dim, p=period: mb.ops.timestep_embedding(mb.ops.scale(t, 250.0), d, p),
             lambda t, d=dim, p=period: timestep_embedding_ref(t * 250.0, d, p), ROPE)


def conv_transpose_1d_ref(kernel, data, s, p, d):
    ic, oc, k = kernel.shape
    n, _, length = data.shape
    ol = (length - 1) * s - 2 * p + d * (k - 1) + 1
    full = np.zeros((n, oc, (length - 1) * s + d * (k - 1) + 1))
    for l in range(length):
        for j in range(k):
            full[:, :, l * s + j * d] += data[:, :, l] @ kernel[:, :, j]
    return full[:, :, p:p + ol]


def pool_2d_ref(a, avg, k0, k1, s0, s1, p0, p1):
    n, c, h, w = a.shape
    oh, ow = (h + 2 * p1 - k1) // s1 + 1, (w + 2 * p0 - k0) // s0 + 1
    out = np.empty((n, c, oh, ow))
    for y in range(oh):
        for x in range(ow):
            y0, x0 = y * s1 - p1, x * s0 - p0
            win = a[:, :, max(y0, 0):min(y0 + k1, h), max(x0, 0):min(x0 + k0, w)]
            out[:, :, y, x] = win.sum(axis=(2, 3)) / (k0 * k1) if avg else win.max(axis=(2, 3))
    return out


def ssm_conv_ref(sx, c):
    d_conv = c.shape[1]
    n_t = sx.shape[2] - d_conv + 1
    out = np.zeros((sx.shape[0], n_t, sx.shape[1]))
    for t in range(n_t):
        out[:, t, :] = (sx[:, :, t:t + d_conv] * c[None]).sum(axis=2)
    return out


def interpolate_ref(a, shape, mode, align_corners=False, antialias=False):
    """ggml_interpolate in float64, sample positions computed in f32 as ggml does. antialias (bilinear):
    ggml's GGML_SCALE_FLAG_ANTIALIAS, torch's antialias=True: per output pixel, the source pixels s in
    [c - support + offset, c + support + offset) around c = (i + offset) / sf with support = max(1, 1 / sf),
    weighted by the triangle max(0, 1 - |s - c + offset| / support) on each axis, divided by the weights' sum."""
    f = np.float32
    a4 = a.reshape((1,) * (4 - a.ndim) + a.shape)
    o4 = (1,) * (4 - len(shape)) + tuple(shape)
    ne_in = a4.shape[::-1]  # ggml order
    ne_out = o4[::-1]
    sf = [f(ne_out[d]) / f(ne_in[d]) for d in range(4)]
    off = f(0.5)
    if align_corners:
        off = f(0.0)
        for d in (0, 1):
            if ne_out[d] > 1 and ne_in[d] > 1:
                sf[d] = f(ne_out[d] - 1) / f(ne_in[d] - 1)

    def nearest(d):
        return np.minimum((np.arange(ne_out[d], dtype=f) / sf[d]).astype(np.int64), ne_in[d] - 1)

    planes = a4[np.ix_(nearest(3), nearest(2))]  # (o3, o2, n1, n0)
    if mode == "nearest":
        return planes[..., nearest(1), :][..., nearest(0)].reshape(shape)

    def pos(d):
        p = (np.arange(ne_out[d], dtype=f) + off) / sf[d] - off
        return p, np.floor(p).astype(np.int64)

    if antialias:
        def aa_matrix(d):
            """(n_out, n_in) filter of axis d, rows normalised (all-zero rows stay zero)."""
            n_in, sfd = ne_in[d], sf[d]
            support = max(f(1.0), f(1.0) / sfd)
            m = np.zeros((ne_out[d], n_in))
            for i in range(ne_out[d]):
                c = (f(i) + off) / sfd
                lo, hi = max(int(c - support + off), 0), min(int(c + support + off), n_in)
                for s_ in range(lo, hi):
                    m[i, s_] = max(0.0, 1.0 - abs((float(s_) - float(c) + float(off)) / float(support)))
            tot = m.sum(axis=1, keepdims=True)
            return np.divide(m, tot, out=np.zeros_like(m), where=tot > 0)

        out = np.einsum("yY,...Yx->...yx", aa_matrix(1), planes) @ aa_matrix(0).T
        return out.reshape(shape)

    (py, y0), (px, x0) = pos(1), pos(0)

    def tap(yi, xi):
        return planes[..., np.clip(yi, 0, ne_in[1] - 1), :][..., np.clip(xi, 0, ne_in[0] - 1)]

    if mode == "bilinear":
        ya, xa = np.clip(y0, 0, ne_in[1] - 1), np.clip(x0, 0, ne_in[0] - 1)
        dy = np.clip((py - ya.astype(f)).astype(np.float64), 0, 1)[:, None]
        dx = np.clip((px - xa.astype(f)).astype(np.float64), 0, 1)[None, :]
        out = (tap(ya, xa) * (1 - dx) * (1 - dy) + tap(ya, xa + 1) * dx * (1 - dy) + tap(ya + 1, xa) * (1 - dx) * dy
               + tap(ya + 1, xa + 1) * dx * dy)
        return out.reshape(shape)

    def weights(t):
        t = t.astype(np.float64)
        A = -0.75
        near = lambda x: ((A + 2) * x - (A + 3)) * x * x + 1  # noqa: E731
        far = lambda x: ((A * x - 5 * A) * x + 8 * A) * x - 4 * A  # noqa: E731
        return [far(t + 1), near(t), near(1 - t), far(2 - t)]

    wy, wx = weights(py - y0.astype(f)), weights(px - x0.astype(f))
    out = 0.0
    for u in range(4):
        for v in range(4):
            out = out + tap(y0 - 1 + u, x0 - 1 + v) * wy[u][:, None] * wx[v][None, :]
    return out.reshape(shape)


def ssm_scan_ref(s, x, dt, A, B, C, ids):
    ns, nt, nh, nr = x.shape
    nc = s.shape[-1]
    g = np.arange(nh) // (nh // B.shape[2])
    y = np.zeros(x.shape)
    states = np.zeros((ns, nh, nr, nc))
    for q in range(ns):
        st = s[int(ids[q])].copy()
        for t in range(nt):
            d = dt[q, t]
            dsp = np.where(d > 20, d, np.log1p(np.exp(np.minimum(d, 20.0))))
            decay = np.exp(dsp[:, None] * A)[:, None, :]
            st = st * decay + B[q, t][g][:, None, :] * (x[q, t] * dsp[:, None])[:, :, None]
            y[q, t] = (st * C[q, t][g][:, None, :]).sum(-1)
        states[q] = st
    return np.concatenate([y.ravel(), states.ravel()])


def rwkv_wkv6_ref(k, v, r, tf, td, state):
    T, H, S = k.shape
    n = state.shape[0]
    per = T // n
    y = np.zeros((T, H, S))
    M = state.reshape(n, H, S, S).copy()
    for q in range(n):
        for t in range(q * per, (q + 1) * per):
            kv = k[t][:, :, None] * v[t][:, None, :]
            y[t] = (r[t][:, :, None] * (tf[:, :, None] * kv + M[q])).sum(1)
            M[q] = M[q] * td[t][:, :, None] + kv
    return np.concatenate([y.ravel(), M.ravel()]).reshape(T + S * n, H * S)


def rwkv_wkv7_ref(r, w, k, v, a, b, state):
    T, H, S = k.shape
    n = state.shape[0]
    per = T // n
    y = np.zeros((T, H, S))
    M = state.reshape(n, H, S, S).copy()
    for q in range(n):
        for t in range(q * per, (q + 1) * per):
            sa = (M[q] * a[t][:, None, :]).sum(-1)
            M[q] = M[q] * w[t][:, None, :] + v[t][:, :, None] * k[t][:, None, :] + sa[:, :, None] * b[t][:, None, :]
            y[t] = (M[q] * r[t][:, None, :]).sum(-1)
    return np.concatenate([y.ravel(), M.ravel()]).reshape(T + S * n, H * S)


def ssm_cases():
    # (n_rs, n_s, n_t, n_head, head_dim, d_state, n_group, Mamba-2's scalar A)
    for label, (nrs, ns, nt, nh, nr, nc, ng, scalar) in [
        ("mamba1", (2, 2, 5, 1, 24, 16, 1, False)), ("mamba2", (3, 2, 4, 4, 8, 16, 2, True)),
        ("one_token", (1, 1, 1, 2, 5, 8, 1, True)), ("wide", (1, 1, 3, 2, 70, 4, 2, False)),
    ]:
        na = 1 if scalar else nc
        case(f"ssm_scan/f32/{label}", "SSM_SCAN",
             [In((nrs, nh, nr, nc)), In((ns, nt, nh, nr)), In((ns, nt, nh)), In((nh, na), gen="positive"),
              In((ns, nt, ng, nc)), In((ns, nt, ng, nc)), In((ns,), mb.i32, f"perm:{nrs}")],
             lambda s, x, dt, A, B, C, ids: mb.ops.ssm_scan(s, x, dt, mb.ops.neg(A), B, C, ids),
             lambda s, x, dt, A, B, C, ids: ssm_scan_ref(s, x, dt, -A, B, C, ids), ROWS)
    for label, (T, H, S, n) in [("one_seq", (4, 2, 16, 1)), ("two_seqs", (6, 3, 8, 2)), ("head64", (2, 1, 64, 1))]:
        case(f"rwkv_wkv6/f32/{label}", "RWKV_WKV6",
             [In((T, H, S)), In((T, H, S)), In((T, H, S)), In((H, S)), In((T, H, S), gen="uniform"),
              In((n, S * S * H))], mb.ops.rwkv_wkv6, rwkv_wkv6_ref, ROWS)
        case(f"rwkv_wkv7/f32/{label}", "RWKV_WKV7",
             [In((T, H, S)), In((T, H, S), gen="uniform"), In((T, H, S)), In((T, H, S)), In((T, H, S), gen="uniform"),
              In((T, H, S), gen="uniform"), In((n, S * S * H))],
             lambda r, w, k, v, a, b, st: mb.ops.rwkv_wkv7(r, w, k, v, mb.ops.scale(a, 0.25), mb.ops.scale(b, 0.25),
                                                           st),
             lambda r, w, k, v, a, b, st: rwkv_wkv7_ref(r, w, k, v, a * 0.25, b * 0.25, st), ROWS)


def spatial_cases():
    for label, (ic, oc, k, n, length), (s, p, d), wt in [
        ("s1", (3, 4, 5, 2, 11), (1, 0, 1), mb.f32), ("s2", (3, 4, 4, 1, 9), (2, 0, 1), mb.f32),
        ("s3_pad_dil", (2, 5, 3, 2, 7), (3, 1, 2), mb.f32), ("f16", (4, 3, 5, 1, 13), (2, 0, 1), mb.f16),
        ("vocoder", (32, 16, 16, 1, 50), (8, 4, 1), mb.f32),
        # 300 taps, more than the CPU GEMM's 256-column block: a block of one channel each
        ("long_kernel", (2, 3, 300, 1, 4), (5, 7, 1), mb.f32),
    ]:
        case(f"conv_transpose_1d/{label}", "CONV_TRANSPOSE_1D", [In((ic, oc, k), wt), In((n, ic, length))],
             lambda kern, x, s=s, p=p, d=d: mb.ops.conv_transpose_1d(kern, x, s, p, d),
             lambda kern, x, s=s, p=p, d=d: conv_transpose_1d_ref(kern, x, s, p, d), MM_F if wt == mb.f16 else ROWS)
    for label, shape, op, kk, ss, pp in [("max", (2, 3, 9, 11), "max", (3, 3), (2, 2), (1, 1)),
                                         ("avg", (1, 2, 8, 8), "avg", (2, 2), (2, 2), (0, 0)),
                                         ("avg_pad", (1, 3, 7, 5), "avg", (3, 2), (1, 2), (1, 1)),
                                         ("max_rect", (2, 1, 6, 10), "max", (4, 2), (3, 1), (0, 1)),
                                         # the CPU's row-at-a-time path: rows of several SIMD vectors and a
                                         # tail, both paddings cut a window column's span of pixels
                                         ("max_k2s2_rows", (1, 3, 6, 70), "max", (2, 2), (2, 2), (0, 0)),
                                         ("avg_wide_pad", (1, 2, 5, 37), "avg", (3, 2), (2, 1), (1, 1)),
                                         ("max_wide_pad", (2, 2, 4, 29), "max", (5, 3), (3, 2), (2, 1))]:
        case(f"pool_2d/f32/{label}", "POOL_2D", [In(shape)],
             lambda a, op=op, kk=kk, ss=ss, pp=pp: mb.ops.pool_2d(a, op, kk[0], kk[1], ss[0], ss[1], pp[0], pp[1]),
             lambda a, op=op, kk=kk, ss=ss, pp=pp: pool_2d_ref(a, op == "avg", kk[0], kk[1], ss[0], ss[1],
                                                               pp[0], pp[1]),
             ARITH if op == "avg" else EXACT)
    # a strided input row (the CPU's pixel-at-a-time path)
    case("pool_2d/f32/transposed", "POOL_2D", [In((1, 2, 9, 6))],
         lambda a: mb.ops.pool_2d(a.permute(0, 1, 3, 2), "max", 3, 2, 2, 1, 1, 0),
         lambda a: pool_2d_ref(a.transpose(0, 1, 3, 2), False, 3, 2, 2, 1, 1, 0), EXACT)
    for label, shape, sf in [("x2", (2, 3, 5, 7), 2), ("x3", (1, 4, 6), 3), ("2d", (3, 5), 2)]:
        case(f"upscale/f32/{label}", "UPSCALE", [In(shape)], lambda a, sf=sf: mb.ops.upscale(a, sf),
             lambda a, sf=sf: np.repeat(np.repeat(a, sf, axis=-1), sf, axis=-2), EXACT)
    for label, shape, mode, align in [("x2", (2, 3, 5, 7), "bilinear", False),
                                      ("x2_align", (1, 2, 4, 6), "bilinear", True),
                                      ("x3", (1, 4, 6), "bicubic", False), ("x2_align", (2, 5, 3), "bicubic", True)]:
        out = shape[:-2] + (2 * shape[-2], 2 * shape[-1]) if label.startswith("x2") else shape[:-2] + (
            3 * shape[-2], 3 * shape[-1])
        sf = 2 if label.startswith("x2") else 3
        case(f"upscale/{mode}/{label}", "UPSCALE", [In(shape)],
             lambda a, sf=sf, m=mode, al=align: mb.ops.upscale(a, sf, m, al),
             lambda a, o=out, m=mode, al=align: interpolate_ref(a, o, m, al), ROWS)
    for label, shape, out, mode, align in [
        ("nearest/odd", (2, 3, 5, 7), (3, 4, 8, 11), "nearest", False),
        ("nearest/align", (2, 5, 7), (2, 9, 4), "nearest", True),
        ("bilinear/down", (2, 3, 8, 9), (2, 3, 5, 4), "bilinear", False),
        ("bilinear/align_odd", (1, 2, 4, 6), (2, 2, 7, 9), "bilinear", True),
        ("bicubic/down", (1, 3, 9, 10), (1, 3, 4, 7), "bicubic", False),
        ("bicubic/align_odd", (2, 5, 6), (2, 8, 13), "bicubic", True),
    ]:
        case(f"interpolate/{label}", "UPSCALE", [In(shape)],
             lambda a, o=out, m=mode, al=align: mb.ops.interpolate(a, o, m, al),
             lambda a, o=out, m=mode, al=align: interpolate_ref(a, o, m, al), EXACT if mode == "nearest" else ROWS)
    # antialias (bilinear): down by 2.x and 3.x (filters wider than 2 taps), up (support 1), align corners.
    for label, shape, out, align in [("down", (2, 3, 11, 13), (2, 3, 5, 4), False),
                                     ("down_align", (1, 2, 9, 16), (1, 2, 3, 5), True),
                                     ("up", (1, 2, 4, 5), (1, 2, 9, 10), False),
                                     ("mixed", (2, 7, 12), (2, 14, 5), False)]:
        case(f"interpolate/bilinear_aa/{label}", "UPSCALE", [In(shape)],
             lambda a, o=out, al=align: mb.ops.interpolate(a, o, "bilinear", al, antialias=True),
             lambda a, o=out, al=align: interpolate_ref(a, o, "bilinear", al, antialias=True), ROWS)
    case("upscale/bilinear_aa/x2", "UPSCALE", [In((2, 3, 5, 7))],
         lambda a: mb.ops.upscale(a, 2, "bilinear", antialias=True),
         lambda a: interpolate_ref(a, (2, 3, 10, 14), "bilinear", antialias=True), ROWS)
    for label, (ns, di, dc, nt) in [("mamba", (2, 16, 4, 7)), ("one", (1, 8, 4, 1)), ("wide", (1, 64, 3, 33))]:
        case(f"ssm_conv/f32/{label}", "SSM_CONV", [In((ns, di, dc - 1 + nt)), In((di, dc))], mb.ops.ssm_conv,
             ssm_conv_ref, ROWS)


def acc_ref(a, b, nb1, nb2, nb3, offset):
    out = a.copy().reshape(-1)
    b4 = b.reshape((1,) * (4 - b.ndim) + b.shape)
    for i3 in range(b4.shape[0]):
        for i2 in range(b4.shape[1]):
            for i1 in range(b4.shape[2]):
                start = (offset + i1 * nb1 + i2 * nb2 + i3 * nb3) // 4
                out[start:start + b4.shape[3]] += b4[i3, i2, i1]
    return out.reshape(a.shape)


def acc_cases():
    # (a shape, b shape, nb1, nb2, nb3, offset) in ggml's byte strides of a.
    for label, sa, sb, nb1, nb2, nb3, off in [
        ("block", (6, 10), (3, 4), 40, 120, 120, 4 * 13),
        ("rows", (4, 7, 9), (2, 3, 5), 36, 252, 504, 4 * (9 + 2)),
        ("whole", (5, 8), (5, 8), 32, 160, 160, 0),
        ("strided", (12, 16), (4, 6), 128, 512, 512, 8),
    ]:
        case(f"acc/f32/{label}", "ACC", [In(sa), In(sb)],
             lambda a, b, r=(nb1, nb2, nb3, off): mb.ops.acc(a, b, *r),
             lambda a, b, r=(nb1, nb2, nb3, off): acc_ref(a, b, *r), ARITH)


def l2_norm_ref(a, eps):
    return a / np.maximum(np.sqrt((a * a).sum(axis=-1, keepdims=True)), eps)


def norm_cases():
    for label, shape in [("rows", (7, 385)), ("3d", (2, 3, 64)), ("single", (1, 5)), ("long", (2, 4099))]:
        case(f"l2_norm/f32/{label}", "L2_NORM", [In(shape)], lambda a: mb.ops.l2_norm(a, 1e-6),
             lambda a: l2_norm_ref(a, 1e-6), ROWS)
    case("l2_norm/f32/eps", "L2_NORM", [In((3, 8), gen="uniform")],
         lambda a: mb.ops.l2_norm(mb.ops.scale(a, 1e-3), 0.1), lambda a: l2_norm_ref(a * 1e-3, 0.1), ROWS)
    case("l2_norm/f32/permuted", "L2_NORM", [In((5, 3, 40))], lambda a: mb.ops.l2_norm(a.permute(1, 0, 2), 1e-6),
         lambda a: l2_norm_ref(a.transpose(1, 0, 2), 1e-6), ROWS)
    case("l2_norm/f32/empty", "L2_NORM", [In((0, 64))], lambda a: mb.ops.l2_norm(a, 1e-6),
         lambda a: l2_norm_ref(a, 1e-6), ROWS)

    for op, fn in (("norm", mb.ops.norm), ("rms_norm", mb.ops.rms_norm)):
        def ref(a, op=op, eps=1e-5):
            if op == "norm":
                m = a.mean(axis=-1, keepdims=True)
                v = ((a - m) ** 2).mean(axis=-1, keepdims=True)
                return (a - m) / np.sqrt(v + eps)
            return a / np.sqrt((a * a).mean(axis=-1, keepdims=True) + eps)

        for label, shape in [("rows", (7, 385)), ("3d", (2, 3, 64)), ("single", (1, 5)), ("long", (2, 4099))]:
            case(f"{op}/f32/{label}", op.upper(), [In(shape)], lambda a, fn=fn: fn(a, 1e-5), ref, ROWS)
        case(f"{op}/f32/offset", op.upper(), [In((4, 96), gen="positive")],
             lambda a, fn=fn: fn(mb.ops.scale(a, 1.0, 100.0), 1e-5), lambda a, ref=ref: ref(a + 100.0), ROWS)
        case(f"{op}/f32/permuted", op.upper(), [In((5, 3, 40))],
             lambda a, fn=fn: fn(a.permute(1, 0, 2), 1e-5), lambda a, ref=ref: ref(a.transpose(1, 0, 2)), ROWS)
        case(f"{op}/f32/eps", op.upper(), [In((3, 8), gen="uniform")],
             lambda a, fn=fn: fn(mb.ops.scale(a, 1e-3), 0.1),
             lambda a, ref=ref: ref(a * 1e-3, eps=0.1), ROWS)
        case(f"{op}/f32/empty", op.upper(), [In((0, 64))], lambda a, fn=fn: fn(a, 1e-5), ref, ROWS)
        case(f"{op}/f32/whisper", op.upper(), [In((1500, 384))], lambda a, fn=fn: fn(a, 1e-5), ref, ROWS)


def soft_max_cases():
    sm = mb.ops.soft_max_ext
    case("soft_max/f32/rows", "SOFT_MAX", [In((5, 37))], mb.ops.soft_max, softmax_ref, ROWS)
    case("soft_max/f32/single", "SOFT_MAX", [In((3, 1))], mb.ops.soft_max, softmax_ref, ROWS)
    case("soft_max/f32/long", "SOFT_MAX", [In((2, 5003))], mb.ops.soft_max, softmax_ref, ROWS)
    case("soft_max/f32/scale", "SOFT_MAX", [In((4, 6, 33))], lambda a: sm(a, None, 0.3),
         lambda a: softmax_ref(a, scale=0.3), ROWS)
    for mt in (mb.f32, mb.f16):
        tn = "f32" if mt == mb.f32 else "f16"
        case(f"soft_max/mask_{tn}/broadcast", "SOFT_MAX", [In((2, 4, 11, 37)), In((1, 2, 13, 37), mt, "mask")],
             lambda a, m: sm(a, m, 0.7), lambda a, m: softmax_ref(a, m, 0.7), ROWS)
        case(f"soft_max/mask_{tn}/alibi", "SOFT_MAX", [In((1, 6, 5, 40)), In((5, 40), mt, "uniform")],
             lambda a, m: sm(a, m, 1.0, 8.0), lambda a, m: softmax_ref(a, m, 1.0, 8.0), ROWS)
    case("soft_max/mask_f16/causal", "SOFT_MAX", [In((3, 16, 16)), In((16, 16), mb.f16, "causal:0")],
         lambda a, m: sm(a, m, 0.125), lambda a, m: softmax_ref(a, m, 0.125), ROWS)
    case("soft_max/mask_f32/sinks", "SOFT_MAX", [In((2, 4, 7, 19)), In((7, 19), mb.f32, "mask"), In((4,))],
         lambda a, m, s: sm(a, m, 0.5, 0.0, s), lambda a, m, s: softmax_ref(a, m, 0.5, 0.0, s), ROWS)
    case("soft_max/f32/sinks_column", "SOFT_MAX", [In((1, 3, 5, 8)), In((3, 1))],
         lambda a, s: sm(a, None, 1.0, 0.0, s), lambda a, s: softmax_ref(a, None, 1.0, 0.0, s.reshape(-1)), ROWS)
    case("soft_max/f32/transposed", "SOFT_MAX", [In((21, 8))], lambda a: mb.ops.soft_max(a.transpose()),
         lambda a: softmax_ref(a.T), ROWS)
    case("soft_max/f32/empty", "SOFT_MAX", [In((0, 37))], mb.ops.soft_max, softmax_ref, ROWS)
    case("soft_max/f32/whisper_attention", "SOFT_MAX", [In((1, 1500, 1500))], lambda a: sm(a, None, 0.125),
         lambda a: softmax_ref(a, scale=0.125), ROWS)


def reduce_cases():
    for op, fn, npfn in (("sum_rows", mb.ops.sum_rows, np.sum), ("mean", mb.ops.mean, np.mean)):
        for label, shape in [("rows", (5, 37)), ("4d", (2, 3, 4, 1001)), ("single", (3, 1))]:
            case(f"{op}/f32/{label}", op.upper(), [In(shape)], fn,
                 lambda a, npfn=npfn: npfn(a, axis=-1, keepdims=True), ROWS)
        case(f"{op}/f32/transposed", op.upper(), [In((33, 7))], lambda a, fn=fn: fn(a.transpose()),
             lambda a, npfn=npfn: npfn(a.T, axis=-1, keepdims=True), ROWS)
    case("sum_rows/f32/empty_rows", "SUM_ROWS", [In((3, 0))], mb.ops.sum_rows,
         lambda a: np.sum(a, axis=-1, keepdims=True), ROWS)
    for label, shape in [("rows", (7, 33)), ("long", (2, 51865)), ("single", (1, 1))]:
        case(f"argmax/f32/{label}", "ARGMAX", [In(shape)], mb.ops.argmax, lambda a: np.argmax(a, axis=-1), EXACT)
    case("argmax/f32/transposed", "ARGMAX", [In((40, 9))], lambda a: mb.ops.argmax(a.transpose()),
         lambda a: np.argmax(a.T, axis=-1), EXACT)


def flash_attn_cases():
    # (label, B, H, Hkv, nq, nkv, D, Dv, kv type, mask gen or None, mask heads, max_bias, softcap)
    specs = [
        ("decode", 1, 6, 6, 1, 77, 64, 64, mb.f16, "mask", 1, 0.0, 0.0),
        ("prompt_causal", 1, 4, 4, 37, 150, 64, 64, mb.f16, "causal:113", 1, 0.0, 0.0),
        ("gqa", 2, 4, 2, 9, 40, 64, 64, mb.f16, "mask", 1, 0.0, 0.0),
        ("f32_kv", 1, 2, 2, 13, 29, 80, 80, mb.f32, None, 1, 0.0, 0.0),
        ("d128", 1, 2, 1, 5, 33, 128, 128, mb.f16, "mask", 1, 0.0, 0.0),
        ("d40", 1, 3, 3, 20, 21, 40, 40, mb.f16, None, 1, 0.0, 0.0),
        ("alibi", 1, 6, 6, 7, 31, 64, 64, mb.f16, "uniform", 6, 8.0, 0.0),
        ("softcap", 1, 2, 2, 4, 50, 64, 64, mb.f16, "mask", 1, 0.0, 30.0),
        ("q8_0_kv", 1, 2, 2, 6, 64, 64, 64, mb.q8_0, "mask", 1, 0.0, 0.0),
        ("q4_0_kv", 1, 2, 2, 3, 70, 64, 64, mb.q4_0, None, 1, 0.0, 0.0),
        ("whisper_encoder", 1, 6, 6, 1500, 1500, 64, 64, mb.f16, None, 1, 0.0, 0.0),
        # Up to 4 query rows each row walks the keys on its own (the CPU's attend_row): a batch of
        # decoder steps, several rows, f32 / quantized keys, ALiBi, softcap with grouped heads,
        # keys past one 64-key mask piece.
        ("decode_batch", 4, 6, 6, 1, 64, 64, 64, mb.f16, "mask", 1, 0.0, 0.0),
        ("rows_f32_kv", 1, 2, 2, 2, 45, 80, 80, mb.f32, "mask", 1, 0.0, 0.0),
        ("decode_q8_0_kv", 1, 2, 2, 1, 96, 64, 64, mb.q8_0, "mask", 1, 0.0, 0.0),
        ("rows_alibi", 1, 4, 4, 3, 31, 64, 64, mb.f16, "uniform", 4, 8.0, 0.0),
        ("rows_gqa_softcap", 2, 4, 2, 4, 19, 40, 40, mb.f16, "mask", 1, 0.0, 30.0),
        ("decode_long", 1, 2, 2, 1, 1000, 64, 64, mb.f16, "causal:700", 1, 0.0, 0.0),
        # The tiled path's key-tile edges (the CPU walks 256-key tiles): one key, one short of a
        # tile, one tile, one past, Whisper's 1500 (a short last tile); rows fully masked and rows
        # whose first tiles are all masked (masked_rows); keys too many for a head's tiles to be
        # held at once (3000 of 64, and 1500 of 128: one tile converted at a time).
        ("tile_k1", 1, 2, 2, 20, 1, 64, 64, mb.f16, None, 1, 0.0, 0.0),
        ("tile_k1_masked_rows", 1, 2, 2, 20, 1, 64, 64, mb.f16, "masked_rows", 1, 0.0, 0.0),
        ("tile_k255", 1, 2, 2, 37, 255, 64, 64, mb.f16, "mask", 1, 0.0, 0.0),
        ("tile_k256", 1, 2, 2, 37, 256, 64, 64, mb.f32, "masked_rows", 1, 0.0, 0.0),
        ("tile_k257", 1, 2, 2, 37, 257, 64, 64, mb.f16, "masked_rows", 1, 0.0, 0.0),
        ("tile_k257_softcap", 1, 2, 2, 9, 257, 40, 40, mb.f16, "mask", 1, 0.0, 30.0),
        ("tile_k1500_masked_rows", 1, 2, 2, 150, 1500, 64, 64, mb.f16, "masked_rows", 2, 0.0, 0.0),
        ("tile_k3000_streamed", 1, 1, 1, 21, 3000, 64, 64, mb.f16, "masked_rows", 1, 0.0, 0.0),
        ("tile_k1500_d128_streamed", 1, 2, 1, 19, 1500, 128, 128, mb.f16, "masked_rows", 1, 0.0, 0.0),
        # bf16 keys and values: the query and the softmax weights are rounded to bf16 for the products
        # (the CPU's bf16 pair tiles on AVX512_BF16, f32 products of the rounded values elsewhere): odd
        # key counts (a tile's last pair half empty), an odd head size (a row's last pair half empty),
        # a head's tiles held and streamed, and the row path.
        ("tile_k257", 1, 2, 2, 37, 257, 64, 64, mb.bf16, "masked_rows", 1, 0.0, 0.0),
        ("d33_softcap", 1, 3, 3, 21, 45, 33, 33, mb.bf16, "mask", 1, 0.0, 30.0),
        ("tile_k3000_streamed", 1, 1, 1, 21, 3000, 64, 64, mb.bf16, "masked_rows", 1, 0.0, 0.0),
        ("gqa_alibi", 2, 4, 2, 9, 40, 64, 64, mb.bf16, "uniform", 4, 8.0, 0.0),
        ("decode", 1, 6, 6, 1, 77, 64, 64, mb.bf16, "mask", 1, 0.0, 0.0),
    ]
    for label, B, H, Hkv, nq, nkv, D, Dv, kvt, mgen, mh, max_bias, softcap in specs:
        scale = 1.0 / math.sqrt(D)
        nq_pad = nq if label != "prompt_causal" else 64
        ins = [In((B, H, nq, D)), In((B, Hkv, nkv, D), kvt), In((B, Hkv, nkv, Dv), kvt)]
        if mgen is not None:
            ins.append(In((1, mh, nq_pad, nkv), mb.f16, mgen))

        def build(q, k, v, m=None, scale=scale, max_bias=max_bias, softcap=softcap):
            return mb.ops.flash_attn_ext(q, k, v, m, scale, max_bias, softcap)

        def ref(q, k, v, m=None, scale=scale, max_bias=max_bias, softcap=softcap):
            return flash_attn_ref(q, k, v, m, scale, max_bias, softcap)

        kvn = {mb.f16: "f16", mb.f32: "f32", mb.bf16: "bf16", mb.q8_0: "q8_0", mb.q4_0: "q4_0"}[kvt]
        case(f"flash_attn_ext/{kvn}/{label}", "FLASH_ATTN_EXT", ins, build, ref, FA_BF16 if kvt == mb.bf16 else FA)


def mul_mat_cases():
    weight_types = [("f32", mb.f32, MM_F), ("f16", mb.f16, MM_F), ("bf16", mb.bf16, MM_BF16), ("q4_0", mb.q4_0, MM_Q),
                    ("q4_1", mb.q4_1, MM_Q), ("q5_0", mb.q5_0, MM_Q), ("q5_1", mb.q5_1, MM_Q), ("q8_0", mb.q8_0, MM_Q)]
    shapes = [
        ("matvec", (17, 64), (1, 64)),
        ("small_batch", (33, 96), (5, 96)),
        ("batch", (19, 128), (37, 128)),
        ("broadcast", (2, 1, 17, 64), (2, 3, 9, 64)),
    ]
    for tn, t, thr in weight_types:
        for label, sa, sb in shapes:
            case(f"mul_mat/{tn}xf32/{label}", "MUL_MAT", [In(sa, t), In(sb)], mb.ops.mul_mat, mul_mat_ref, thr)
    odd = [("odd_k", (7, 45), (3, 45)), ("odd_k_batch", (13, 45), (33, 45))]
    for tn, t, thr in weight_types[:3]:
        for label, sa, sb in odd:
            case(f"mul_mat/{tn}xf32/{label}", "MUL_MAT", [In(sa, t), In(sb)], mb.ops.mul_mat, mul_mat_ref, thr)
    for label, sa, sb in [("vec", (21, 64), (1, 64)), ("batch", (21, 45), (70, 45)), ("3d", (3, 8, 32), (3, 40, 32))]:
        case(f"mul_mat/f16xf16/{label}", "MUL_MAT", [In(sa, mb.f16), In(sb, mb.f16)], mb.ops.mul_mat, mul_mat_ref, MM_F)
    case("mul_mat/f32xf32/transposed_b", "MUL_MAT", [In((11, 32)), In((32, 6))],
         lambda a, b: mb.ops.mul_mat(a, b.transpose()), lambda a, b: mul_mat_ref(a, b.T), MM_F)
    case("mul_mat/f32xf32/empty", "MUL_MAT", [In((0, 32)), In((4, 32))], mb.ops.mul_mat, mul_mat_ref, MM_F)
    case("mul_mat/q8_0xf32/whisper_mlp", "MUL_MAT", [In((1536, 384), mb.q8_0), In((1500, 384))], mb.ops.mul_mat,
         mul_mat_ref, MM_Q)
    case("mul_mat/f16xf32/whisper_proj", "MUL_MAT", [In((384, 384), mb.f16), In((1500, 384))], mb.ops.mul_mat,
         mul_mat_ref, MM_F)


def conv_cases():
    for kt, tn in ((mb.f16, "f16"), (mb.f32, "f32")):
        for label, oc, ic, k, n, length, s, p, d in [
            ("s1", 8, 5, 3, 1, 23, 1, 1, 1),
            ("s2", 8, 5, 3, 2, 23, 2, 1, 1),
            ("dilated", 4, 3, 3, 1, 17, 1, 2, 2),
        ]:
            def ref(kern, data, s=s, p=p, d=d, kt=kt):
                x = to_f16(data) if kt == mb.f16 else data
                return conv_1d_ref(kern, x, s, p, d)

            case(f"conv_1d/{tn}/{label}", "CONV_1D", [In((oc, ic, k), kt), In((n, ic, length))],
                 lambda kern, data, s=s, p=p, d=d: mb.ops.conv_1d(kern, data, s, p, d), ref,
                 F16_OUT if kt == mb.f16 else MM_F)
    # Whisper's two encoder convolutions (base.en sizes: 80 mel bins, 512 channels -> 384 for tiny).
    for label, ic, s in (("whisper_conv1", 80, 1), ("whisper_conv2", 384, 2)):
        case(f"conv_1d/f16/{label}", "CONV_1D", [In((384, ic, 3), mb.f16), In((1, ic, 3000))],
             lambda kern, data, s=s: mb.ops.conv_1d(kern, data, s, 1, 1),
             lambda kern, data, s=s: conv_1d_ref(kern, to_f16(data), s, 1, 1), F16_OUT)
    for dt, dn in ((mb.f32, "f32"), (mb.f16, "f16")):
        for label, ic, length, k, s, p, d in [("k3p1s1", 5, 23, 3, 1, 1, 1), ("k3p1s2", 4, 30, 3, 2, 1, 1),
                                              ("k5d2", 3, 40, 5, 3, 2, 2)]:
            def ref(kern, data, k=k, s=s, p=p, d=d, dt=dt):
                out = im2col_1d_ref(data, k, s, p, d)
                return to_f16(out) if dt == mb.f16 else out

            case(f"im2col/{dn}/1d_{label}", "IM2COL", [In((2, ic, k), mb.f16), In((2, ic, length))],
                 lambda kern, data, s=s, p=p, d=d, dt=dt: mb.ops.im2col(kern, data, s, 0, p, 0, d, 0, False, dt),
                 ref, EXACT)
        case(f"im2col/{dn}/2d", "IM2COL", [In((6, 4, 2, 3), mb.f16), In((2, 4, 9, 11))],
             lambda kern, data, dt=dt: mb.ops.im2col(kern, data, 2, 1, 1, 0, 1, 1, True, dt),
             lambda kern, data, dt=dt: (to_f16 if dt == mb.f16 else np.asarray)(
                 im2col_2d_ref(data, 2, 3, 2, 1, 1, 0, 1, 1)), EXACT)
    case("im2col/f32/1d_transposed_data", "IM2COL", [In((2, 3, 3), mb.f16), In((1, 20, 3))],
         lambda kern, data: mb.ops.im2col(kern, data.transpose(), 1, 0, 1, 0, 1, 0, False, mb.f32),
         lambda kern, data: im2col_1d_ref(np.swapaxes(data, -1, -2), 3, 1, 1, 1), EXACT)


TYPE_NAMES = {mb.f32: "f32", mb.f16: "f16", mb.bf16: "bf16", mb.i32: "i32", mb.q4_0: "q4_0", mb.q4_1: "q4_1",
              mb.q5_0: "q5_0", mb.q5_1: "q5_1", mb.q8_0: "q8_0"}
QUANTS = (mb.q4_0, mb.q4_1, mb.q5_0, mb.q5_1, mb.q8_0)


def is_quant(t) -> bool:
    return t in QUANTS


def copy_cases():
    pairs = [(mb.f32, t) for t in (mb.f32, mb.f16, mb.bf16, mb.i32) + QUANTS]
    pairs += [(mb.f16, mb.f32), (mb.f16, mb.f16), (mb.bf16, mb.f32), (mb.bf16, mb.bf16), (mb.i32, mb.f32)]
    pairs += [(q, t) for q in QUANTS for t in (mb.f32, mb.f16)]
    for st, dt in pairs:
        sn, dn = TYPE_NAMES[st], TYPE_NAMES[dt]
        src_gen = "index:1000" if st == mb.i32 else "normal"
        # Values in logical order, converted with the library's bit-exact converters (themselves tested
        # against independent references in test_quantize.py).
        case(f"cpy/{sn}_{dn}/contiguous", "CPY", [In((3, 7, 64), st, src_gen), In((3, 7, 64), dt, "zeros")],
             lambda a, b: mb.ops.cpy(a, b), ref_bytes=lambda v, r, dt=dt: quantized_bytes(v[0], dt))
        if not is_quant(st) and not is_quant(dt):
            case(f"cpy/{sn}_{dn}/transposed_src", "CPY", [In((9, 13), st, src_gen), In((13, 9), dt, "zeros")],
                 lambda a, b: mb.ops.cpy(a.transpose(), b), ref_bytes=lambda v, r, dt=dt: quantized_bytes(v[0].T, dt))
            case(f"cpy/{sn}_{dn}/reshaped", "CPY", [In((6, 4, 5), st, src_gen), In((12, 10), dt, "zeros")],
                 lambda a, b: mb.ops.cpy(a, b), ref_bytes=lambda v, r, dt=dt: quantized_bytes(v[0].reshape(12, 10), dt))
        elif not is_quant(st):
            # A permuted source into whole quantized rows.
            case(f"cpy/{sn}_{dn}/permuted_src", "CPY", [In((7, 3, 64), st, src_gen), In((3, 7, 64), dt, "zeros")],
                 lambda a, b: mb.ops.cpy(a.permute(1, 0, 2), b),
                 ref_bytes=lambda v, r, dt=dt: quantized_bytes(v[0].transpose(1, 0, 2), dt))
    case("cpy/f32_f16/into_transposed_view", "CPY", [In((6, 10)), In((10, 6), mb.f16, "zeros")],
         lambda a, b: mb.ops.cpy(a, b.transpose()), lambda a, b: to_f16(a), EXACT)
    case("cpy/f32_f32/empty", "CPY", [In((0, 8)), In((0, 8), mb.f32, "zeros")], lambda a, b: mb.ops.cpy(a, b),
         lambda a, b: a, EXACT)
    for t in (mb.f32, mb.f16, mb.bf16, mb.i32):
        tn = TYPE_NAMES[t]
        gen = "index:1000" if t == mb.i32 else "normal"
        case(f"cont/{tn}/permuted_4d", "CONT", [In((2, 3, 5, 7), t, gen)],
             lambda a: mb.ops.cont(a.permute(3, 1, 0, 2)), lambda a: a.transpose(3, 1, 0, 2), EXACT)
        case(f"cont/{tn}/transposed", "CONT", [In((33, 17), t, gen)], lambda a: mb.ops.cont(a.transpose()),
             lambda a: a.T, EXACT)
        case(f"dup/{tn}/contiguous", "DUP", [In((5, 37), t, gen)], mb.ops.dup, lambda a: a, EXACT)
    case("cont/f32/whisper_heads", "CONT", [In((1500, 6, 64))], lambda a: mb.ops.cont(a.permute(1, 0, 2)),
         lambda a: a.transpose(1, 0, 2), EXACT)


def rows_cases():
    for t in (mb.f32, mb.f16, mb.bf16, mb.i32) + QUANTS:
        tn = TYPE_NAMES[t]
        gen = "index:1000" if t == mb.i32 else "normal"
        case(f"get_rows/{tn}/2d", "GET_ROWS", [In((10, 64), t, gen), In((7,), mb.i32, "index:10")],
             mb.ops.get_rows, lambda a, i: a[i.astype(int)], EXACT)
        case(f"get_rows/{tn}/batched", "GET_ROWS", [In((3, 10, 64), t, gen), In((3, 4), mb.i32, "index:10")],
             mb.ops.get_rows,
             lambda a, i: np.stack([a[j][i[j].astype(int)] for j in range(a.shape[0])]), EXACT)
    case("get_rows/f32/odd_row", "GET_ROWS", [In((5, 37)), In((9,), mb.i32, "index:5")], mb.ops.get_rows,
         lambda a, i: a[i.astype(int)], EXACT)
    case("get_rows/f32/no_rows", "GET_ROWS", [In((5, 37)), In((0,), mb.i32, "index:5")], mb.ops.get_rows,
         lambda a, i: a[i.astype(int)], EXACT)
    case("get_rows/f16/whisper_tokens", "GET_ROWS", [In((51865, 384), mb.f16), In((4,), mb.i32, "index:51865")],
         mb.ops.get_rows, lambda a, i: a[i.astype(int)], EXACT)

    for dt in (mb.f32, mb.f16, mb.bf16) + QUANTS:
        def ref_bytes(vals, raws, dt=dt):
            _, src, idx = vals
            out = bytearray(raws[0])
            n_batch, n_rows = 2, 9
            row_bytes = len(out) // (n_batch * n_rows)
            for b in range(n_batch):
                for k in range(src.shape[1]):
                    r = int(idx[b, k])
                    start = (b * n_rows + r) * row_bytes
                    out[start : start + row_bytes] = quantized_bytes(src[b, k], dt)
            return bytes(out)

        # Distinct indices, so the result does not depend on which of two writes to a row lands last.
        # Rows not written keep their stored bytes exactly.
        case(f"set_rows/f32_{TYPE_NAMES[dt]}/batched", "SET_ROWS",
             [In((2, 9, 64), dt, "normal"), In((2, 3, 64)), In((2, 3), mb.i32, "perm:9")],
             mb.ops.set_rows, ref_bytes=ref_bytes)


def layout_cases():
    for axis in range(4):
        sb = [2, 3, 4, 5]
        sb[axis] = 3
        case(f"concat/f32/axis{axis}", "CONCAT", [In((2, 3, 4, 5)), In(tuple(sb))],
             lambda a, b, axis=axis: mb.ops.concat(a, b, axis), lambda a, b, axis=axis: np.concatenate([a, b], axis),
             EXACT)
    case("concat/f16/rows_odd", "CONCAT", [In((3, 7), mb.f16), In((3, 9), mb.f16)],
         lambda a, b: mb.ops.concat(a, b, 1), lambda a, b: np.concatenate([a, b], 1), EXACT)
    case("concat/i32/axis0", "CONCAT", [In((2, 5), mb.i32, "index:100"), In((4, 5), mb.i32, "index:100")],
         lambda a, b: mb.ops.concat(a, b, 0), lambda a, b: np.concatenate([a, b], 0), EXACT)
    case("concat/f32/transposed", "CONCAT", [In((5, 3)), In((3, 2))],
         lambda a, b: mb.ops.concat(a.transpose(), b, 1), lambda a, b: np.concatenate([a.T, b], 1), EXACT)
    case("concat/f32/empty_b", "CONCAT", [In((3, 4)), In((3, 0))],
         lambda a, b: mb.ops.concat(a, b, 1), lambda a, b: np.concatenate([a, b], 1), EXACT)
    for t in (mb.f32, mb.f16):
        tn = TYPE_NAMES[t]
        case(f"repeat/{tn}/tile", "REPEAT", [In((2, 3), t), In((4, 6, 9), t, "zeros")], mb.ops.repeat,
             lambda a, b: tile_to(a, b.shape), EXACT)
        case(f"pad/{tn}/all_axes", "PAD", [In((2, 3, 5), t)], lambda a: mb.ops.pad(a, [1, 0, 3]),
             lambda a: np.pad(a, [(0, 1), (0, 0), (0, 3)]), EXACT)
    case("repeat/f32/transposed", "REPEAT", [In((3, 2)), In((4, 6))], lambda a, b: mb.ops.repeat(a.transpose(), b),
         lambda a, b: tile_to(a.T, b.shape), EXACT)
    case("pad/f32/4d", "PAD", [In((2, 1, 3, 4))], lambda a: mb.ops.pad(a, [1, 2, 0, 5]),
         lambda a: np.pad(a, [(0, 1), (0, 2), (0, 0), (0, 5)]), EXACT)
    # numpy's mode="reflect" is ggml's reflection (the edge element is not repeated).
    for t in (mb.f32, mb.f16):
        tn = TYPE_NAMES[t]
        case(f"pad_reflect_1d/{tn}/both", "PAD_REFLECT_1D", [In((3, 2, 9), t)],
             lambda a: mb.ops.pad_reflect_1d(a, 3, 8),
             lambda a: np.pad(a, [(0, 0), (0, 0), (3, 8)], mode="reflect"), EXACT)
    case("pad_reflect_1d/f32/silero", "PAD_REFLECT_1D", [In((5, 576))], lambda a: mb.ops.pad_reflect_1d(a, 0, 64),
         lambda a: np.pad(a, [(0, 0), (0, 64)], mode="reflect"), EXACT)
    case("pad_reflect_1d/f32/transposed", "PAD_REFLECT_1D", [In((6, 4))],
         lambda a: mb.ops.pad_reflect_1d(a.transpose(), 2, 0),
         lambda a: np.pad(a.T, [(0, 0), (2, 0)], mode="reflect"), EXACT)
    case("pad_reflect_1d/f32/4d_long_row", "PAD_REFLECT_1D", [In((2, 3, 2, 700))],
         lambda a: mb.ops.pad_reflect_1d(a, 699, 1),
         lambda a: np.pad(a, [(0, 0), (0, 0), (0, 0), (699, 1)], mode="reflect"), EXACT)
    case("pad_reflect_1d/i32/row", "PAD_REFLECT_1D", [In((4,), mb.i32, "index:100")],
         lambda a: mb.ops.pad_reflect_1d(a, 2, 3), lambda a: np.pad(a, (2, 3), mode="reflect"), EXACT)


def rope_cases():
    for mode in (0, 2):
        mn = "normal" if mode == 0 else "neox"
        for label, shape, n_dims, kw in [
            ("full", (1, 5, 3, 64), 64, {}),
            ("partial", (2, 4, 2, 24), 16, {}),
            ("scaled", (1, 6, 2, 32), 32, {"freq_base": 500.0, "freq_scale": 0.5}),
            ("yarn", (1, 5, 3, 32), 32, {"n_ctx_orig": 512, "freq_scale": 0.25, "ext_factor": 1.0, "attn_factor": 1.1}),
        ]:
            t = shape[1]

            def build(a, p, n_dims=n_dims, mode=mode, kw=kw):
                return mb.ops.rope(a, p, n_dims, mode, **kw)

            def ref(a, p, n_dims=n_dims, mode=mode, kw=kw):
                args = dict(kw)
                if "freq_base" in args:
                    args["base"] = args.pop("freq_base")
                return rope_ref(a, p, n_dims, mode, **args)

            case(f"rope/f32/{mn}_{label}", "ROPE", [In(shape), In((t,), mb.i32, "index:3000")], build, ref, ROPE)


binary_cases()
unary_cases()
glu_cases()
sort_cases()
arange_cases()
moe_cases()
acc_cases()
spatial_cases()
ssm_cases()
group_norm_cases()
timestep_cases()
norm_cases()
soft_max_cases()
reduce_cases()
flash_attn_cases()
mul_mat_cases()
conv_cases()
copy_cases()
rows_cases()
layout_cases()
rope_cases()


# ggml's super-block types (blocks of 256), iq4_nl, iq4_xs and mxfp4: mat-vec, the small-batch and tiled GEMM paths,
# broadcast, get_rows, and copies out of them (and, on the CPU, into them).
K_QUANTS = ((mb.q2_K, "q2_K"), (mb.q3_K, "q3_K"), (mb.q4_K, "q4_K"), (mb.q5_K, "q5_K"), (mb.q6_K, "q6_K"),
            (mb.iq4_nl, "iq4_nl"), (mb.iq4_xs, "iq4_xs"), (mb.mxfp4, "mxfp4"))
# ggml's grid types: nothing quantizes to them, so their inputs are random blocks and they are copied
# only out of (and into themselves).
GRID_TYPES = tuple((getattr(mb, n), n) for n in ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"))


def super_block_cases():
    shapes = [
        ("matvec", (17, 256), (1, 256)),
        ("small_batch", (33, 512), (5, 512)),
        ("batch", (19, 768), (37, 768)),
        ("broadcast", (2, 1, 9, 256), (2, 3, 4, 256)),
    ]
    for t, tn in K_QUANTS + GRID_TYPES:
        grid = (t, tn) in GRID_TYPES
        gen = "blocks" if grid else "normal"
        for label, sa, sb in shapes:
            case(f"mul_mat/{tn}xf32/{label}", "MUL_MAT", [In(sa, t, gen), In(sb)], mb.ops.mul_mat, mul_mat_ref, MM_Q)
        case(f"get_rows/{tn}/batched", "GET_ROWS", [In((3, 10, 512), t, gen), In((3, 4), mb.i32, "index:10")],
             mb.ops.get_rows, lambda a, i: np.stack([a[j][i[j].astype(int)] for j in range(a.shape[0])]), EXACT)
        for dt, dn in ((mb.f32, "f32"), (mb.f16, "f16")):
            case(f"cpy/{tn}_{dn}/contiguous", "CPY", [In((3, 2, 512), t, gen), In((3, 2, 512), dt, "zeros")],
                 lambda a, b: mb.ops.cpy(a, b), ref_bytes=lambda v, r, dt=dt: quantized_bytes(v[0], dt))
        if grid:
            case(f"cpy/{tn}_{tn}/contiguous", "CPY", [In((3, 2, 512), t, gen), In((3, 2, 512), t, "blocks")],
                 lambda a, b: mb.ops.cpy(a, b), ref_bytes=lambda v, r: r[0])
        else:
            case(f"cpy/f32_{tn}/contiguous", "CPY", [In((3, 2, 512)), In((3, 2, 512), t, "zeros")],
                 lambda a, b: mb.ops.cpy(a, b), ref_bytes=lambda v, r, t=t: quantized_bytes(v[0], t))
    case("mul_mat/q4_Kxf32/whisper_mlp", "MUL_MAT", [In((1536, 512), mb.q4_K), In((300, 512))], mb.ops.mul_mat,
         mul_mat_ref, MM_Q)
    # mxfp4 blocks are 17 bytes with no half in them: rows of one or three blocks have odd strides, which the
    # Metal kernels read bytewise (they once refused every mxfp4 source as misaligned).
    for label, k in (("odd_rows1", 32), ("odd_rows3", 96)):
        case(f"mul_mat/mxfp4xf32/{label}", "MUL_MAT", [In((9, k), mb.mxfp4), In((3, k))], mb.ops.mul_mat,
             mul_mat_ref, MM_Q)
        case(f"get_rows/mxfp4/{label}", "GET_ROWS", [In((7, k), mb.mxfp4), In((5,), mb.i32, "index:7")],
             mb.ops.get_rows, lambda a, i: a[i.astype(int)], EXACT)
        case(f"cpy/mxfp4_f32/{label}", "CPY", [In((5, k), mb.mxfp4), In((5, k), mb.f32, "zeros")],
             lambda a, b: mb.ops.cpy(a, b), ref_bytes=lambda v, r: quantized_bytes(v[0], mb.f32))


super_block_cases()


# ---------------------------------------------- more of ggml's ops: selection, scans, masks, spatial

def top_k_ref(a, k):
    # argsort descending, stable (ties in index order, NaNs last), cut at k.
    return np.argsort(-a, axis=-1, kind="stable")[..., :k].astype(np.float64)


def top_k_cases():
    for label, shape, k in [("rows", (5, 37), 5), ("all", (3, 17), 17), ("one", (4, 100), 1), ("4d", (2, 3, 2, 19), 4),
                            ("pow2", (3, 64), 64), ("wide", (2, 1000), 100), ("chunked", (2, 3000), 20),
                            ("chunked_k1024", (1, 2100), 1024), ("k0", (3, 9), 0), ("empty", (0, 9), 3)]:
        case(f"top_k/f32/{label}", "TOP_K", [In(shape)], lambda a, k=k: mb.ops.top_k(a, k),
             lambda a, k=k: top_k_ref(a, k), EXACT)
    case("top_k/f32/ties", "TOP_K", [In((6, 50))], lambda a: mb.ops.top_k(mb.ops.floor(mb.ops.scale(a, 2.0)), 12),
         lambda a: top_k_ref(np.floor(a * 2.0), 12), EXACT)
    # sqrt of negatives: NaNs, which come last.
    case("top_k/f32/nan", "TOP_K", [In((3, 40))], lambda a: mb.ops.top_k(mb.ops.sqrt(a), 30),
         lambda a: top_k_ref(np.sqrt(np.where(a < 0, np.nan, a)), 30), EXACT)
    case("top_k/f32/transposed", "TOP_K", [In((23, 7))], lambda a: mb.ops.top_k(a.transpose(), 3),
         lambda a: top_k_ref(a.T, 3), EXACT)
    # k <= n / 16: the CPU's streaming threshold; with ties, NaNs and strided rows too, and rows long
    # enough that the candidate list is cut back several times (ties across the cuts, NaNs among them).
    case("top_k/f32/stream_long_ties", "TOP_K", [In((3, 4000))],
         lambda a: mb.ops.top_k(mb.ops.floor(mb.ops.scale(a, 2.0)), 40),
         lambda a: top_k_ref(np.floor(a * 2.0), 40), EXACT)
    case("top_k/f32/stream_long_nan", "TOP_K", [In((2, 3000))], lambda a: mb.ops.top_k(mb.ops.sqrt(a), 7),
         lambda a: top_k_ref(np.sqrt(np.where(a < 0, np.nan, a)), 7), EXACT)
    case("top_k/f32/heap_ties", "TOP_K", [In((4, 300))], lambda a: mb.ops.top_k(mb.ops.floor(mb.ops.scale(a, 2.0)), 10),
         lambda a: top_k_ref(np.floor(a * 2.0), 10), EXACT)
    case("top_k/f32/heap_nan", "TOP_K", [In((3, 200))], lambda a: mb.ops.top_k(mb.ops.sqrt(a), 5),
         lambda a: top_k_ref(np.sqrt(np.where(a < 0, np.nan, a)), 5), EXACT)
    case("top_k/f32/heap_transposed", "TOP_K", [In((200, 3))], lambda a: mb.ops.top_k(a.transpose(), 4),
         lambda a: top_k_ref(a.T, 4), EXACT)


def scan_cases():
    for label, shape in [("rows", (5, 37)), ("4d", (2, 3, 2, 19)), ("long", (2, 3000)), ("single", (4, 1)),
                         ("empty", (0, 9))]:
        case(f"cumsum/f32/{label}", "CUMSUM", [In(shape)], mb.ops.cumsum, lambda a: np.cumsum(a, axis=-1), ROWS)
    case("cumsum/f32/transposed", "CUMSUM", [In((33, 7))], lambda a: mb.ops.cumsum(a.transpose()),
         lambda a: np.cumsum(a.T, axis=-1), ROWS)
    for label, shape in [("rows", (5, 37)), ("4d", (2, 3, 4, 1001)), ("one", (1,)), ("long", (100003,)),
                         ("empty", (0, 5))]:
        # Positive values: a sum of thousands of signed values can cancel to near zero, where the f32
        # partial sums' rounding is no longer small against the result.
        case(f"sum/f32/{label}", "SUM", [In(shape, gen="positive")], mb.ops.sum, lambda a: np.sum(a).reshape(1), ROWS)
    case("sum/f32/permuted", "SUM", [In((3, 5, 7))], lambda a: mb.ops.sum(a.permute(2, 0, 1)),
         lambda a: np.sum(a).reshape(1), ROWS)
    for label, sa, tb in [("rows", (5, 37), mb.f32), ("4d", (2, 3, 4, 9), mb.f32), ("f16_scalar", (3, 33), mb.f16),
                          ("empty", (0, 9), mb.f32)]:
        case(f"add1/f32/{label}", "ADD1", [In(sa), In((1,), tb)], mb.ops.add1, lambda a, b: a + b[0], ARITH)
    case("add1/f32/transposed_scalar_2d", "ADD1", [In((9, 13)), In((1, 1))], lambda a, b: mb.ops.add1(a.transpose(), b),
         lambda a, b: a.T + b[0, 0], ARITH)
    for label, shape, t, c in [("rows", (5, 37), mb.f32, 2.5), ("4d", (2, 3, 4, 9), mb.f32, -1e30),
                               ("f16", (3, 33), mb.f16, 0.1), ("empty", (0, 4), mb.f32, 1.0)]:
        want = float(np.float16(c)) if t == mb.f16 else float(np.float32(c))
        case(f"fill/{'f16' if t == mb.f16 else 'f32'}/{label}", "FILL", [In(shape, t)],
             lambda a, c=c: mb.ops.fill(a, c), lambda a, w=want: np.full(a.shape, w), EXACT)
    case("fill/f32/transposed", "FILL", [In((6, 4))], lambda a: mb.ops.fill(a.transpose(), -3.0),
         lambda a: np.full(a.T.shape, -3.0), EXACT)


TRI_REF = {"upper_diag": lambda a: np.triu(a, 0), "upper": lambda a: np.triu(a, 1),
           "lower_diag": lambda a: np.tril(a, 0), "lower": lambda a: np.tril(a, -1)}


def diag_mask_ref(a, n_past, value):
    rows, cols = a.shape[-2], a.shape[-1]
    masked = np.arange(cols)[None, :] > n_past + np.arange(rows)[:, None]
    return np.where(masked, value, a)


def mask_cases():
    for name, ref in TRI_REF.items():
        for label, shape, t in [("3d", (3, 7, 7), mb.f32), ("4d", (2, 2, 5, 5), mb.f32), ("f16", (2, 9, 9), mb.f16)]:
            case(f"tri/{'f16' if t == mb.f16 else 'f32'}/{name}_{label}", "TRI", [In(shape, t)],
                 lambda a, name=name: mb.ops.tri(a, name), ref, EXACT)
    case("tri/f32/transposed", "TRI", [In((6, 6))], lambda a: mb.ops.tri(a.transpose(), "lower"),
         lambda a: np.tril(a.T, -1), EXACT)
    case("tri/f32/empty", "TRI", [In((0, 4, 4))], lambda a: mb.ops.tri(a, "upper"), lambda a: np.triu(a, 1), EXACT)
    for label, shape, t in [("row", (7,), mb.f32), ("3d", (3, 1, 9), mb.f32), ("4d", (2, 2, 1, 5), mb.f32),
                            ("f16", (1, 6), mb.f16), ("empty", (0, 1, 4), mb.f32)]:
        case(f"diag/{'f16' if t == mb.f16 else 'f32'}/{label}", "DIAG", [In(shape, t)], mb.ops.diag,
             lambda a: np.eye(a.shape[-1]) * a, EXACT)
    case("diag/f32/transposed", "DIAG", [In((6, 1))], lambda a: mb.ops.diag(a.transpose()),
         lambda a: np.eye(6) * a.T, EXACT)
    for op, value in (("diag_mask_inf", -np.inf), ("diag_mask_zero", 0.0)):
        for label, shape, t, n_past in [("3d", (3, 5, 9), mb.f32, 2), ("square", (6, 6), mb.f32, 0),
                                        ("past_all", (4, 3), mb.f32, 7), ("4d", (2, 2, 4, 7), mb.f32, 1),
                                        ("f16", (3, 5, 9), mb.f16, 3)]:
            case(f"{op}/{'f16' if t == mb.f16 else 'f32'}/{label}", op.upper(), [In(shape, t)],
                 lambda a, op=op, n=n_past: getattr(mb.ops, op)(a, n),
                 lambda a, n=n_past, v=value: diag_mask_ref(a, n, v), EXACT)
        case(f"{op}/f32/transposed", op.upper(), [In((9, 5))], lambda a, op=op: getattr(mb.ops, op)(a.transpose(), 1),
             lambda a, v=value: diag_mask_ref(a.T, 1, v), EXACT)


def roll_cases():
    # shifts in ggml order: shift0 moves the last axis.
    for label, shape, t, shifts in [("2d", (5, 7), mb.f32, (3, -2)), ("4d", (2, 3, 4, 5), mb.f32, (-4, 3, 2, 1)),
                                    ("f16", (3, 33), mb.f16, (10, 1)), ("i32", (4, 6), mb.i32, (-5, 3)),
                                    ("zero", (3, 4), mb.f32, (0, 0)), ("empty", (0, 5), mb.f32, (2, 0))]:
        gen = "index:100" if t == mb.i32 else "normal"
        axes = tuple(range(len(shape)))[::-1][: len(shifts)]
        case(f"roll/{str(t)[3:]}/{label}", "ROLL", [In(shape, t, gen)], lambda a, s=shifts: mb.ops.roll(a, *s),
             lambda a, s=shifts, ax=axes: np.roll(a, s, axis=ax), EXACT)
    case("roll/f32/transposed", "ROLL", [In((6, 4))], lambda a: mb.ops.roll(a.transpose(), 1, -3),
         lambda a: np.roll(a.T, (1, -3), axis=(1, 0)), EXACT)


def set_ref(a, b, nb1, nb2, nb3, offset):
    out = a.copy().reshape(-1)
    b4 = b.reshape((1,) * (4 - b.ndim) + b.shape)
    for i3 in range(b4.shape[0]):
        for i2 in range(b4.shape[1]):
            for i1 in range(b4.shape[2]):
                start = (offset + i1 * nb1 + i2 * nb2 + i3 * nb3) // 4
                out[start:start + b4.shape[3]] = b4[i3, i2, i1]
    return out.reshape(a.shape)


def set_cases():
    for label, sa, sb, nb1, nb2, nb3, off in [
        ("block", (6, 10), (3, 4), 40, 120, 120, 4 * 13),
        ("rows", (4, 7, 9), (2, 3, 5), 36, 252, 504, 4 * (9 + 2)),
        ("whole", (5, 8), (5, 8), 32, 160, 160, 0),
        ("strided", (12, 16), (4, 6), 128, 512, 512, 8),
        ("1d", (20,), (7,), 28, 28, 28, 12),
    ]:
        case(f"set/f32/{label}", "SET", [In(sa), In(sb)],
             lambda a, b, r=(nb1, nb2, nb3, off): mb.ops.set(a, b, *r),
             lambda a, b, r=(nb1, nb2, nb3, off): set_ref(a, b, *r), EXACT)


def out_prod_ref(a, b):
    """a (..., K, M), b (..., K, N) -> (..., N, M); a's matrices serve consecutive ones of b."""
    a4 = a.reshape((1,) * (4 - a.ndim) + a.shape)
    b4 = b.reshape((1,) * (4 - b.ndim) + b.shape)
    a4 = np.repeat(np.repeat(a4, b4.shape[0] // a4.shape[0], axis=0), b4.shape[1] // a4.shape[1], axis=1)
    out = np.swapaxes(b4, -1, -2) @ a4
    nd = max(a.ndim, b.ndim, 2)
    return out.reshape(out.shape[4 - nd:])


def pool_1d_ref(a, avg, k, s, p):
    n = a.shape[-1]
    cols = []
    for o in range((n + 2 * p - k) // s + 1):
        lo, hi = max(0, o * s - p), min(n, o * s - p + k)
        w = a[..., lo:hi]
        cols.append(w.mean(axis=-1) if avg else w.max(axis=-1))
    return np.stack(cols, axis=-1)


def conv_2d_ref(kernel, data, s0, s1, p0, p1, d0, d1):
    """kernel (OC, IC, KH, KW), data (N, IC, H, W) -> (N, OC, OH, OW)."""
    oc, ic, kh, kw = kernel.shape
    cols = im2col_2d_ref(data, kh, kw, s0, s1, p0, p1, d0, d1)  # (N, OH, OW, IC*KH*KW)
    return np.einsum("nyxc,oc->noyx", cols, kernel.reshape(oc, -1))


def conv_2d_dw_ref(kernel, data, s0, s1, p0, p1, d0, d1):
    """kernel (C, 1, KH, KW), data (N, C, H, W) -> (N, C, OH, OW)."""
    return np.concatenate([conv_2d_ref(kernel[c:c + 1], data[:, c:c + 1], s0, s1, p0, p1, d0, d1)
                           for c in range(data.shape[1])], axis=1)


def conv_transpose_2d_ref(kernel, data, s):
    """kernel (IC, OC, KH, KW), data (N, IC, H, W) -> (N, OC, (H-1)s + KH, (W-1)s + KW)."""
    ic, oc, kh, kw = kernel.shape
    n, _, h, w = data.shape
    out = np.zeros((n, oc, (h - 1) * s + kh, (w - 1) * s + kw))
    for ky in range(kh):
        for kx in range(kw):
            contrib = np.einsum("nihw,io->nohw", data, kernel[:, :, ky, kx])
            out[:, :, ky:ky + (h - 1) * s + 1:s, kx:kx + (w - 1) * s + 1:s] += contrib
    return out


def product_cases():
    for label, sa, sb in [("2d", (13, 9), (13, 7)), ("batch", (2, 3, 11, 6), (2, 3, 11, 5)),
                          ("broadcast", (1, 2, 8, 5), (3, 4, 8, 6)), ("big", (300, 70), (300, 130)),
                          ("k0", (0, 5), (0, 4)),
                          # the CPU GEMM's block edges: K 520 = 256 + 256 + 8 (both packing buffers, twice),
                          # 37 columns (an edge panel), 101 rows (two row tiles of 96, an edge token group),
                          # broadcast a over b
                          ("blocks", (1, 2, 520, 37), (2, 4, 520, 101)),
                          # 150 columns: two column tiles of 128
                          ("wide", (70, 150), (70, 13))]:
        case(f"out_prod/f32/{label}", "OUT_PROD", [In(sa), In(sb)], lambda a, b: mb.ops.out_prod(a, b),
             out_prod_ref, ROWS)
    case("out_prod/f32/transposed", "OUT_PROD", [In((6, 9)), In((8, 9))],
         lambda a, b: mb.ops.out_prod(a.transpose(), b.transpose()), lambda a, b: out_prod_ref(a.T, b.T), ROWS)


def spatial2_cases():
    for label, shape, op, k, s, p in [("max", (3, 20), "max", 3, 2, 1), ("avg", (2, 3, 17), "avg", 4, 3, 2),
                                      ("avg_nopad", (5, 16), "avg", 2, 2, 0), ("max_k1", (4, 7), "max", 1, 1, 0)]:
        case(f"pool_1d/f32/{label}", "POOL_1D", [In(shape)], lambda a, r=(op, k, s, p): mb.ops.pool_1d(a, *r),
             lambda a, r=(op == "avg", k, s, p): pool_1d_ref(a, *r), ROWS)
    case("pool_1d/f32/transposed", "POOL_1D", [In((12, 5))], lambda a: mb.ops.pool_1d(a.transpose(), "max", 3, 3, 0),
         lambda a: pool_1d_ref(a.T, False, 3, 3, 0), ROWS)
    # (label, kernel (OC, IC, KH, KW), data (N, IC, H, W), s0, s1, p0, p1, d0, d1)
    for label, sk, sd, geo in [("3x3", (4, 3, 3, 3), (2, 3, 9, 11), (1, 1, 1, 1, 1, 1)),
                               ("stride", (5, 2, 3, 2), (1, 2, 10, 9), (2, 3, 0, 1, 1, 1)),
                               ("dilated", (3, 4, 2, 3), (2, 4, 8, 12), (1, 2, 2, 1, 2, 3)),
                               ("1x1", (6, 5, 1, 1), (1, 5, 4, 7), (1, 1, 0, 0, 1, 1)),
                               ("many_oc", (100, 3, 3, 3), (1, 3, 6, 40), (1, 1, 1, 1, 1, 1)),
                               # CPU GEMM edges: K = 30*3*3 = 270 (panel path: two k blocks of 136 + 134, 9*40 =
                               # 360 pixels in blocks of 128, the last 104, panels of 16 cut at the ends of 40-pixel
                               # rows; implicit GEMM on AVX2 / AVX-512: k blocks of 96 + 96 + 78)
                               ("blocks", (7, 30, 3, 3), (1, 30, 9, 40), (1, 1, 1, 1, 1, 1)),
                               # runs of 16 pixels over both paddings of 37-wide rows (dilation 2, padding 2)
                               ("padded_runs", (4, 2, 3, 3), (2, 2, 5, 37), (1, 1, 2, 2, 2, 2)),
                               # runs of 16 over the padding of 32-wide rows, read whole from inside the
                               # data and then zeroed (but at the data's first and last bytes), 5 columns of
                               # padding (a run's first 5 entries zero)
                               ("padded_panels", (3, 2, 3, 3), (2, 2, 4, 32), (1, 1, 1, 1, 1, 1)),
                               ("padded_panels_wide", (2, 3, 2, 4), (1, 3, 3, 26), (1, 1, 5, 1, 2, 1)),
                               # the same packed-panel edges at s1 = 2 (the implicit GEMM takes unit
                               # strides only, so these keep the panel path covered on AVX2 / AVX-512)
                               ("blocks_s1_2", (7, 30, 3, 3), (1, 30, 9, 40), (1, 2, 1, 1, 1, 1)),
                               ("padded_runs_s1_2", (4, 2, 3, 3), (2, 2, 5, 37), (1, 2, 2, 2, 2, 2)),
                               ("padded_panels_s1_2", (3, 2, 3, 3), (2, 2, 4, 32), (1, 2, 1, 1, 1, 1)),
                               # unit strides but output rows under half the padded row (panel path)
                               ("narrow_rows", (3, 2, 3, 5), (1, 2, 6, 4), (1, 1, 3, 1, 2, 1)),
                               # unit strides, K = 513 * 9 past the implicit GEMM's 4608 (panel path)
                               ("k_past_implicit", (2, 513, 3, 3), (1, 513, 3, 4), (1, 1, 1, 1, 1, 1)),
                               # unit strides, 57 x 4608 kernel floats past the implicit GEMM's 1 MiB (panel path)
                               ("kernel_past_implicit", (57, 512, 3, 3), (1, 512, 2, 3), (1, 1, 1, 1, 1, 1)),
                               # the implicit GEMM: 25 channels (chunks of 9 + 8 + 8 on AVX-512, 5 x 5 on
                               # AVX2), tiles across the ends of 72-column padded rows, two images (the
                               # padded copy rewritten between barriers), K = 27 in one k block
                               ("implicit_chunks", (25, 3, 3, 3), (2, 3, 5, 70), (1, 1, 1, 1, 1, 1)),
                               # the implicit GEMM without column padding (padded row = input row),
                               # row padding 2 and dilation 2 along y: the last tile reads the zeros
                               # after the copy
                               ("implicit_unpadded_x", (6, 4, 3, 2), (1, 4, 7, 33), (1, 1, 0, 2, 1, 2))]:
        for kt, kn in ((mb.f32, "f32"), (mb.f16, "f16")):
            case(f"conv_2d_direct/{kn}xf32/{label}", "CONV_2D", [In(sk, kt), In(sd)],
                 lambda k, d, g=geo: mb.ops.conv_2d_direct(k, d, *g), lambda k, d, g=geo: conv_2d_ref(k, d, *g), ROWS)
    case("conv_2d_direct/f32/transposed_data", "CONV_2D", [In((2, 3, 3, 3)), In((1, 3, 7, 8))],
         lambda k, d: mb.ops.conv_2d_direct(k, d.permute(0, 1, 3, 2), 1, 1, 1, 0),
         lambda k, d: conv_2d_ref(k, d.transpose(0, 1, 3, 2), 1, 1, 1, 0, 1, 1), ROWS)
    case("conv_2d_direct/f32/empty_batch", "CONV_2D", [In((2, 3, 3, 3)), In((0, 3, 5, 5))],
         lambda k, d: mb.ops.conv_2d_direct(k, d), lambda k, d: np.zeros((0, 2, 3, 3)), ROWS)
    for label, sk, sd, geo in [("3x3", (3, 1, 3, 3), (2, 3, 9, 11), (1, 1, 1, 1, 1, 1)),
                               ("stride", (4, 1, 3, 2), (1, 4, 10, 9), (2, 3, 0, 1, 1, 1)),
                               ("dilated", (2, 1, 2, 3), (2, 2, 8, 12), (1, 2, 2, 1, 2, 3)),
                               # rows of several 8-pixel vectors and a tail (the AVX2 row), and a filter wider
                               # than its padded row, where no pixel has all its taps inside the input
                               ("wide", (5, 1, 3, 5), (1, 5, 6, 70), (1, 1, 2, 1, 1, 1)),
                               ("filter_wider_than_row", (2, 1, 3, 7), (1, 2, 4, 5), (1, 1, 4, 1, 2, 1)),
                               # the SIMD rows (vectors of 8 and 16 pixels): a row narrower than one vector, a
                               # last vector overlapping the one before (25 wide), whole vectors of padding (11
                               # columns) then a part-padded one, dilated taps over both paddings, rows of
                               # exactly 2 and 4 vectors with every tap inside (1x1 filter, 64 wide)
                               ("narrow", (3, 1, 3, 3), (1, 3, 5, 6), (1, 1, 1, 1, 1, 1)),
                               ("overlapping_tail", (4, 1, 3, 3), (1, 4, 3, 25), (1, 1, 1, 1, 1, 1)),
                               ("wide_padding", (2, 1, 2, 3), (1, 2, 4, 20), (1, 1, 11, 0, 1, 1)),
                               ("dilated_edges", (3, 1, 3, 4), (2, 3, 7, 50), (1, 2, 3, 2, 3, 1)),
                               ("exact_vectors", (2, 1, 3, 3), (1, 2, 4, 32), (1, 1, 1, 1, 1, 1)),
                               ("all_inside", (2, 1, 1, 1), (1, 2, 2, 64), (1, 1, 0, 0, 1, 1))]:
        for kt, kn in ((mb.f32, "f32"), (mb.f16, "f16")):
            case(f"conv_2d_dw_direct/{kn}xf32/{label}", "CONV_2D_DW", [In(sk, kt), In(sd)],
                 lambda k, d, g=geo: mb.ops.conv_2d_dw_direct(k, d, *g),
                 lambda k, d, g=geo: conv_2d_dw_ref(k, d, *g), ROWS)
    case("conv_2d_dw_direct/f32/transposed_data", "CONV_2D_DW", [In((3, 1, 3, 3)), In((1, 3, 7, 8))],
         lambda k, d: mb.ops.conv_2d_dw_direct(k, d.permute(0, 1, 3, 2), 1, 1, 1, 1),
         lambda k, d: conv_2d_dw_ref(k, d.transpose(0, 1, 3, 2), 1, 1, 1, 1, 1, 1), ROWS)
    # (label, kernel (IC, OC, KH, KW), data (N, IC, H, W), stride)
    for label, sk, sd, st in [("s1", (3, 4, 3, 3), (2, 3, 5, 6), 1), ("s2", (2, 3, 4, 3), (1, 2, 5, 4), 2),
                              ("s3_small_kernel", (4, 2, 2, 2), (2, 4, 3, 5), 3),
                              # past one GEMM block: 110 positions (> 96), 19*15 = 285 columns (> 256, cut in a channel)
                              ("blocks", (3, 19, 3, 5), (1, 3, 11, 10), 2),
                              # 260 input channels: two GEMM k blocks (256 + 4)
                              ("deep", (260, 2, 2, 2), (1, 260, 3, 4), 1),
                              # the CPU's runs of one input row: 100-wide rows cut by the 96-position blocks
                              ("wide_rows", (2, 3, 3, 4), (1, 2, 2, 100), 2),
                              # 31 channels of 9 taps: two column blocks (28 channels, then 3: a part token
                              # group), stride 2 over an odd filter width (a tap pair and a single tap)
                              ("column_blocks", (3, 31, 3, 3), (1, 3, 5, 6), 2)]:
        for kt, kn in ((mb.f32, "f32"), (mb.f16, "f16")):
            case(f"conv_transpose_2d_p0/{kn}xf32/{label}", "CONV_TRANSPOSE_2D", [In(sk, kt), In(sd)],
                 lambda k, d, st=st: mb.ops.conv_transpose_2d_p0(k, d, st),
                 lambda k, d, st=st: conv_transpose_2d_ref(k, d, st), ROWS)
    case("conv_transpose_2d_p0/f32/transposed_data", "CONV_TRANSPOSE_2D", [In((2, 3, 3, 3)), In((1, 2, 4, 5))],
         lambda k, d: mb.ops.conv_transpose_2d_p0(k, d.permute(0, 1, 3, 2), 2),
         lambda k, d: conv_transpose_2d_ref(k, d.transpose(0, 1, 3, 2), 2), ROWS)


top_k_cases()
scan_cases()
mask_cases()
roll_cases()
set_cases()
product_cases()
spatial2_cases()
