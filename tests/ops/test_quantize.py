"""mb.quantize / mb.dequantize against independent references.

Quantized types are compared byte for byte with the numpy quantizers of the `gguf` package, which
mirror ggml's reference C quantizers; f16 with numpy's float16 cast; bf16 with a numpy version of the
round-to-nearest-even bit trick written below.
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

gguf_quants = pytest.importorskip("gguf.quants")
from gguf import GGMLQuantizationType as GT  # noqa: E402

QUANTS = {
    "q4_0": GT.Q4_0,
    "q4_1": GT.Q4_1,
    "q5_0": GT.Q5_0,
    "q5_1": GT.Q5_1,
    "q8_0": GT.Q8_0,
}

TRAITS = [
    # name, id, block_size, type_size, is_quantized
    ("f32", 0, 1, 4, False),
    ("f16", 1, 1, 2, False),
    ("bf16", 30, 1, 2, False),
    ("i32", 26, 1, 4, False),
    ("q4_0", 2, 32, 18, True),
    ("q4_1", 3, 32, 20, True),
    ("q5_0", 6, 32, 22, True),
    ("q5_1", 7, 32, 24, True),
    ("q8_0", 8, 32, 34, True),
]


def gguf_quantize(x: np.ndarray, name: str) -> bytes:
    # gguf casts scales to float16 and may overflow on purpose in the extreme cases; ggml does the same.
    with np.errstate(all="ignore"):
        return gguf_quants.quantize(np.ascontiguousarray(x, dtype=np.float32), QUANTS[name]).tobytes()


def gguf_dequantize(data: bytes, name: str, shape: tuple[int, ...]) -> np.ndarray:
    t = getattr(mb, name)
    raw = np.frombuffer(data, dtype=np.uint8).reshape(*shape[:-1], shape[-1] // t.block_size * t.type_size)
    with np.errstate(all="ignore"):
        return gguf_quants.dequantize(raw, QUANTS[name])


def bf16_reference(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    is_nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    quiet_nan = (u >> 16) | 0x40
    return np.where(is_nan, quiet_nan, rounded).astype(np.uint16)


def random_bits_f32(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)


# ---------------------------------------------------------------------------------------------
# Type objects


@pytest.mark.parametrize("name,type_id,block,size,quantized", TRAITS)
def test_type_traits(name, type_id, block, size, quantized):
    t = getattr(mb, name)
    assert t.name == name
    assert t.id == type_id
    assert t.block_size == block
    assert t.type_size == size
    assert t.is_quantized is quantized
    assert repr(t) == f"mb.{name}"
    assert t.row_size(64 * block) == 64 * size


def test_types_tuple():
    assert isinstance(mb.types, tuple)
    assert [t.name for t in mb.types] == ["f32", "f16", "bf16", "i32", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
                                          "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K", "iq4_nl", "iq4_xs",
                                          "mxfp4", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s",
                                          "iq1_m"]
    assert all(t is getattr(mb, t.name) for t in mb.types)
    assert len(set(mb.types)) == len(mb.types)
    assert mb.q4_0 == mb.types[4] and mb.q4_0 != mb.q4_1


def test_row_size_rejects_partial_block():
    with pytest.raises(mb.InvalidArgumentError, match=r"33.*32"):
        mb.q8_0.row_size(33)


# ---------------------------------------------------------------------------------------------
# Quantized types against gguf


def _cases(rng: np.random.Generator):
    """(label, float32 array) pairs covering the shapes and value patterns that matter."""
    for shape in [(32,), (1, 32), (7, 64), (2, 3, 128), (3, 4096)]:
        for scale in [1e-30, 1e-6, 1.0, 300.0, 1e30]:
            yield f"normal{shape}x{scale:g}", (rng.standard_normal(shape) * scale).astype(np.float32)
    yield "uniform", rng.uniform(-1, 1, (16, 256)).astype(np.float32)
    yield "positive", rng.uniform(0.5, 2, (4, 64)).astype(np.float32)
    yield "negative", rng.uniform(-2, -0.5, (4, 64)).astype(np.float32)
    yield "zeros", np.zeros((3, 64), np.float32)
    yield "constant", np.full((2, 96), 0.37, np.float32)
    yield "constant_negative", np.full((2, 32), -5.5, np.float32)
    yield "one_spike", np.where(np.arange(64) == 40, 9.0, 0.0).astype(np.float32).reshape(2, 32)
    # Mixed magnitudes inside one block: tiny values must round to the middle code.
    mixed = (rng.standard_normal((4, 64)) * 1e-30).astype(np.float32)
    mixed[:, ::17] = 1e30
    yield "mixed_magnitudes", mixed
    # Equal magnitudes of both signs: the first one found sets the sign of d.
    ties = np.tile(np.array([3.0, -3.0] * 16, np.float32), (2, 1))
    ties[1] *= -1
    yield "equal_magnitudes", ties
    yield "repeated_rows", np.tile(rng.standard_normal(128).astype(np.float32), (8, 1))
    # Rounding ties. With the extreme at -8 (q4_0) d = 1 and id = 1, so multiples of 0.5 put
    # x*id + 8.5 exactly on integers; likewise -16 for q5_0, a 0..15 or 0..31 range for q4_1 and
    # q5_1, and 127 for q8_0, whose roundf sends .5 away from zero.
    for extreme, lo, hi in [(-8.0, -8, 7.5), (-16.0, -16, 15.5), (-4.0, -4, 3.5), (127.0, -127, 127)]:
        halves = (rng.integers(int(lo * 2), int(hi * 2) + 1, size=(8, 64)) / 2).astype(np.float32)
        halves[:, 0] = extreme
        halves[:, 32] = extreme
        yield f"halves{extreme:g}", halves
    for top in [15.0, 31.0]:
        halves = (rng.integers(0, int(top * 2) + 1, size=(8, 64)) / 2).astype(np.float32)
        halves[:, [0, 32]] = 0.0
        halves[:, [1, 33]] = top
        yield f"range_halves{top:g}", halves
    # Non-power-of-two scales, where id = 1/d is inexact and x*id lands just around .5 boundaries.
    steps = rng.integers(-8, 8, size=(64, 32)).astype(np.float32) * np.float32(0.1) + np.float32(0.05)
    steps[:, 0] = -0.8
    yield "inexact_ties", steps


def _fma_sensitive(rng: np.random.Generator, extreme_steps: int, offset: float, n_blocks: int = 16) -> np.ndarray:
    """Blocks whose codes change if x*id and the offset are fused into one rounding (an FMA).

    ggml rounds the product to float32 before adding the offset; an implementation that lets the
    compiler contract the two gets these elements one code off. Each block has its positive extreme
    first, then values whose exact x*id lies just beside an integer minus the offset.
    """
    blocks = []
    while len(blocks) < n_blocks:
        m = np.float32(rng.uniform(1, 2) * 2.0 ** int(rng.integers(-10, 10)))
        inv = np.float32(1) / (m / np.float32(-extreme_steps))
        found: list[float] = []
        for k in range(1, extreme_steps):
            centre = np.float32((k - offset) / np.float64(inv))
            x = (centre.view(np.uint32) + np.arange(-200, 200).astype(np.uint32)).view(np.float32)
            x = x[np.abs(x) < m]
            unfused = np.trunc((x * inv) + np.float32(offset))
            fused = np.trunc((x.astype(np.float64) * np.float64(inv) + offset).astype(np.float32))
            found.extend(x[unfused != fused][:2].tolist())
        if len(found) >= 4:
            block = np.zeros(32, np.float32)
            block[0] = m
            block[1:1 + min(31, len(found))] = found[:31]
            blocks.append(block)
    return np.stack(blocks)


CASES = list(_cases(np.random.default_rng(20240601)))
CASES.append(("fma_sensitive_q4", _fma_sensitive(np.random.default_rng(1), 8, 8.5)))
CASES.append(("fma_sensitive_q5", _fma_sensitive(np.random.default_rng(2), 16, 16.5)))


@pytest.mark.parametrize("name", list(QUANTS))
@pytest.mark.parametrize("label,x", CASES, ids=[c[0] for c in CASES])
def test_quantize_matches_gguf(name, label, x):
    t = getattr(mb, name)
    got = mb.quantize(x, t)
    assert isinstance(got, bytes)
    want = gguf_quantize(x, name)
    assert len(got) == len(want) == x.size // 32 * t.type_size
    if got != want:
        g = np.frombuffer(got, np.uint8).reshape(-1, t.type_size)
        w = np.frombuffer(want, np.uint8).reshape(-1, t.type_size)
        bad = np.nonzero((g != w).any(axis=1))[0]
        pytest.fail(f"{name} {label}: {len(bad)} block(s) differ, first {bad[0]}: {g[bad[0]]} vs {w[bad[0]]}")


@pytest.mark.parametrize("name", list(QUANTS))
@pytest.mark.parametrize("label,x", CASES[::3], ids=[c[0] for c in CASES[::3]])
def test_dequantize_matches_gguf(name, label, x):
    t = getattr(mb, name)
    data = mb.quantize(x, t)
    got = mb.dequantize(data, t, x.shape)
    want = gguf_dequantize(data, name, x.shape)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name", list(QUANTS))
def test_dequantize_random_blocks_matches_gguf(name):
    t = getattr(mb, name)
    rng = np.random.default_rng(7)
    n_blocks = 3001
    blocks = rng.integers(0, 256, size=(n_blocks, t.type_size), dtype=np.uint8)
    # Clear one exponent bit of the half scales (d, and m for q4_1/q5_1) so they stay finite.
    blocks[:, 1] &= 0xBB
    if name in ("q4_1", "q5_1"):
        blocks[:, 3] &= 0xBB
    data = blocks.tobytes()
    shape = (n_blocks, 32)
    got = mb.dequantize(data, t, shape)
    want = gguf_dequantize(data, name, shape)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name", list(QUANTS))
def test_round_trip_error_is_bounded(name):
    t = getattr(mb, name)
    x = np.random.default_rng(3).standard_normal((64, 32)).astype(np.float32)
    y = mb.dequantize(mb.quantize(x, t), t, x.shape)
    amax = np.abs(x).max(axis=1, keepdims=True)
    spread = x.max(axis=1, keepdims=True) - x.min(axis=1, keepdims=True)
    # q4_0/q5_0 put the extreme at -8/-16 steps, so the opposite extreme may clip one step short.
    step = {"q4_0": amax / 8, "q5_0": amax / 16, "q4_1": spread / 30, "q5_1": spread / 62, "q8_0": amax / 254}[name]
    assert np.all(np.abs(x - y) <= step * 1.01 + 1e-3 * amax)


def test_all_negative_zero_block_keeps_ggml_sign():
    # ggml starts its signed maximum at +0.0, so an all-zero block gets d = +0.0 / -8 = -0.0
    # whatever the zeros' signs (gguf's numpy port takes the sign from the first element instead).
    for x in (np.zeros(32, np.float32), np.full(32, -0.0, np.float32)):
        assert mb.quantize(x, mb.q4_0) == b"\x00\x80" + b"\x88" * 16
        assert mb.quantize(x, mb.q5_0)[:2] == b"\x00\x80"


@pytest.mark.parametrize("name", list(QUANTS))
def test_non_finite_input_is_accepted(name):
    # ggml leaves NaN and infinity undefined for quantized types; ours must still return full blocks.
    t = getattr(mb, name)
    x = np.arange(64, dtype=np.float32) - 20
    x[[3, 40, 41]] = [np.nan, np.inf, -np.inf]
    data = mb.quantize(x, t)
    assert len(data) == 2 * t.type_size
    with np.errstate(all="ignore"):
        assert mb.dequantize(data, t, (64,)).shape == (64,)


def test_quantize_converts_input():
    rng = np.random.default_rng(11)
    x64 = rng.standard_normal((5, 64))
    x32 = x64.astype(np.float32)
    assert mb.quantize(x64, mb.q8_0) == mb.quantize(x32, mb.q8_0)
    assert mb.quantize(x64.tolist(), mb.q4_0) == mb.quantize(x32, mb.q4_0)
    ints = rng.integers(-100, 100, size=(2, 32))
    assert mb.quantize(ints, mb.q8_0) == gguf_quantize(ints.astype(np.float32), "q8_0")
    wide = rng.standard_normal((4, 128)).astype(np.float32)
    strided = wide[:, ::2]
    assert mb.quantize(strided, mb.q5_1) == gguf_quantize(np.ascontiguousarray(strided), "q5_1")
    fortran = np.asfortranarray(wide)
    assert mb.quantize(fortran, mb.q4_1) == mb.quantize(wide, mb.q4_1)


def test_empty_arrays():
    for t in mb.types:
        assert mb.quantize(np.zeros((0, 256), np.float32), t) == b""
        assert mb.quantize(np.zeros((3, 0), np.float32), t) == b""
        out = mb.dequantize(b"", t, (0, 256))
        assert out.shape == (0, 256) and out.dtype == np.float32


def test_dequantize_accepts_buffers():
    x = np.random.default_rng(5).standard_normal((2, 64)).astype(np.float32)
    data = mb.quantize(x, mb.q4_0)
    want = mb.dequantize(data, mb.q4_0, (2, 64))
    for buf in (bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        np.testing.assert_array_equal(mb.dequantize(buf, mb.q4_0, (2, 64)), want)
    np.testing.assert_array_equal(mb.dequantize(data, mb.q4_0, [128]), want.ravel())
    np.testing.assert_array_equal(mb.dequantize(data, mb.q4_0, 128), want.ravel())


# ---------------------------------------------------------------------------------------------
# Plain types


def _f16_inputs() -> np.ndarray:
    rng = np.random.default_rng(17)
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = halves[np.isfinite(halves)].astype(np.float64)
    finite.sort()
    # Exact midpoints between neighbouring halves (ties) and one f32 ulp either side of them.
    mids = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)
    near = np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))])
    special = np.array([0.0, -0.0, np.inf, -np.inf, 65504, 65519.996, 65520, 1e6, -1e6, 1e-8, 3e-8, 1e-45,
                        6.1035156e-05, 5.9604645e-08, 2.9802322e-08], np.float32)
    x = np.concatenate([random_bits_f32(rng, 200_000), near, special, rng.standard_normal(1000).astype(np.float32)])
    return x[~np.isnan(x)]


def test_f16_quantize_matches_numpy():
    x = _f16_inputs()
    got = np.frombuffer(mb.quantize(x, mb.f16), np.uint16)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(got, want)


def test_f16_nan_stays_quiet_nan():
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0xFF812345], np.uint32).view(np.float32)
    got = np.frombuffer(mb.quantize(nans, mb.f16), np.uint16)
    assert np.all((got & 0x7E00) == 0x7E00)
    np.testing.assert_array_equal(got >> 15, nans.view(np.uint32) >> 31)
    assert np.all(np.isnan(mb.dequantize(got.tobytes(), mb.f16, got.shape)))


def test_f16_dequantize_every_half():
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    got = mb.dequantize(h.tobytes(), mb.f16, (256, 256)).ravel()
    want = h.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_bf16_quantize_matches_reference():
    rng = np.random.default_rng(23)
    x = np.concatenate([
        random_bits_f32(rng, 300_000),
        # Exact ties below and above an even and an odd kept mantissa, and the largest finite value.
        np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x3F808001, 0x7F7FFFFF, 0x7F7F8000, 0x00008000,
                  0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0xFFBFFFFF, 0x80000000], np.uint32).view(np.float32),
    ])
    got = np.frombuffer(mb.quantize(x, mb.bf16), np.uint16)
    np.testing.assert_array_equal(got, bf16_reference(x))
    with np.errstate(all="ignore"):
        via_gguf = gguf_quants.quantize(x, GT.BF16).view(np.uint16)
    np.testing.assert_array_equal(got, via_gguf)


def test_bf16_dequantize_is_a_shift():
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    got = mb.dequantize(h, mb.bf16, (65536,))
    np.testing.assert_array_equal(got.view(np.uint32), h.astype(np.uint32) << 16)


def test_f32_and_i32():
    x = np.random.default_rng(29).standard_normal((3, 5)).astype(np.float32) * 1000
    assert mb.quantize(x, mb.f32) == x.tobytes()
    np.testing.assert_array_equal(mb.dequantize(x.tobytes(), mb.f32, x.shape), x)
    assert mb.quantize(x, mb.i32) == np.trunc(x).astype(np.int32).tobytes()
    ints = np.array([0, 1, -1, 2**31 - 1, -(2**31), 16777217, 123456789], np.int32)
    np.testing.assert_array_equal(mb.dequantize(ints, mb.i32, ints.shape), ints.astype(np.float32))


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("name", list(QUANTS))
def test_quantize_rejects_partial_blocks(name):
    t = getattr(mb, name)
    with pytest.raises(mb.InvalidArgumentError, match=rf"33.*\(2, 33\).*{name}.*32"):
        mb.quantize(np.zeros((2, 33), np.float32), t)
    with pytest.raises(ValueError, match="16"):
        mb.quantize(np.zeros(16, np.float32), t)
    with pytest.raises(ValueError):
        mb.quantize(np.float32(1.0), t)


def test_dequantize_rejects_wrong_sizes():
    with pytest.raises(mb.InvalidArgumentError, match=r"data has 2 bytes.*\(32,\).*q8_0.*34"):
        mb.dequantize(b"12", mb.q8_0, (32,))
    with pytest.raises(ValueError, match=r"35 bytes.*36"):
        mb.dequantize(bytes(35), mb.q4_0, (2, 32))
    with pytest.raises(mb.InvalidArgumentError, match=r"last dimension 48.*q5_0"):
        mb.dequantize(bytes(33), mb.q5_0, (48,))
    with pytest.raises(mb.InvalidArgumentError, match=r">= 0.*-32"):
        mb.dequantize(b"", mb.f32, (-32,))
    with pytest.raises(mb.InvalidArgumentError, match="C-contiguous"):
        mb.dequantize(np.zeros(72, np.uint8)[::2], mb.q4_0, (2, 32))
    with pytest.raises(TypeError):
        mb.dequantize(b"", mb.f32, (2.5,))
    with pytest.raises(TypeError):
        mb.dequantize(b"", mb.f32, "shape")
    with pytest.raises(TypeError):
        mb.dequantize(12, mb.f32, (3,))


def test_unknown_type():
    x = np.zeros(32, np.float32)
    with pytest.raises(mb.InvalidArgumentError, match="unknown type id 5"):
        mb.quantize(x, mb.Type(5))
    with pytest.raises(mb.InvalidArgumentError, match="unknown type id 99"):
        mb.dequantize(b"", mb.Type(99), (0,))
    assert repr(mb.Type(5)) == "mb.Type(5)"
    with pytest.raises(TypeError):
        mb.quantize(x, "q4_0")
    with pytest.raises(TypeError):
        mb.quantize(x, 2)


def test_quantize_rejects_non_numeric():
    with pytest.raises(ValueError):
        mb.quantize(np.array(["a"] * 32), mb.q8_0)
