"""Tensors: metadata in numpy and ggml order, views, and data transfer with numpy."""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb


def _alloc(ctx, device=None):
    return mb.alloc_ctx_tensors(ctx, (device or mb.device("CPU")).buffer_type)


def test_metadata_numpy_and_ggml_order():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (2, 3, 5), name="a")
    assert a.shape == (2, 3, 5) and a.ndim == 3
    assert a.ne == (5, 3, 2, 1)
    assert a.nb == (4, 20, 60, 120)
    assert a.nbytes == 120 and a.nelements == 30
    assert a.type == mb.f32 and a.name == "a" and a.op == "NONE"
    assert a.is_contiguous() and not a.is_allocated() and a.buffer is None
    assert a.context is ctx
    q = ctx.tensor(mb.q4_0, (4, 64))
    assert q.nb[0] == 18 and q.nb[1] == 36 and q.nbytes == 4 * 36


@pytest.mark.parametrize("shape", [(), (1, 2, 3, 4, 5), (-1, 3)])
def test_bad_shapes(shape):
    with pytest.raises(mb.InvalidArgumentError):
        mb.Context().tensor(mb.f32, shape)


def test_quantized_row_must_be_whole_blocks():
    with pytest.raises(mb.InvalidArgumentError) as info:
        mb.Context().tensor(mb.q8_0, (2, 33))
    assert "33" in str(info.value) and "32" in str(info.value)


def test_set_get_roundtrip_every_type():
    ctx = mb.Context()
    rng = np.random.default_rng(1)
    tensors = {t: ctx.tensor(t, (3, 256)) for t in mb.types}
    _alloc(ctx)
    for t, tensor in tensors.items():
        x = rng.standard_normal((3, 256)).astype(np.float32)
        if t == mb.i32:
            x = rng.integers(-1000, 1000, (3, 256)).astype(np.int32)
        if t.name.startswith("iq") and t.name not in ("iq4_nl", "iq4_xs"):
            # The grid types, which ggml quantizes to only with an importance matrix or its grid
            # search (mb.quantize refuses them): the round trip is of raw blocks, as from a GGUF file.
            with pytest.raises(mb.InvalidArgumentError, match=f"cannot quantize to {t.name}"):
                tensor.set(x)
            raw = rng.integers(0, 256, (3, 256 // t.block_size * t.type_size), dtype=np.uint8)
            tensor.set(raw)
            assert tensor.get_bytes() == raw.tobytes()
            np.testing.assert_array_equal(tensor.get(), mb.dequantize(raw, t, (3, 256)))
            continue
        tensor.set(x)
        got = tensor.get()
        assert got.shape == (3, 256)
        if t in (mb.f32, mb.i32):
            assert np.array_equal(got, x)
        elif t == mb.f16:
            assert got.dtype == np.float16 and np.array_equal(got, x.astype(np.float16))
        else:
            expect = mb.dequantize(mb.quantize(x, t), t, (3, 256))
            assert got.dtype == np.float32 and np.array_equal(got, expect)
        if t != mb.i32:
            assert tensor.get_bytes() == bytes(mb.quantize(x, t))


def test_set_raw_bytes_and_uint8():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4,))
    _alloc(ctx)
    raw = np.arange(4, dtype=np.float32).tobytes()
    a.set(raw)
    assert a.get().tolist() == [0, 1, 2, 3]
    a.set(np.zeros(4, np.float32))
    a.set(np.frombuffer(raw, np.uint8).copy())  # a uint8 array is raw bytes too
    assert a.get().tolist() == [0, 1, 2, 3]
    with pytest.raises(mb.InvalidArgumentError) as info:
        a.set(b"\x00" * 15)
    assert "15" in str(info.value) and "16" in str(info.value)


def test_set_wrong_shape_or_dtype_raises():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (2, 3))
    _alloc(ctx)
    with pytest.raises(mb.InvalidArgumentError) as info:
        a.set(np.zeros((3, 2)))
    assert "(3, 2)" in str(info.value) and "(2, 3)" in str(info.value)
    with pytest.raises(TypeError):
        a.set(np.array([["a", "b", "c"]] * 2))


def test_unallocated_tensor_io_raises():
    a = mb.Context().tensor(mb.f32, (2,))
    for call in (lambda: a.set(np.zeros(2)), a.get, a.get_bytes, a.numpy):
        with pytest.raises(mb.InvalidArgumentError) as info:
            call()
        assert "not allocated" in str(info.value)


def test_numpy_view_is_zero_copy_and_strided():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (3, 4))
    _alloc(ctx)
    a.set(np.arange(12, dtype=np.float32).reshape(3, 4))
    v = a.numpy()
    v[0, 0] = 42
    assert a.get()[0, 0] == 42
    t = a.transpose()
    assert np.array_equal(t.numpy(), a.get().T)
    assert np.array_equal(t.get(), a.get().T)
    with pytest.raises(mb.InvalidArgumentError):
        ctx2 = mb.Context()
        q = ctx2.tensor(mb.q4_0, (1, 32))
        _alloc(ctx2)
        q.numpy()


def test_views_share_memory():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4, 6))
    r = a.reshape(6, 4)
    p = a.permute(1, 0)
    v = a.view((2, 6), offset=6 * 4)
    assert r.shape == (6, 4) and p.shape == (6, 4) and v.shape == (2, 6)
    assert r.op == "RESHAPE" and p.op == "PERMUTE" and v.op == "VIEW"
    _alloc(ctx)
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    a.set(x)
    assert np.array_equal(r.get(), x.reshape(6, 4))
    assert np.array_equal(p.get(), x.T)
    assert np.array_equal(v.get(), x[1:3])
    assert v.buffer is not None and v.offset == a.offset + 24
    assert not p.is_contiguous()
    with pytest.raises(mb.InvalidArgumentError):
        p.set(x.T)  # non-contiguous views are not writable through set()


def test_view_bounds_checked():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4, 6))
    with pytest.raises(mb.InvalidArgumentError) as info:
        a.view((4, 6), offset=4)
    assert "past the end" in str(info.value)
    with pytest.raises(mb.InvalidArgumentError):
        a.reshape(5, 5)
    with pytest.raises(mb.InvalidArgumentError):
        a.permute(1, 0).reshape(24)  # not contiguous


def test_permute_matches_numpy():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (2, 3, 4, 5))
    _alloc(ctx)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    a.set(x)
    for axes in [(0, 2, 1, 3), (3, 2, 1, 0), (1, 0, 3, 2), (2, 0, 3, 1)]:
        assert np.array_equal(a.permute(*axes).get(), np.transpose(x, axes)), axes
        assert np.array_equal(mb.ops.permute(a, list(axes)).get(), np.transpose(x, axes))
    with pytest.raises(mb.InvalidArgumentError):
        a.permute(0, 1, 2)
    with pytest.raises(mb.InvalidArgumentError):
        a.permute(0, 0, 1, 2)


def test_tensor_keeps_context_and_buffer_alive():
    import gc

    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (8,))
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    a.set(np.ones(8))
    del ctx
    gc.collect()
    assert a.get().sum() == 8 and a.context is not None


def test_ops_need_one_context():
    a = mb.Context().tensor(mb.f32, (4,))
    b = mb.Context().tensor(mb.f32, (4,))
    with pytest.raises(mb.InvalidArgumentError) as info:
        mb.ops.add(a, b)
    assert "Context" in str(info.value)
