"""Property-based tests: random graphs of random ops on every device against float64 numpy.

Hypothesis draws a program: a few input tensors (random shapes, types f32/f16/q8_0/q4_0 where an op
takes them, values from a seeded numpy generator so that shrinking works on structure, not on float
bits) and a chain of ops over them: binary ops with broadcasting, unary ops, scale, norm/rms_norm,
soft_max(_ext) with masks, sum_rows/mean, mul_mat over f32/f16/q8_0/q4_0 weights, get_rows,
cpy/cont of views, permute/transpose/reshape/view (of quantized tensors too: those that move dim 0
must be refused). The same program is built and computed on the CPU and on MetalSim (and Metal
where present). Two more properties: every permute of a q4_0..q8_0 tensor is refused or exact
(cont, cpy, mul_mat), and host writes while a program is queued on MetalSim raise exactly when they
overlap what the queued work reads or writes.

Every node is checked on its own, against a float64 reference computed from the values its sources
hold on that device after the compute, so a wrong kernel is caught where it is wrong and rounding
does not accumulate along the chain. Data movement must be exact; arithmetic is compared as
sum((out - ref)^2) <= tol * sum(mag^2), where mag is the op's own magnitude bound (|a| + |b| for a
sum, |x| @ |w|^T for a product, max |x| / sqrt(var + eps) for a norm...), so cancellation in the
exact result is not counted against the op; tol per type as in op_cases.py.

Bounded for CI: a fixed number of examples, derandomized (the same programs every run) under the
default "ci" profile. MB_HYPOTHESIS_PROFILE=explore draws fresh random programs, more of them.
Failures found this way are kept below as regular tests (test_regression_*).
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import pytest

import metal_backend as mb
import op_cases

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

settings.register_profile(
    "ci", max_examples=int(os.environ.get("MB_HYPOTHESIS_EXAMPLES", "150")), deadline=None, derandomize=True,
    database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.register_profile(
    "explore", max_examples=int(os.environ.get("MB_HYPOTHESIS_EXAMPLES", "300")), deadline=None,
    print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.filter_too_much])
PROFILE = os.environ.get("MB_HYPOTHESIS_PROFILE", "ci")

# Tolerances (see op_cases.py for where each comes from).
ARITH = 1e-12
TRANSC = 1e-10
ROWS = 1e-10
ROPE = 1e-7
FA = 5e-4
F16_OUT = 1e-6
MM = {mb.f32: 1e-6, mb.f16: 1e-6, mb.q8_0: 5e-4, mb.q4_0: 5e-4}

QUANTS = (mb.q8_0, mb.q4_0)
EPS = 1e-5
MAX_ELEMENTS = 12000


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * x * (1.0 + 0.044715 * x * x)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2.0)))


# name -> (reference, domain check on the planned input values, exact?)
UNARY = {
    "neg": (lambda x: -x, None, True),
    "abs": (np.abs, None, True),
    "relu": (lambda x: np.maximum(x, 0.0), None, True),
    "sqr": (lambda x: x * x, lambda v: np.abs(v).max(initial=0) < 1e15, False),
    "sqrt": (np.sqrt, lambda v: v.min(initial=1) >= 0, False),
    "log": (np.log, lambda v: v.min(initial=1) > 1e-3, False),
    "exp": (np.exp, lambda v: v.max(initial=0) < 30, False),
    "expm1": (np.expm1, lambda v: v.max(initial=0) < 30, False),
    "tanh": (np.tanh, None, False),
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), None, False),
    "silu": (lambda x: x / (1.0 + np.exp(-x)), None, False),
    "gelu": (gelu_tanh, None, False),
    "gelu_erf": (gelu_erf, None, False),
    "gelu_quick": (lambda x: x / (1.0 + np.exp(-1.702 * x)), None, False),
    "sin": (np.sin, lambda v: np.abs(v).max(initial=0) < 100, False),
    "cos": (np.cos, lambda v: np.abs(v).max(initial=0) < 100, False),
}


def tile_to(b: np.ndarray, shape) -> np.ndarray:
    b = b.reshape((1,) * (len(shape) - b.ndim) + b.shape)
    return np.tile(b, [s // d if d else 1 for s, d in zip(shape, b.shape)])


def mul_mat_ref(w, x):
    """x @ w^T with w's batch dims repeated over x's (each w matrix serves consecutive x matrices)."""
    nd = max(w.ndim, x.ndim)
    w4 = w.reshape((1,) * (4 - w.ndim) + w.shape)
    x4 = x.reshape((1,) * (4 - x.ndim) + x.shape)
    w4 = np.repeat(np.repeat(w4, x4.shape[0] // w4.shape[0], axis=0), x4.shape[1] // w4.shape[1], axis=1)
    out = x4 @ np.swapaxes(w4, -1, -2)
    if x.ndim == 1:
        return out.reshape(-1)  # one row of activations gives a vector
    return out.reshape(out.shape[4 - nd:])


def softmax_ref(x, mask=None, scale=1.0):
    """(softmax, magnitude): the magnitude allows each output the relative error of its exponent's
    f32 argument, |x * scale + mask| * 2^-24, on top of its own rounding."""
    x4 = x.reshape((1,) * (4 - x.ndim) + x.shape)
    w = x4 * scale
    if mask is not None:
        m4 = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)[:, :, : x4.shape[2], :]
        w = w + tile_to(m4, x4.shape)
    mx = w.max(axis=-1, keepdims=True, initial=-np.inf)
    e = np.exp(w - mx)
    out = e / e.sum(axis=-1, keepdims=True)
    mag = out * (1.0 + np.abs(w).max(axis=-1, keepdims=True, initial=0))
    return out.reshape(x.shape), mag.reshape(x.shape)


def quantized_values(values: np.ndarray, t) -> np.ndarray:
    """What storing values in type t gives back (the library's converters, byte-exact with ggml and
    checked against gguf in test_quantize.py)."""
    v = np.ascontiguousarray(values, np.float32)
    return mb.dequantize(mb.quantize(v, t), t, v.shape).astype(np.float64)


# ------------------------------------------------------------------------------------------ programs

@dataclass
class Input:
    type: object
    shape: tuple
    values: np.ndarray  # what is passed to set()


@dataclass
class Step:
    """One op: `build(*src tensors)` makes the node; `ref(*src values)` gives (reference, magnitude),
    magnitude None for ops that must be exact; `tol` bounds the error against the magnitude."""
    label: str
    srcs: tuple  # pool indices
    build: Callable
    ref: Callable  # (*src values) -> (reference, magnitude or None for exact)
    tol: float = 0.0
    view: bool = False


@dataclass
class Program:
    """Inputs and steps in pool order: entry i of `items` is pool entry i, which sources refer to."""
    items: list = field(default_factory=list)

    @property
    def inputs(self) -> list:
        return [x for x in self.items if isinstance(x, Input)]

    @property
    def steps(self) -> list:
        return [x for x in self.items if isinstance(x, Step)]

    def describe(self) -> str:
        parts = []
        for i, x in enumerate(self.items):
            if isinstance(x, Input):
                parts.append(f"#{i}=input {str(x.type)[3:]}{x.shape}")
            else:
                parts.append(f"#{i}={x.label}({','.join(map(str, x.srcs))})")
        return "; ".join(parts)


class Planner:
    """Draws a program step by step, tracking each pool entry's tensor metadata (built on a scratch
    context, so shapes and strides come from the library itself) and planned float64 values."""

    def __init__(self, draw, rng: np.random.Generator):
        self.draw = draw
        self.rng = rng
        self.prog = Program()
        self.ctx = mb.Context()
        self.tensors: list = []  # scratch tensors, one per pool entry
        self.values: list = []   # planned float64 values (numpy order)
        # CPY destinations: written by the graph, so no other node may read them (the order of such
        # a read and the write is not defined by the graph).
        self.hidden: set = set()

    # --- pool
    def add_input(self, t, shape, gen="normal") -> int:
        rng = self.rng
        if t == mb.i32:
            values = rng.integers(0, gen, shape).astype(np.int32)
            planned = values.astype(np.float64)
        else:
            if gen == "positive":
                values = rng.uniform(0.5, 3.0, shape)
            elif gen == "mask":
                values = rng.uniform(-3.0, 0.5, shape)
            elif gen == "clean":
                values = rng.standard_normal(shape)
            else:
                values = rng.standard_normal(shape) * self.draw(st.sampled_from([1.0, 1.0, 0.01, 30.0]))
                if values.size and gen == "normal" and self.draw(st.integers(0, 9)) == 0:
                    # Now and then a NaN, which every arithmetic op must carry into what depends on it.
                    values.reshape(-1)[rng.integers(0, values.size, 2)] = np.nan
            values = values.astype(np.float32)
            planned = quantized_values(values, t) if t not in (mb.f32,) else values.astype(np.float64)
        self.prog.items.append(Input(t, tuple(shape), values))
        self.tensors.append(self.ctx.tensor(t, shape))
        self.values.append(planned)
        return len(self.tensors) - 1

    def add_step(self, step: Step) -> int:
        node = step.build(*[self.tensors[i] for i in step.srcs])
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # means of empty rows
            ref, _ = step.ref(*[self.values[i] for i in step.srcs])
        assert tuple(node.shape) == tuple(np.shape(ref)), f"{step.label}: shape {node.shape} != {np.shape(ref)}"
        self.prog.items.append(step)
        self.tensors.append(node)
        self.values.append(np.asarray(ref, np.float64))
        return len(self.tensors) - 1

    def pick(self, pred=lambda t, v: True) -> Optional[int]:
        ok = [i for i, (t, v) in enumerate(zip(self.tensors, self.values)) if i not in self.hidden and pred(t, v)]
        if not ok:
            return None
        return self.draw(st.sampled_from(ok))

    # --- shapes
    def shape(self, min_dims=1, max_dims=4, last=None, quantized=False) -> tuple:
        """Mostly small dims, sometimes sizes that switch kernels (many tokens for mul_mat, rows longer
        than one simdgroup pass), rarely empty; at most MAX_ELEMENTS elements."""
        nd = self.draw(st.integers(min_dims, max_dims))
        dims = [self.draw(st.one_of(st.integers(1, 4), st.sampled_from([0, 7, 17, 40, 70]))) for _ in range(nd - 1)]
        if last is None:
            last = self.draw(st.sampled_from([32, 64]) if quantized else
                             st.one_of(st.integers(1, 40), st.sampled_from([32, 64, 96, 256, 1030])))
        shape = dims + [last]
        while int(np.prod(shape)) > MAX_ELEMENTS:
            i = int(np.argmax(shape[:-1])) if nd > 1 else 0
            if nd == 1 or shape[i] <= 1:
                shape[-1] = max(1, shape[-1] // 2)
            else:
                shape[i] = shape[i] // 2
        return tuple(shape)

    def broadcast_shape(self, shape) -> tuple:
        """A shape whose dims each divide shape's (ggml's repeat rule), with a random leading cut."""
        out = []
        for d in shape:
            divs = [k for k in range(1, d + 1) if d % k == 0]
            out.append(self.draw(st.sampled_from([d, 1] + divs)))
        cut = self.draw(st.integers(0, len(out) - 1))
        return tuple(out[cut:])


def repeats(small: int, big: int) -> bool:
    """ggml's broadcast rule for one dim: an empty dim only onto an empty one, else a divisor."""
    return big == 0 if small == 0 else big % small == 0


