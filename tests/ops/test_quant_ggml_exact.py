"""ggml's super-block (k-quants), non-linear (iq4_nl, iq4_xs) and mxfp4 types against ggml and gguf-py.

mb.quantize must give ggml's bytes (ggml-python's libggml: ggml_quantize_chunk, which runs the
reference quantizers quantize_row_*_ref without an importance matrix; q8_K through its type traits'
from_float_ref) for random rows and adversarial ones: zeros, constants, NaN, infinities, 1e30
ranges, denormals. mb.dequantize must give gguf-py's floats (gguf.quants.dequantize) for random
bytes, and ggml's own (to_float) as well.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import metal_backend as mb

ggml = pytest.importorskip("ggml")
gguf_quants = pytest.importorskip("gguf.quants")
from gguf import GGMLQuantizationType as GT  # noqa: E402

# name -> (ggml type id, gguf-py type, quantizable by ggml without an importance matrix)
TYPES = {
    "q2_K": (10, GT.Q2_K),
    "q3_K": (11, GT.Q3_K),
    "q4_K": (12, GT.Q4_K),
    "q5_K": (13, GT.Q5_K),
    "q6_K": (14, GT.Q6_K),
    "iq4_nl": (20, GT.IQ4_NL),
    "iq4_xs": (23, GT.IQ4_XS),
    "mxfp4": (39, GT.MXFP4),
}
SIZES = {"q2_K": (256, 84), "q3_K": (256, 110), "q4_K": (256, 144), "q5_K": (256, 176), "q6_K": (256, 210),
         "q8_K": (256, 292), "iq4_nl": (32, 18), "iq4_xs": (256, 136), "mxfp4": (32, 17)}


def _ggml_base() -> ctypes.CDLL:
    import pathlib

    lib = ctypes.CDLL(str(next((pathlib.Path(ggml.__file__).parent / "lib").glob("libggml-base.*"))))
    lib.quantize_row_q8_K_ref.restype = None
    lib.quantize_row_q8_K_ref.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_int64]
    lib.dequantize_row_q8_K.restype = None
    lib.dequantize_row_q8_K.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64]
    return lib


def ggml_quantize(x: np.ndarray, name: str) -> bytes:
    """ggml's bytes for x (rows along the last axis)."""
    t = getattr(mb, name)
    x = np.ascontiguousarray(x, dtype=np.float32)
    n_per_row = x.shape[-1]
    nrows = x.size // n_per_row
    out = np.zeros(nrows * t.row_size(n_per_row), np.uint8)
    fptr = x.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    if name == "q8_K":
        # ggml_quantize_chunk has no q8_K (an activation type); its reference quantizer is exported.
        _ggml_base().quantize_row_q8_K_ref(fptr, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.size))
    else:
        ggml.ggml_quantize_chunk(t.id, fptr, out.ctypes.data_as(ctypes.c_void_p), 0, nrows, n_per_row, None)
    return out.tobytes()


def ggml_dequantize(data: bytes, name: str, n: int) -> np.ndarray:
    t = getattr(mb, name)
    raw = np.frombuffer(data, np.uint8).copy()
    y = np.zeros(n, np.float32)
    yptr = y.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    if name == "q8_K":  # no to_float in its type traits
        _ggml_base().dequantize_row_q8_K(raw.ctypes.data_as(ctypes.c_void_p), yptr, ctypes.c_int64(n))
    else:
        ggml.ggml_get_type_traits(t.id).contents.to_float(raw.ctypes.data_as(ctypes.c_void_p), yptr, n)
    return y


def _rows(rng: np.random.Generator):
    """(label, float32 array of rows of 256 * k values) covering the patterns that matter."""
    for scale in [1e-30, 1e-6, 1.0, 300.0, 1e30]:
        yield f"normal_x{scale:g}", (rng.standard_normal((6, 512)) * scale).astype(np.float32)
    yield "uniform", rng.uniform(-1, 1, (8, 256)).astype(np.float32)
    yield "positive", rng.uniform(0.5, 2, (4, 256)).astype(np.float32)
    yield "negative", rng.uniform(-2, -0.5, (4, 256)).astype(np.float32)
    yield "heavy_tails", rng.standard_cauchy((8, 256)).astype(np.float32)
    yield "zeros", np.zeros((2, 256), np.float32)
    yield "negative_zeros", np.full((1, 256), -0.0, np.float32)
    yield "constant", np.full((2, 256), 0.37, np.float32)
    yield "constant_negative", np.full((2, 256), -5.5, np.float32)
    yield "one_spike", np.where(np.arange(512) == 300, 9.0, 0.0).astype(np.float32).reshape(2, 256)
    sparse = rng.standard_normal((4, 256)).astype(np.float32)
    sparse[rng.random((4, 256)) < 0.8] = 0
    yield "sparse", sparse
    yield "denormals", (rng.standard_normal((4, 256)) * 1e-39).astype(np.float32)
    den = rng.standard_normal((4, 256)).astype(np.float32)
    den[:, ::3] = np.float32(1e-40)
    yield "denormals_mixed", den
    mixed = (rng.standard_normal((4, 256)) * 1e-30).astype(np.float32)
    mixed[:, ::37] = 1e30
    yield "mixed_magnitudes", mixed
    yield "max_float", np.where(rng.random((2, 256)) < 0.5, 3.4e38, -3.4e38).astype(np.float32)
    nan = rng.standard_normal((4, 256)).astype(np.float32)
    nan[0, 5] = np.nan
    nan[1, :] = np.nan
    nan[2, 100:140] = np.nan
    nan[3, ::2] = np.nan
    yield "nan", nan
    inf = rng.standard_normal((4, 256)).astype(np.float32)
    inf[0, 7] = np.inf
    inf[1, 9] = -np.inf
    inf[2, :] = np.inf
    inf[3, 0:32] = -np.inf
    yield "inf", inf
    both = rng.standard_normal((2, 256)).astype(np.float32)
    both[:, 3] = np.inf
    both[:, 200] = np.nan
    yield "nan_and_inf", both
    yield "repeated_rows", np.tile(rng.standard_normal(256).astype(np.float32), (4, 1))
    steps = (rng.integers(-8, 8, size=(8, 256)).astype(np.float32) * np.float32(0.1) + np.float32(0.05))
    yield "inexact_steps", steps
    yield "small_integers", rng.integers(-4, 4, size=(8, 256)).astype(np.float32)


