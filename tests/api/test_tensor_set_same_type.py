"""Tensor.set of an array already in the tensor's float type (f16 into f16, f32 into f32) copies its
bytes as they are; other arrays (another dtype, byte order or layout) are converted value by value.
The fast copy is what loading a large model's f16 weights takes (issue 26): the bytes must be the
ones the array holds, NaN payloads and signed zeros included.
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb


def _tensor(type, shape):
    ctx = mb.Context()
    t = ctx.tensor(type, shape, name="t")
    buffer = mb.alloc_ctx_tensors(ctx, mb.device("CPU").buffer_type)
    return t, buffer, ctx


@pytest.mark.parametrize("type,dtype,bits", [(mb.f16, np.float16, np.uint16), (mb.f32, np.float32, np.uint32)])
def test_same_type_arrays_are_stored_bit_for_bit(type, dtype, bits):
    rng = np.random.default_rng(0)
    raw = rng.integers(0, np.iinfo(bits).max, (3, 64), dtype=bits, endpoint=True)
    raw[0, :4] = np.array([0x7E01, 0xFC01, 0x8000, 0x7C00] if dtype == np.float16 else
                          [0x7FC00001, 0xFF800001, 0x80000000, 0x7F800000], dtype=bits)  # NaN payloads, -0, inf
    values = raw.view(dtype)
    t, _buffer, _ctx = _tensor(type, values.shape)
    t.set(values)
    assert t.get_bytes() == raw.tobytes()


def test_other_layouts_and_byte_orders_are_converted():
    rng = np.random.default_rng(1)
    values = rng.standard_normal((4, 32)).astype(np.float32)
    t, _buffer, _ctx = _tensor(mb.f32, (4, 32))
    t.set(values.astype(">f4"))  # big-endian: its values, not its bytes
    np.testing.assert_array_equal(t.numpy(), values)
    h, _hbuffer, _hctx = _tensor(mb.f16, (4, 32))
    wide = np.zeros((4, 64), np.float16)
    wide[:, ::2] = values
    h.set(wide[:, ::2])  # strided
    np.testing.assert_array_equal(h.numpy(), values.astype(np.float16))
    h.set(values)  # f32 into f16: rounded to nearest even
    np.testing.assert_array_equal(h.numpy(), values.astype(np.float16))
    with pytest.raises(mb.InvalidArgumentError, match="does not match tensor"):
        h.set(np.zeros((4, 31), np.float16))