def bounded(v, limit=1e15) -> bool:
    """No infinities, and every non-NaN value below limit in magnitude (NaNs allowed)."""
    a = np.abs(v)
    return not np.isinf(a).any() and (a.size == 0 or np.isnan(a).all() or float(np.nanmax(a)) < limit)


def is_f32(t, v):
    return t.type == mb.f32


def finite(v):
    return np.all(np.isfinite(v))


def step_binary(p: Planner):
    name = p.draw(st.sampled_from(["add", "sub", "mul", "div"]))
    a = p.pick(lambda t, v: is_f32(t, v) and bounded(v))
    if a is None:
        return
    a_shape = tuple(p.tensors[a].shape)
    b_from_pool = p.draw(st.booleans())
    b = None
    if b_from_pool:
        b = p.pick(lambda t, v: t.type in (mb.f32, mb.f16) and bounded(v) and len(t.shape) <= len(a_shape) and all(
            repeats(y, x) for x, y in zip(a_shape[::-1], tuple(t.shape)[::-1]))
            and (name != "div" or np.nanmin(np.abs(v), initial=1) > 0.1))
    if b is None:
        bt = p.draw(st.sampled_from([mb.f32, mb.f32, mb.f16]))
        b = p.add_input(bt, p.broadcast_shape(a_shape), "positive" if name == "div" else "normal")
    fn = getattr(mb.ops, name)
    np_fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[name]

    def ref(av, bv, np_fn=np_fn, name=name):
        bb = tile_to(bv, av.shape)
        mag = np.abs(av) + np.abs(bb) if name in ("add", "sub") else np.abs(np_fn(av, bb))
        return np_fn(av, bb), mag

    p.add_step(Step(name, (a, b), fn, ref, ARITH))