ROWS = list(_rows(np.random.default_rng(20261201)))
QUANTIZABLE = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K", "iq4_nl", "iq4_xs", "mxfp4"]


def _first_difference(got: bytes, want: bytes, size: int) -> str:
    g = np.frombuffer(got, np.uint8).reshape(-1, size)
    w = np.frombuffer(want, np.uint8).reshape(-1, size)
    bad = np.nonzero((g != w).any(axis=1))[0]
    i = bad[0]
    cols = np.nonzero(g[i] != w[i])[0]
    return f"{len(bad)} block(s) differ; block {i} bytes {cols[:12].tolist()}: {g[i][cols[:12]]} vs {w[i][cols[:12]]}"


@pytest.mark.parametrize("name", QUANTIZABLE)
def test_type_traits(name):
    t = getattr(mb, name)
    block, size = SIZES[name]
    assert (t.block_size, t.type_size, t.is_quantized, t.name) == (block, size, True, name)
    assert t in mb.types and repr(t) == f"mb.{name}"
    assert t.row_size(512) == 512 // block * size
    with pytest.raises(mb.InvalidArgumentError, match=rf"block size {block}"):
        t.row_size(block + 16)


@pytest.mark.parametrize("name", QUANTIZABLE)
@pytest.mark.parametrize("label,x", ROWS, ids=[r[0] for r in ROWS])
def test_quantize_matches_ggml(name, label, x):
    t = getattr(mb, name)
    got = mb.quantize(x, t)
    want = ggml_quantize(x, name)
    assert len(got) == len(want) == x.size // t.block_size * t.type_size
    if got != want:
        pytest.fail(f"{name} {label}: " + _first_difference(got, want, t.type_size))


@pytest.mark.parametrize("name", QUANTIZABLE)
def test_quantize_many_random_rows_match_ggml(name):
    rng = np.random.default_rng(hash(name) % 2**32)
    scales = 2.0 ** rng.integers(-20, 20, size=(64, 1))
    x = (rng.standard_normal((64, 1024)) * scales).astype(np.float32)
    got = mb.quantize(x, getattr(mb, name))
    want = ggml_quantize(x, name)
    if got != want:
        pytest.fail(f"{name}: " + _first_difference(got, want, getattr(mb, name).type_size))


@pytest.mark.parametrize("name", list(TYPES))
def test_dequantize_random_blocks_matches_gguf_and_ggml(name):
    t = getattr(mb, name)
    rng = np.random.default_rng(7 + t.id)
    n_blocks = 2000
    raw = rng.integers(0, 256, size=(n_blocks, t.type_size), dtype=np.uint8)
    got = mb.dequantize(raw, t, (n_blocks * t.block_size,))
    with np.errstate(all="ignore"):
        want = gguf_quants.dequantize(raw, TYPES[name][1]).reshape(-1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, ggml_dequantize(raw.tobytes(), name, got.size))


def test_dequantize_q8_K_matches_ggml():
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, size=(100, 292), dtype=np.uint8)
    raw[:, 0:4] = np.frombuffer(rng.standard_normal(100).astype(np.float32).tobytes(), np.uint8).reshape(100, 4)
    got = mb.dequantize(raw, mb.q8_K, (100 * 256,))
    np.testing.assert_array_equal(got, ggml_dequantize(raw.tobytes(), "q8_K", got.size))


@pytest.mark.parametrize("name", list(TYPES))
def test_round_trip_error_is_small(name):
    """Not a reference check: the codes ggml's quantizer picks reconstruct the row closely."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((16, 256)).astype(np.float32)
    y = mb.dequantize(mb.quantize(x, getattr(mb, name)), getattr(mb, name), x.shape)
    bound = {"q2_K": 0.5, "q3_K": 0.3, "q4_K": 0.12, "q5_K": 0.06, "q6_K": 0.03, "iq4_nl": 0.12, "iq4_xs": 0.12,
             "mxfp4": 0.2}[name]
    assert np.sqrt(np.mean((x - y) ** 2)) < bound


@pytest.mark.parametrize("name", [n for n in QUANTIZABLE if SIZES[n][0] == 256])
def test_partial_super_block_raises(name):
    with pytest.raises(mb.InvalidArgumentError, match=r"256"):
        mb.quantize(np.zeros(32, np.float32), getattr(mb, name))
    with pytest.raises(mb.InvalidArgumentError, match=r"256"):
        mb.dequantize(b"\0" * 10, getattr(mb, name), (32,))
