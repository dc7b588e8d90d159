"""Bad arguments found by adversarial probing (issue 11, item 9): each raises a typed error naming the
value instead of a bare RuntimeError, a message-less BufferError, silent acceptance or a wrong store."""
from __future__ import annotations

import re

import numpy as np
import pytest

import metal_backend as mb


@pytest.mark.parametrize("shape", [(2**63,), 2**63, (4, 2**64 + 5), (np.uint64(2**63),)])
def test_shape_entry_beyond_int64(shape):
    with pytest.raises(mb.OutOfRangeError, match=r"\[Context.tensor\] shape entry 9223372036854775808|"
                                                 r"shape entry 18446744073709551621"):
        mb.Context().tensor(mb.f32, shape)


def test_shape_entries_of_other_kinds():
    ctx = mb.Context()
    assert ctx.tensor(mb.f32, (np.int64(3), np.int32(4))).shape == (3, 4)
    assert ctx.tensor(mb.f32, np.int64(5)).shape == (5,)
    for bad in [(True, 2), (2.0,), ("3",), None]:
        with pytest.raises(TypeError, match=r"\[Context.tensor\] shape"):
            ctx.tensor(mb.f32, bad)


def test_view_and_reshape_huge_values():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4, 4))
    with pytest.raises(mb.OutOfRangeError, match=r"\[ops.view\] stride 9223372036854775808"):
        mb.ops.view(a, (2, 2), (2**63, 4))
    with pytest.raises(mb.OutOfRangeError, match=r"\[ops.reshape\] shape entry 9223372036854775808"):
        mb.ops.reshape(a, (2**63,))
    with pytest.raises(TypeError, match="strides must be a sequence"):
        mb.ops.view(a, (2, 2), 16)


def test_backend_option_beyond_int64():
    backend = mb.device("CPU").init_backend()
    with pytest.raises(mb.OutOfRangeError, match=r"option 'n_threads' 9223372036854775808"):
        backend.options["n_threads"] = 2**63
    backend.options["n_threads"] = True  # bools are ints for options
    assert backend.options["n_threads"] == 1


def test_memoryview_of_freed_buffer_names_it():
    buf = mb.device("CPU").buffer_type.alloc(64)
    buf.free()
    with pytest.raises(BufferError, match=r"\[Buffer.__buffer__\] buffer 'CPU' of 64 bytes was freed") as info:
        memoryview(buf)
    assert str(info.value)
    assert isinstance(info.value.__cause__, mb.MetalBackendError)


def test_memoryview_of_live_buffer_still_works():
    with mb.device("CPU").buffer_type.alloc(16) as buf:
        view = memoryview(buf)
        view[3] = 7
        assert buf.get(3, 1) == b"\x07"
        view.release()


@pytest.mark.parametrize("params", ["n_threads=2\x00junk", "n_threads=2\x00", "\x00n_threads=2",
                                    "n_threads=2\njunk=1", "n_threads=99999999999999999999999"])
def test_init_backend_rejects_garbage(device, params):
    with pytest.raises(mb.InvalidArgumentError, match="Backend::apply_params"):
        device.init_backend(params)


def test_init_backend_accepts_clean_params():
    backend = mb.device("CPU").init_backend(" n_threads = 2 ,")
    assert backend.options["n_threads"] == 2


@pytest.mark.parametrize("value, text", [(np.nan, "nan"), (1e20, "1e+20"), (-np.inf, "-inf"), (2**31, "2147483648.0"),
                                         (-2**31 - 1.0, "-2147483649.0")])
def test_i32_set_from_unrepresentable_float(value, text):
    ctx = mb.Context()
    t = ctx.tensor(mb.i32, (3,), name="idx")
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    t.set(np.array([1, 2, 3], np.int32))
    with pytest.raises(mb.InvalidArgumentError, match=rf"value {re.escape(text)} at flat index 1 .*i32 tensor 'idx'"):
        t.set(np.array([0.0, value, 1.0]))
    np.testing.assert_array_equal(t.get(), [1, 2, 3])  # nothing was written


def test_i32_set_from_out_of_range_ints():
    ctx = mb.Context()
    t = ctx.tensor(mb.i32, (2,), name="pos")
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    with pytest.raises(mb.InvalidArgumentError, match="value 4294967296 at flat index 0"):
        t.set(np.array([2**32, 1], np.int64))
    with pytest.raises(mb.InvalidArgumentError, match="value 18446744073709551615 at flat index 1"):
        t.set(np.array([0, 2**64 - 1], np.uint64))
    # Every representable value still goes through exactly.
    t.set(np.array([-2**31, 2**31 - 1], np.int64))
    np.testing.assert_array_equal(t.get(), [-2**31, 2**31 - 1])
    t.set(np.array([-2147483648.0, 2147483647.0]))
    np.testing.assert_array_equal(t.get(), [-2**31, 2**31 - 1])
    t.set(np.array([7, 9], np.uint32))
    np.testing.assert_array_equal(t.get(), [7, 9])
    t.set(np.array([True, False]))
    np.testing.assert_array_equal(t.get(), [1, 0])


def test_tensor_permute_huge_axis():
    a = mb.Context().tensor(mb.f32, (2, 3))
    with pytest.raises(mb.OutOfRangeError, match=r"\[ops.permute\] axis 9223372036854775808"):
        a.permute(2**63, 0)
    with pytest.raises(mb.InvalidArgumentError, match=r"\[ops.permute\] axis 7 is out of range"):
        a.permute(7, 0)
    with pytest.raises(TypeError, match=r"\[ops.permute\] axis must be an int"):
        a.permute(1.0, 0)
    assert a.permute(1, 0).shape == (3, 2)
    assert a.permute([1, 0]).shape == (3, 2)