def step_unary(p: Planner):
    name = p.draw(st.sampled_from(sorted(UNARY)))
    npfn, domain, exact = UNARY[name]
    a = p.pick(lambda t, v: is_f32(t, v) and finite(v) and (domain is None or domain(v)))
    if a is None:
        return

    def ref(av, npfn=npfn, exact=exact, name=name):
        out = npfn(av)
        if exact:
            return out, None
        # f32 evaluation errs by a few ulps of the argument as well as of the result (sin of a large
        # angle, gelu's 1 + tanh cancelling for negative x, log near 1).
        return out, np.abs(out) + (1.0 if name == "log" else 0.1 * np.abs(av))

    p.add_step(Step(name, (a,), getattr(mb.ops, name), ref, TRANSC))


def step_scale(p: Planner):
    a = p.pick(lambda t, v: is_f32(t, v) and bounded(v))
    if a is None:
        return
    s = p.draw(st.sampled_from([0.5, -2.0, 0.125, 3.0]))
    b = p.draw(st.sampled_from([0.0, 0.0, 1.0, -0.25]))
    p.add_step(Step(f"scale[{s},{b}]", (a,), lambda x, s=s, b=b: mb.ops.scale(x, s, b),
                    lambda av, s=s, b=b: (av * s + b, np.abs(av * s) + abs(b)), ARITH))


def _norm_ref(name):
    def ref(av):
        if name == "norm":
            c = av - av.mean(axis=-1, keepdims=True)
            den = np.sqrt((c * c).mean(axis=-1, keepdims=True) + EPS)
        else:
            c = av
            den = np.sqrt((av * av).mean(axis=-1, keepdims=True) + EPS)
        mag = np.broadcast_to(np.abs(av).max(axis=-1, keepdims=True, initial=0) / den, av.shape)
        return c / den, mag

    return ref


def step_norm(p: Planner):
    name = p.draw(st.sampled_from(["norm", "rms_norm"]))
    a = p.pick(lambda t, v: is_f32(t, v) and finite(v) and np.abs(v).max(initial=0) < 1e10)
    if a is None:
        return
    p.add_step(Step(name, (a,), lambda x, name=name: getattr(mb.ops, name)(x, EPS), _norm_ref(name), ROWS))


def step_soft_max(p: Planner):
    a = p.pick(lambda t, v: is_f32(t, v) and finite(v) and np.abs(v).max(initial=0) < 1e4)
    if a is None:
        return
    shape = tuple(p.tensors[a].shape)
    kind = p.draw(st.sampled_from(["plain", "scale", "mask"]))
    if kind == "plain":
        p.add_step(Step("soft_max", (a,), mb.ops.soft_max, lambda av: softmax_ref(av), ROWS))
        return
    scale = p.draw(st.sampled_from([0.125, 1.0, 2.0]))
    if kind == "scale":
        p.add_step(Step(f"soft_max_ext[{scale}]", (a,), lambda x, s=scale: mb.ops.soft_max_ext(x, None, s),
                        lambda av, s=scale: softmax_ref(av, None, s), ROWS))
        return
    # A mask of (rows >= a's rows, n), broadcast over a's leading dims by modulo.
    rows = shape[-2] if len(shape) >= 2 else 1
    extra = p.draw(st.integers(0, 2))
    mt = p.draw(st.sampled_from([mb.f32, mb.f16]))
    m = p.add_input(mt, (rows + extra, shape[-1]), "mask")
    p.add_step(Step(f"soft_max_ext[{scale},mask]", (a, m), lambda x, mm, s=scale: mb.ops.soft_max_ext(x, mm, s),
                    lambda av, mv, s=scale: softmax_ref(av, mv, s), ROWS))


def step_reduce(p: Planner):
    name = p.draw(st.sampled_from(["sum_rows", "mean"]))
    a = p.pick(lambda t, v: is_f32(t, v) and bounded(v))
    if a is None:
        return

    def ref(av, name=name):
        out = av.sum(axis=-1, keepdims=True)
        mag = np.abs(av).sum(axis=-1, keepdims=True)
        if name == "mean":
            out, mag = out / av.shape[-1], mag / av.shape[-1]
        return out, mag

    p.add_step(Step(name, (a,), getattr(mb.ops, name), ref, ROWS))


def step_mul_mat(p: Planner):
    x = p.pick(lambda t, v: is_f32(t, v) and bounded(v, 1e6))
    if x is None:
        return
    xs = tuple(p.tensors[x].shape)
    k = xs[-1]
    wt = p.draw(st.sampled_from([mb.f32, mb.f16, mb.q8_0, mb.q4_0] if k % 32 == 0 else [mb.f32, mb.f16]))
    n = p.draw(st.one_of(st.integers(1, 9), st.sampled_from([32, 64, 70])))
    batch = xs[:-2]
    wbatch = tuple(p.draw(st.sampled_from(sorted({1, d} - {0}))) for d in batch)
    cut = p.draw(st.integers(0, len(wbatch)))
    wshape = wbatch[cut:] + (n, k)
    w = p.add_input(wt, wshape)
    p.add_step(Step(f"mul_mat[{str(wt)[3:]}]", (w, x), mb.ops.mul_mat,
                    lambda wv, xv: (mul_mat_ref(wv, xv), mul_mat_ref(np.abs(wv), np.abs(xv))), MM[wt]))


def step_get_rows(p: Planner):
    t = p.draw(st.sampled_from([mb.f32, mb.f16, mb.q8_0, mb.q4_0]))
    n_rows = p.draw(st.integers(1, 6))
    batch = p.draw(st.integers(1, 3))
    src_shape = (batch, n_rows, p.draw(st.sampled_from([32, 64]) if t in QUANTS else st.integers(1, 40)))
    a = p.pick(lambda tt, v: tt.type == t and len(tt.shape) == 3 and tuple(tt.shape)[:2] == src_shape[:2]
               and tt.shape[-1] % (32 if t in QUANTS else 1) == 0)
    if a is None:
        a = p.add_input(t, src_shape)
    n_idx = p.draw(st.integers(1, 5))
    idx = p.add_input(mb.i32, (batch, n_idx), n_rows)

    def ref(av, iv):
        ii = iv.astype(int)
        return np.stack([av[b][ii[b]] for b in range(av.shape[0])]), None

    p.add_step(Step("get_rows", (a, idx), mb.ops.get_rows, ref))


