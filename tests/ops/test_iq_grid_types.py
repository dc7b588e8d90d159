"""ggml's grid types (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m) against ggml and gguf-py.

Block sizes and ids are ggml's (ggml-python's ggml_type_size / ggml_blck_size); dequantizing random
blocks gives gguf-py's floats (gguf.quants.dequantize) and ggml's (its type traits' to_float); the grid
header is what tools/gen_iq_grids.py makes of gguf-py's tables; the CPU mat-vec equals the exact dot
product of the weights with ggml's own q8_K activations (its reference quantizer) to f32 rounding;
quantizing to them raises a typed error that says why.
(mul_mat, get_rows and cpy on every device: tests/op_cases.py's super-block rows.)
"""
from __future__ import annotations

import ctypes
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import metal_backend as mb

ggml = pytest.importorskip("ggml")
gguf_quants = pytest.importorskip("gguf.quants")
from gguf import GGMLQuantizationType as GT  # noqa: E402

from op_cases import grid_blocks  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]

# name -> (ggml id, gguf-py type, bytes per block of 256)
GRID = {
    "iq2_xxs": (16, GT.IQ2_XXS, 66),
    "iq2_xs": (17, GT.IQ2_XS, 74),
    "iq2_s": (22, GT.IQ2_S, 82),
    "iq3_xxs": (18, GT.IQ3_XXS, 98),
    "iq3_s": (21, GT.IQ3_S, 110),
    "iq1_s": (19, GT.IQ1_S, 50),
    "iq1_m": (29, GT.IQ1_M, 56),
}
NAMES = list(GRID)


def ggml_to_float(raw: np.ndarray, name: str, n: int) -> np.ndarray:
    y = np.zeros(n, np.float32)
    raw = np.ascontiguousarray(raw, np.uint8)
    traits = ggml.ggml_get_type_traits(GRID[name][0]).contents
    traits.to_float(raw.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), n)
    return y


@pytest.mark.parametrize("name", NAMES)
def test_traits_match_ggml(name):
    t = getattr(mb, name)
    gid, _, size = GRID[name]
    assert (t.id, t.name, t.block_size, t.type_size, t.is_quantized) == (gid, name, 256, size, True)
    assert ggml.ggml_type_size(gid) == size and ggml.ggml_blck_size(gid) == 256
    assert t in mb.types and getattr(mb, name) is t


def test_grid_header_is_generated_from_gguf_py():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_iq_grids.py")], capture_output=True, text=True,
                         check=True).stdout
    assert out == (ROOT / "shaders" / "iq_grids.h").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_dequantize_random_bytes_matches_gguf_py_and_ggml(name):
    t = getattr(mb, name)
    rng = np.random.default_rng(100 + t.id)
    n_blocks = 600
    raw = rng.integers(0, 256, size=(n_blocks, t.type_size), dtype=np.uint8)  # any f16 scale, inf/NaN too
    got = mb.dequantize(raw, t, (n_blocks * 256,))
    with np.errstate(all="ignore"):
        want = gguf_quants.dequantize(raw, GRID[name][1]).reshape(-1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, ggml_to_float(raw, name, got.size))


@pytest.mark.parametrize("name", NAMES)
def test_tensor_get_dequantizes_raw_blocks(name):
    t = getattr(mb, name)
    raw = grid_blocks(t, (3, 512), np.random.default_rng(5))
    ctx = mb.Context()
    x = ctx.tensor(t, (3, 512))
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    x.set(raw)
    assert x.get_bytes() == raw.tobytes()
    np.testing.assert_array_equal(x.get(), gguf_quants.dequantize(raw.reshape(3, -1), GRID[name][1]))


def _ggml_base() -> ctypes.CDLL:
    return ctypes.CDLL(str(next((pathlib.Path(ggml.__file__).parent / "lib").glob("libggml-base.*"))))


@pytest.mark.parametrize("name", NAMES)
def test_cpu_matvec_matches_ggml_vec_dot(name):
    """One token: mb's CPU mat-vec against the float64 dot of the dequantized weights with ggml's q8_K
    activations of the same row (quantize_row_q8_K_ref): the integer sums are exact, so only f32
    rounding of the block products and their running sum is left."""
    t = getattr(mb, name)
    rng = np.random.default_rng(7 + t.id)
    rows, k = 9, 1024
    raw = grid_blocks(t, (rows, k), rng)
    x = rng.standard_normal(k).astype(np.float32)
    ctx = mb.Context()
    w = ctx.tensor(t, (rows, k))
    xv = ctx.tensor(mb.f32, (1, k))
    out = mb.ops.mul_mat(w, xv)
    backend = mb.device("CPU").init_backend("n_threads=2")
    mb.alloc_ctx_tensors(ctx, backend)
    w.set(raw)
    xv.set(x.reshape(1, k))
    backend.graph_compute(mb.Graph(out))
    got = out.get().reshape(-1)

    lib = _ggml_base()
    lib.quantize_row_q8_K_ref.restype = None
    lib.quantize_row_q8_K_ref.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_int64]
    q8 = np.zeros(k // 256 * 292, np.uint8)
    lib.quantize_row_q8_K_ref(x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), q8.ctypes.data_as(ctypes.c_void_p), k)
    act = mb.dequantize(q8, mb.q8_K, (k,)).astype(np.float64)
    wf = mb.dequantize(raw, t, (rows, k)).astype(np.float64)
    want = wf @ act  # the exact dot of the weights with ggml's q8_K activations
    # f32 rounding of the per-block products and of the running sum: a few ulps of the row's |terms|.
    bound = 1e-6 * (np.abs(wf) @ np.abs(act)) + 1e-30
    err = np.abs(got - want)
    assert np.all(err <= bound), f"{name}: rows off by {err / bound} bounds"


@pytest.mark.parametrize("name", NAMES)
def test_quantize_refuses_with_the_reason(name):
    t = getattr(mb, name)
    needs_imatrix = name in ("iq2_xxs", "iq2_xs", "iq1_s", "iq1_m")
    with pytest.raises(mb.InvalidArgumentError, match=rf"cannot quantize to {name}: .*"
                       + ("importance matrix" if needs_imatrix else "neighbour tables")):
        mb.quantize(np.zeros(256, np.float32), t)
    ctx = mb.Context()
    x = ctx.tensor(t, (256,))
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    with pytest.raises(mb.InvalidArgumentError, match=rf"cannot quantize to {name}"):
        x.set(np.ones(256, np.float32))


@pytest.mark.parametrize("name", NAMES)
def test_partial_super_block_raises(name):
    with pytest.raises(mb.InvalidArgumentError, match=r"block size 256"):
        mb.dequantize(b"\0" * 10, getattr(mb, name), (32,))


@pytest.mark.parametrize("name", NAMES)
def test_no_device_copies_f32_into_them(name):
    t = getattr(mb, name)
    ctx = mb.Context()
    src = ctx.tensor(mb.f32, (256,))
    dst = ctx.tensor(t, (256,))
    node = mb.Graph(mb.ops.cpy(src, dst)).nodes[-1]
    assert mb.devices()
    for dev in mb.devices():
        assert not dev.supports_op(node), dev.name