def step_view(p: Planner):
    a = p.pick()
    t = p.tensors[a]
    shape = tuple(t.shape)
    quant = t.type in QUANTS
    kinds = ["reshape"] if t.is_contiguous() and t.nelements > 0 else []
    if len(shape) >= 2:
        kinds += ["transpose", "permute"]
    kinds.append("slice")
    kind = p.draw(st.sampled_from(kinds))
    if kind in ("transpose", "permute"):
        nd = len(shape)
        axes = list(range(nd - 2)) + [nd - 1, nd - 2] if kind == "transpose" else \
            list(p.draw(st.permutations(list(range(nd)))))
        build = mb.ops.transpose if kind == "transpose" else (lambda x, axes=axes: mb.ops.permute(x, axes))
        if quant and axes[-1] != nd - 1:
            # Moving a quantized tensor's dim 0 (numpy's last axis) cuts its blocks, also where a row
            # is exactly one block and the strides happen to be multiples of it: refused at build.
            with pytest.raises(mb.InvalidArgumentError, match="cut its blocks"):
                build(t)
            return
        label = "transpose" if kind == "transpose" else f"permute{tuple(axes)}"
        p.add_step(Step(label, (a,), build, lambda av, axes=axes: (np.transpose(av, axes), None), view=True))
    elif kind == "reshape":
        n = int(np.prod(shape))
        last_choices = [d for d in range(1, n + 1) if n % d == 0 and (not quant or d % 32 == 0)]
        last = p.draw(st.sampled_from(last_choices))
        rest = n // last
        mids = [d for d in range(1, rest + 1) if rest % d == 0]
        mid = p.draw(st.sampled_from(mids))
        new = (rest // mid, mid, last) if p.draw(st.booleans()) else (rest, last)
        p.add_step(Step(f"reshape{new}", (a,), lambda x, new=new: mb.ops.reshape(x, new),
                        lambda av, new=new: (av.reshape(new), None), view=True))
    else:
        # A sub-block of the outer dims, keeping strides: rows [r0, r0 + nr) of dim -2 (or elements of a 1-D
        # tensor), through ops.view with the source's strides and a byte offset.
        nb = t.nb  # ggml order
        nd = len(shape)
        if nd == 1:
            if quant:
                return
            n = shape[0]
            # An empty tensor has no memory to offset into: its only view starts at 0 (numpy slices
            # anywhere, but there is no byte to start at).
            start = p.draw(st.integers(0, n - 1)) if n else 0
            length = p.draw(st.integers(1, n - start)) if n else 0
            p.add_step(Step(f"slice[{start}:{start + length}]", (a,),
                            lambda x, s=start, l=length, e=nb[0]: mb.ops.view(x, (l,), (e,), s * e),
                            lambda av, s=start, l=length: (av[s:s + l], None), view=True))
            return
        rows = shape[-2]
        if rows == 0:
            return
        empty = int(np.prod(shape)) == 0  # another dim is 0: as above, the view starts at byte 0
        start = 0 if empty else p.draw(st.integers(0, rows - 1))
        length = p.draw(st.integers(1, rows - start))
        new = shape[:-2] + (length, shape[-1])
        strides = tuple(nb[nd - 1 - i] for i in range(nd))
        p.add_step(Step(f"rows[{start}:{start + length}]", (a,),
                        lambda x, new=new, strides=strides, off=start * nb[1]: mb.ops.view(x, new, strides, off),
                        lambda av, s=start, l=length: (av[..., s:s + l, :], None), view=True))


def step_copy(p: Planner):
    a = p.pick()
    t = p.tensors[a]
    shape = tuple(t.shape)
    if p.draw(st.booleans()) or t.type != mb.f32:
        p.add_step(Step("cont", (a,), mb.ops.cont, lambda av: (av, None)))
        return
    targets = [mb.f32, mb.f16] + ([mb.q8_0, mb.q4_0] if shape[-1] % 32 == 0 else [])
    dt = p.draw(st.sampled_from(targets))
    d = p.add_input(dt, shape, "normal")
    p.hidden.add(d)

    def ref(av, dv, dt=dt):
        if dt == mb.f32:
            return av, None
        return quantized_values(av, dt), None

    p.add_step(Step(f"cpy[{str(dt)[3:]}]", (a, d), mb.ops.cpy, ref))


def step_clamp(p: Planner):
    a = p.pick(lambda t, v: is_f32(t, v))
    if a is None:
        return
    lo = p.draw(st.sampled_from([-1.0, -0.5, 0.0]))
    hi = p.draw(st.sampled_from([0.0, 0.25, 2.0]))
    p.add_step(Step(f"clamp[{lo},{hi}]", (a,), lambda x, lo=lo, hi=hi: mb.ops.clamp(x, lo, hi),
                    lambda av, lo=lo, hi=hi: (np.clip(av, lo, hi), None)))


def step_xielu(p: Planner):
    a = p.pick(lambda t, v: is_f32(t, v) and finite(v) and np.abs(v).max(initial=0) < 1e6)
    if a is None:
        return
    prm = p.draw(st.sampled_from([(0.8, 0.8, 0.5, -1e-6), (-0.3, 1.7, 0.25, -0.01)]))
    p.add_step(Step(f"xielu{prm}", (a,), lambda x, prm=prm: mb.ops.xielu(x, *prm),
                    lambda av, prm=prm: (op_cases.xielu_ref(av, *prm), np.abs(av) * (1 + np.abs(av)) + 1e-3),
                    TRANSC))


def step_interpolate(p: Planner):
    """upscale / interpolate in every mode onto a drawn shape (up or down on each axis)."""
    a = p.pick(lambda t, v: is_f32(t, v) and finite(v) and v.size > 0 and np.abs(v).max(initial=0) < 1e10)
    if a is None:
        return
    shape = tuple(p.tensors[a].shape)
    mode = p.draw(st.sampled_from(["nearest", "bilinear", "bicubic", "bilinear_aa"]))
    aa = mode == "bilinear_aa"  # bilinear with antialias
    mode = "bilinear" if aa else mode
    align = p.draw(st.booleans())
    out = tuple(p.draw(st.integers(1, min(2 * d + 1, 48))) for d in shape)
    while int(np.prod(out)) > MAX_ELEMENTS:
        out = tuple(max(1, d // 2) for d in out)

    def ref(av, out=out, mode=mode, align=align, aa=aa):
        r = op_cases.interpolate_ref(av, out, mode, align, antialias=aa)
        return r, (None if mode == "nearest" else np.full(r.shape, np.abs(av).max(initial=0) + 1e-30))

    p.add_step(Step(f"interpolate[{out},{mode},{align},aa={aa}]", (a,),
                    lambda x, out=out, mode=mode, align=align, aa=aa: mb.ops.interpolate(x, out, mode, align,
                                                                                       antialias=aa), ref, ROWS))


def _rms(r):
    return np.full(np.shape(r), math.sqrt(float(np.mean(np.square(r)))) + 1e-30 if np.size(r) else 1.0)


def step_ssm_scan(p: Planner):
    """Mamba 1 (A per state) or 2 (A per head) on fresh inputs; the result feeds later steps."""
    nrs, ns, nt = p.draw(st.integers(1, 3)), p.draw(st.integers(1, 2)), p.draw(st.integers(0, 5))
    ng = p.draw(st.sampled_from([1, 2]))
    nh = ng * p.draw(st.integers(1, 2))
    nr, nc = p.draw(st.sampled_from([1, 5, 16, 33])), p.draw(st.sampled_from([1, 4, 16]))
    na = p.draw(st.sampled_from([1, nc]))
    ins = [p.add_input(mb.f32, sh, "clean") for sh in [(nrs, nh, nr, nc), (ns, nt, nh, nr), (ns, nt, nh)]]
    ins.append(p.add_input(mb.f32, (nh, na), "positive"))
    ins += [p.add_input(mb.f32, (ns, nt, ng, nc), "clean") for _ in range(2)]
    ins.append(p.add_input(mb.i32, (ns,), nrs))

    def ref(s, x, dt, A, B, C, ids):
        r = op_cases.ssm_scan_ref(s, x, dt, -A, B, C, ids)
        return r, _rms(r)

    p.add_step(Step(f"ssm_scan[{nrs},{ns},{nt},{nh},{nr},{nc},{ng},{na}]", tuple(ins),
                    lambda s, x, dt, A, B, C, ids: mb.ops.ssm_scan(s, x, dt, mb.ops.neg(A), B, C, ids), ref, ROWS))


def step_rwkv(p: Planner):
    name = p.draw(st.sampled_from(["rwkv_wkv6", "rwkv_wkv7"]))
    n = p.draw(st.integers(1, 2))
    T, H, S = n * p.draw(st.integers(1, 3)), p.draw(st.integers(1, 3)), p.draw(st.sampled_from([1, 4, 16, 33]))
    tok = (T, H, S)
    if name == "rwkv_wkv6":
        shapes = [tok, tok, tok, (H, S), tok, (n, S * S * H)]
        gens = ["clean"] * 6
    else:
        shapes = [tok] * 6 + [(n, S * S * H)]
        gens = ["clean"] * 7
    ins = tuple(p.add_input(mb.f32, sh, g) for sh, g in zip(shapes, gens))
    # Decays in (0, 1) (w, td through a sigmoid); WKV7's a, b scaled down to keep the state bounded.
    if name == "rwkv_wkv6":
        def build(k, v, r, tf, td, st_):
            return mb.ops.rwkv_wkv6(k, v, r, tf, mb.ops.sigmoid(td), st_)

        def ref(k, v, r, tf, td, st_):
            out = op_cases.rwkv_wkv6_ref(k, v, r, tf, 1 / (1 + np.exp(-td)), st_)
            return out, _rms(out)
    else:
        def build(r, w, k, v, a, b, st_):
            return mb.ops.rwkv_wkv7(r, mb.ops.sigmoid(w), k, v, mb.ops.scale(a, 0.1), mb.ops.scale(b, 0.1), st_)

        def ref(r, w, k, v, a, b, st_):
            out = op_cases.rwkv_wkv7_ref(r, 1 / (1 + np.exp(-w)), k, v, a * 0.1, b * 0.1, st_)
            return out, _rms(out)

    p.add_step(Step(f"{name}[{T},{H},{S},{n}]", ins, build, ref, ROWS))


def step_layout(p: Planner):
    """concat, repeat and pad: data movement, exact."""
    a = p.pick(lambda t, v: t.type in (mb.f32, mb.f16))
    if a is None:
        return
    shape = tuple(p.tensors[a].shape)
    kind = p.draw(st.sampled_from(["concat", "repeat", "pad"]))
    if kind == "concat":
        axis = p.draw(st.integers(0, len(shape) - 1))
        other = list(shape)
        other[axis] = p.draw(st.integers(1, 4))
        b = p.add_input(p.tensors[a].type, tuple(other))
        p.add_step(Step(f"concat[{axis}]", (a, b), lambda x, y, axis=axis: mb.ops.concat(x, y, axis),
                        lambda av, bv, axis=axis: (np.concatenate([av, bv], axis), None)))
    elif kind == "repeat":
        target = tuple(d * p.draw(st.integers(1, 3)) for d in shape)
        lead = tuple(p.draw(st.integers(1, 2)) for _ in range(p.draw(st.integers(0, 4 - len(shape)))))
        target = lead + target
        b = p.add_input(p.tensors[a].type, target)
        p.hidden.add(b)
        p.add_step(Step("repeat", (a, b), mb.ops.repeat, lambda av, bv: (tile_to(av, bv.shape), None)))
    else:
        pads = [p.draw(st.integers(0, 3)) for _ in shape]
        p.add_step(Step(f"pad{tuple(pads)}", (a,), lambda x, pads=pads: mb.ops.pad(x, pads),
                        lambda av, pads=pads: (np.pad(av, [(0, k) for k in pads]), None)))


def step_rope(p: Planner):
    """ROPE on a 3-D/4-D f32 tensor (numpy (B, T, H, D)), possibly a permuted view, one position per T."""
    a = p.pick(lambda t, v: is_f32(t, v) and len(t.shape) >= 3 and t.shape[-1] % 2 == 0 and t.shape[-1] >= 2
               and bounded(v, 1e6))
    if a is None:
        return
    shape = tuple(p.tensors[a].shape)
    d = shape[-1]
    n_dims = p.draw(st.sampled_from(sorted({d, max(2, (d // 2) - (d // 2) % 2)})))
    mode = p.draw(st.sampled_from([0, 2]))
    base = p.draw(st.sampled_from([10000.0, 500.0]))
    pos = p.add_input(mb.i32, (shape[-3],), 3000)

    def ref(av, pv, n_dims=n_dims, mode=mode, base=base):
        a4 = av.reshape((1,) * (4 - av.ndim) + av.shape)
        out = op_cases.rope_ref(a4, pv, n_dims, mode, base=base).reshape(av.shape)
        return out, np.abs(av) + np.abs(out)

    p.add_step(Step(f"rope[{n_dims},{mode},{base}]", (a, pos),
                    lambda x, ps, n_dims=n_dims, mode=mode, base=base: mb.ops.rope(x, ps, n_dims, mode, freq_base=base),
                    ref, ROPE))


def step_flash_attn(p: Planner):
    """FLASH_ATTN_EXT with q/k/v drawn as (B, H, n, D) tensors or as permuted (B, n, H, D) views."""
    b = p.draw(st.integers(1, 2))
    hkv = p.draw(st.integers(1, 2))
    h = hkv * p.draw(st.integers(1, 2))
    nq = p.draw(st.sampled_from([1, 3, 9, 33]))
    nkv = p.draw(st.sampled_from([1, 7, 32, 70]))
    d = p.draw(st.sampled_from([32, 40, 64, 80, 128]))
    kvt = p.draw(st.sampled_from([mb.f16, mb.f16, mb.f32] + ([mb.q8_0, mb.q4_0] if d % 32 == 0 else [])))
    srcs = []
    for n, heads, t in ((nq, h, mb.f32), (nkv, hkv, kvt), (nkv, hkv, kvt)):
        if p.draw(st.booleans()):
            x = p.add_input(t, (b, n, heads, d), "clean")
            srcs.append(p.add_step(Step("permute(0, 2, 1, 3)", (x,), lambda y: mb.ops.permute(y, [0, 2, 1, 3]),
                                        lambda yv: (np.transpose(yv, (0, 2, 1, 3)), None), view=True)))
        else:
            srcs.append(p.add_input(t, (b, heads, n, d), "clean"))
    masked = p.draw(st.booleans())
    if masked:
        srcs.append(p.add_input(mb.f16, (1, 1, nq + p.draw(st.integers(0, 3)), nkv), "mask"))
    scale = 1.0 / math.sqrt(d)
    softcap = p.draw(st.sampled_from([0.0, 0.0, 20.0]))

    def ref(qv, kv, vv, mv=None, scale=scale, softcap=softcap):
        out = op_cases.flash_attn_ref(qv, kv, vv, mv, scale, 0.0, softcap)
        return out, np.abs(out) + np.abs(vv).max(initial=0)

    p.add_step(Step(f"flash_attn_ext[{str(kvt)[3:]},softcap={softcap}]", tuple(srcs),
                    lambda q, k, v, m=None, scale=scale, softcap=softcap:
                    mb.ops.flash_attn_ext(q, k, v, m, scale, 0.0, softcap), ref, FA))


def step_fusable(p: Planner):
    """The patterns Metal fuses: an ADD chain (a + b + c ...) and NORM/RMS_NORM followed by MUL by a
    row vector and ADD of a row vector (a transformer's layer norm)."""
    a = p.pick(lambda t, v: is_f32(t, v) and bounded(v, 1e10) and len(t.shape) >= 1)
    if a is None:
        return
    shape = tuple(p.tensors[a].shape)
    if p.draw(st.booleans()):
        x = a
        for _ in range(p.draw(st.integers(2, 5))):
            b = p.add_input(mb.f32, p.broadcast_shape(shape))
            x = p.add_step(Step("add", (x, b), mb.ops.add,
                                lambda av, bv: (av + tile_to(bv, av.shape), np.abs(av) + np.abs(tile_to(bv, av.shape))),
                                ARITH))
        return
    name = p.draw(st.sampled_from(["norm", "rms_norm"]))
    n = p.add_step(Step(name, (a,), lambda x, name=name: getattr(mb.ops, name)(x, EPS), _norm_ref(name), ROWS))
    w = p.add_input(mb.f32, (shape[-1],))
    m = p.add_step(Step("mul", (n, w), mb.ops.mul,
                        lambda av, bv: (av * tile_to(bv, av.shape), np.abs(av * tile_to(bv, av.shape))), ARITH))
    b = p.add_input(mb.f32, (shape[-1],))
    p.add_step(Step("add", (m, b), mb.ops.add,
                    lambda av, bv: (av + tile_to(bv, av.shape), np.abs(av) + np.abs(tile_to(bv, av.shape))), ARITH))


STEPS = [step_binary, step_unary, step_scale, step_norm, step_soft_max, step_reduce, step_mul_mat, step_get_rows,
         step_view, step_view, step_copy, step_clamp, step_layout, step_rope, step_flash_attn, step_fusable,
         step_xielu, step_interpolate, step_ssm_scan, step_rwkv]


@st.composite
def programs(draw, max_ops=6):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p = Planner(draw, rng)
    for _ in range(draw(st.integers(1, 2))):
        p.add_input(mb.f32, p.shape())
    for _ in range(draw(st.integers(1, max_ops))):
        draw(st.sampled_from(STEPS))(p)
    return p.prog


# ------------------------------------------------------------------------------------------ running

def build(prog: Program, ctx):
    """The program's tensors in pool order, on ctx."""
    tensors = []
    for i, x in enumerate(prog.items):
        if isinstance(x, Input):
            tensors.append(ctx.tensor(x.type, x.shape, name=f"in{i}"))
        else:
            tensors.append(x.build(*[tensors[j] for j in x.srcs]))
    return tensors


def check_program(prog: Program, device, params="", again=False):
    """Builds and computes prog on device; checks every node against its local reference. Returns the
    ops the device refused (then nothing was computed there)."""
    ctx = mb.Context()
    tensors = build(prog, ctx)
    nodes = [t for t, x in zip(tensors, prog.items) if isinstance(x, Step)]
    if not nodes:
        return []
    graph = mb.Graph(nodes)
    refused = sorted({n.op for n in graph.nodes if n.op not in ("NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE")
                      and not device.supports_op(n)})
    if refused:
        assert device.name != "CPU", f"the CPU refuses {refused} in {prog.describe()}"
        return refused
    backend = device.init_backend(params)
    mb.alloc_ctx_tensors(ctx, backend)
    for t, x in zip(tensors, prog.items):
        if isinstance(x, Input):
            t.set(x.values)
    if device.name != "CPU" and not params:
        backend.graph_optimize(graph)  # reorders independent nodes; results must not change
    assert backend.graph_compute(graph) == mb.Status.SUCCESS
    values = [t.get().astype(np.float64) for t in tensors]
    if again:
        # A second compute of the same graph (cached plans, pipelines, fusion) gives the same bits.
        for t, x in zip(tensors, prog.items):
            if isinstance(x, Input):
                t.set(x.values)
        assert backend.graph_compute(graph) == mb.Status.SUCCESS
        for i, t in enumerate(tensors):
            np.testing.assert_array_equal(t.get(), values[i], err_msg=f"second compute, #{i}: {prog.describe()}")
    for i, s in enumerate(prog.items):
        if not isinstance(s, Step):
            continue
        where = f"node #{i} {s.label} on {device.name}{(' ' + params) if params else ''}: {prog.describe()}"
        src_vals = [values[j] for j in s.srcs]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ref, mag = s.ref(*src_vals)
        ref = np.asarray(ref, np.float64)
        got = values[i]
        assert got.shape == ref.shape, f"{where}: shape {got.shape} != {ref.shape}"
        if mag is None:
            np.testing.assert_array_equal(got, ref, err_msg=where)
            continue
        # An output stored in f32 cannot hold what overflows f32: compare where the reference fits.
        ref32 = ref.astype(np.float32)
        assert np.array_equal(np.isnan(got), np.isnan(ref32)), f"{where}: NaN pattern differs"
        fin = np.isfinite(ref32)
        inf = np.isinf(ref32)
        assert np.array_equal(got[inf], ref32[inf].astype(np.float64)), f"{where}: infinities differ"
        err = float(np.sum((got[fin] - ref[fin]) ** 2))
        den = float(np.sum(np.asarray(np.broadcast_to(mag, ref.shape), np.float64)[fin] ** 2))
        assert err <= s.tol * den or err == 0.0, f"{where}: error {err:.3g} > {s.tol:.3g} * {den:.3g}"
    return []


def compute_targets():
    """Every device; the CPU also with 3 threads (splits that do not divide evenly), MetalSim also under
    the run-ahead schedule (exposes missing threadgroup barriers)."""
    out = []
    for d in mb.devices():
        out.append((d, ""))
        if d.name == "CPU":
            out.append((d, "n_threads=3"))
        if d.name == "MetalSim":
            out.append((d, "schedule=1"))
    return out


@pytest.mark.slow
@settings(settings.get_profile(PROFILE))
@given(prog=programs())
def test_random_graphs_match_numpy(prog):
    for device, params in compute_targets():
        check_program(prog, device, params, again=not params)


ALL_QUANTS = (mb.q4_0, mb.q4_1, mb.q5_0, mb.q5_1, mb.q8_0)


@st.composite
def quantized_views(draw):
    """A block-quantized tensor (rows of 1 to 3 blocks, the one-block case included) and a permute
    or transpose of it: (type, numpy shape, numpy axes)."""
    t = draw(st.sampled_from(ALL_QUANTS))
    nd = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(nd - 2)) + (draw(st.sampled_from([1, 2, 32, 64])),
                                                                      32 * draw(st.integers(1, 3)))
    axes = (list(range(nd - 2)) + [nd - 1, nd - 2] if draw(st.booleans())
            else list(draw(st.permutations(list(range(nd))))))
    return t, shape, axes


@pytest.mark.slow
@settings(settings.get_profile(PROFILE))
@given(case=quantized_views())
def test_quantized_permutes_are_refused_or_exact(case):
    """Issue 24 item 5, as a property over shapes: a permute or transpose of a quantized tensor is
    refused at build time exactly when it moves dim 0 (numpy's last axis), whatever the strides;
    otherwise cont, cpy to f32 and mul_mat of the view equal numpy's transpose of the dequantized
    values on every device."""
    t, shape, axes = case
    rng = np.random.default_rng(len(shape) * 1000 + sum(shape))
    values = rng.standard_normal(shape).astype(np.float32)
    ref = np.transpose(quantized_values(values, t), axes)
    ctx = mb.Context()
    w = ctx.tensor(t, shape)
    if axes[-1] != len(shape) - 1:
        with pytest.raises(mb.InvalidArgumentError, match="cut its blocks"):
            mb.ops.permute(w, axes)
        return
    for device, params in compute_targets():
        ctx = mb.Context()
        w = ctx.tensor(t, shape)
        v = mb.ops.permute(w, axes)
        c = mb.ops.cont(v)
        f = mb.ops.cpy(v, ctx.tensor(mb.f32, ref.shape))
        x = ctx.tensor(mb.f32, ref.shape[:-2] + (3, ref.shape[-1]))
        y = mb.ops.mul_mat(v, x)
        backend = device.init_backend(params)
        mb.alloc_ctx_tensors(ctx, backend)
        w.set(values)
        xv = rng.standard_normal(x.shape).astype(np.float32)
        x.set(xv)
        assert backend.graph_compute(mb.Graph(c, f, y)) == mb.Status.SUCCESS
        where = f"{t} {shape} permute{tuple(axes)} on {device.name} {params}"
        np.testing.assert_array_equal(c.get().astype(np.float64), ref, err_msg=where)
        np.testing.assert_array_equal(f.get().astype(np.float64), ref, err_msg=where)
        got, want = y.get().astype(np.float64), mul_mat_ref(ref, xv.astype(np.float64))
        mag = mul_mat_ref(np.abs(ref), np.abs(xv.astype(np.float64)))
        assert float(np.sum((got - want) ** 2)) <= 5e-4 * float(np.sum(mag ** 2)), where


def _queued_ranges(graph) -> list:
    """[begin, end) byte ranges queued work reads or writes, as the backend marks them: each computing
    node's result and its sources (views included, over the bytes they span)."""
    out = []
    for n in graph.nodes:
        if n.op in ("NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE") or n.nelements == 0:
            continue
        for t in [n] + [s for s in n.src if s is not None]:
            if t.nbytes:
                out.append((t.buffer, t.offset, t.offset + t.nbytes))
    return out


@pytest.mark.slow
@settings(settings.get_profile(PROFILE))
@given(prog=programs(max_ops=4), data=st.data())
def test_host_writes_during_async_work_follow_the_hazard_rule(prog, data):
    """Issue 24 item 6, as a property: while a random program is queued on MetalSim, a host write
    (Tensor.set, Buffer.memset, Buffer.set) into any tensor of the pool raises PendingWorkError exactly
    when its bytes overlap what the queued work reads or writes; after synchronize() every node
    holds what a compute with no write attempted gives (the write was refused, or touched nothing
    the work uses)."""
    sim = next((d for d in mb.devices() if d.name == "MetalSim"), None)
    if sim is None:
        pytest.skip("MetalSim not built")
    ctx = mb.Context()
    tensors = build(prog, ctx)
    nodes = [t for t, x in zip(tensors, prog.items) if isinstance(x, Step)]
    if not nodes:
        return
    graph = mb.Graph(nodes)
    if any(n.op not in ("NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE") and not sim.supports_op(n)
           for n in graph.nodes):
        return
    backend = sim.init_backend()
    mb.alloc_ctx_tensors(ctx, backend)

    def set_inputs():
        for t, x in zip(tensors, prog.items):
            if isinstance(x, Input):
                t.set(x.values)

    set_inputs()
    assert backend.graph_compute(graph) == mb.Status.SUCCESS
    want = [t.get_bytes() if t.is_contiguous() else None for t in tensors]
    set_inputs()
    backend.graph_compute_async(graph)
    ranges = _queued_ranges(graph)
    i = data.draw(st.integers(0, len(tensors) - 1), label="target")
    t = tensors[i]
    kind = data.draw(st.sampled_from(["set", "memset", "buffer.set"]), label="write")
    if kind == "set" and not (isinstance(prog.items[i], Input) and t.is_contiguous()):
        kind = "memset"
    begin, end = t.offset, t.offset + t.nbytes
    hit = any(b is t.buffer and lo < end and begin < hi for b, lo, hi in ranges) and end > begin
    try:
        if kind == "set":
            t.set(prog.items[i].values)
        elif kind == "memset":
            t.buffer.memset(0, begin, end - begin)
        else:
            t.buffer.set(np.zeros(end - begin, np.uint8), begin)
        raised = False
    except mb.PendingWorkError as e:
        raised = True
        assert "graph_compute_async on MetalSim" in str(e)
    finally:
        backend.synchronize()
    assert raised == hit, f"{kind} of #{i} [{begin}, {end}): raised {raised}, overlaps queued work {hit}: " \
                          f"{prog.describe()}"
    for j, (tj, w) in enumerate(zip(tensors, want)):
        # A write that was allowed changed its own bytes (and views of them), nothing else.
        written = not hit and tj.buffer is t.buffer and tj.offset < end and begin < tj.offset + tj.nbytes
        if w is not None and not written:
            assert tj.get_bytes() == w, f"#{j} differs from a compute without the write: {prog.describe()}"


# ------------------------------------------------------------------------------------------ regressions
# Programs that failed (issue 11 items 5 and 8, found by probing and by this suite's NaN injection),
# kept as regular tests through the same checker.

def _mul_mat_step(wt):
    return Step(f"mul_mat[{str(wt)[3:]}]", (0, 1), mb.ops.mul_mat,
                lambda wv, xv: (mul_mat_ref(wv, xv), mul_mat_ref(np.abs(wv), np.abs(xv))), MM[wt])


@pytest.mark.parametrize("wt", [mb.q8_0, mb.q4_0], ids=["q8_0", "q4_0"])
def test_regression_nan_activation_reaches_quantized_mul_mat(wt):
    # One token with a NaN: the CPU's 8-bit activation blocks dropped it (fmax/max_ps skip NaN) and
    # returned finite values; every output of that token must be NaN.
    x = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
    x[0, 7] = np.nan
    w = np.random.default_rng(2).standard_normal((5, 64)).astype(np.float32)
    prog = Program([Input(wt, (5, 64), w), Input(mb.f32, (1, 64), x), _mul_mat_step(wt)])
    for device, params in compute_targets():
        check_program(prog, device, params)


@pytest.mark.parametrize("wt", [mb.q8_0, mb.q4_0], ids=["q8_0", "q4_0"])
def test_regression_nan_weight_block_reaches_mul_mat(wt):
    # A NaN among a row of ones was stored as a plain code: q4_0 read it back as 1, q8_0 as 0.
    w = np.ones((4, 64), np.float32)
    w[2, 40] = np.nan
    x = np.random.default_rng(3).standard_normal((3, 64)).astype(np.float32)
    prog = Program([Input(wt, (4, 64), w), Input(mb.f32, (3, 64), x), _mul_mat_step(wt)])
    for device, params in compute_targets():
        check_program(prog, device, params)


def test_regression_permuted_quantized_weights():
    # Quantized views that keep whole blocks (outer dims permuted) feed mul_mat, get_rows and cont.
    rng = np.random.default_rng(4)
    items = [Input(mb.q8_0, (3, 5, 64), rng.standard_normal((3, 5, 64)).astype(np.float32)),
             Step("permute(1, 0, 2)", (0,), lambda a: mb.ops.permute(a, [1, 0, 2]),
                  lambda av: (np.transpose(av, (1, 0, 2)), None), view=True),
             Input(mb.f32, (5, 4, 64), rng.standard_normal((5, 4, 64)).astype(np.float32)),
             Step("mul_mat[q8_0]", (1, 2), mb.ops.mul_mat,
                  lambda wv, xv: (mul_mat_ref(wv, xv), mul_mat_ref(np.abs(wv), np.abs(xv))), MM[mb.q8_0]),
             Input(mb.i32, (5, 2), rng.integers(0, 3, (5, 2)).astype(np.int32)),
             Step("get_rows", (1, 4), mb.ops.get_rows,
                  lambda av, iv: (np.stack([av[b][iv[b].astype(int)] for b in range(av.shape[0])]), None)),
             Step("cont", (1,), mb.ops.cont, lambda av: (av, None))]
    for device, params in compute_targets():
        check_program(Program(items), device, params, again=True)
