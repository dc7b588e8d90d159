"""Arrays that hold Python object pointers (dtype=object, structured dtypes with an object field) are
refused wherever bytes would be copied out of them or written into them: wrapping them as a mapped
buffer, Buffer.set, Tensor.set, set_tensor_async/get_tensor_async and dequantize. Writing device
bytes over object pointers would crash the interpreter later; copying them out leaks addresses."""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb
from isolated import run_isolated


def object_arrays():
    """(id, array): 8 bytes per element, so sizes match a 4-element f32 tensor's 16 bytes where asked."""
    plain = np.array([1, "x"], dtype=object)
    structured = np.zeros(1, dtype=[("a", "f8"), ("o", "O")])
    return [("object", plain), ("structured", structured)]


@pytest.fixture(params=object_arrays(), ids=[i for i, _ in object_arrays()])
def obj_array(request):
    return request.param[1]


def test_buffer_from_host_ptr_refuses_objects(device, obj_array):
    if not device.props.caps.buffer_from_host_ptr:
        pytest.skip(f"{device.name} cannot wrap host memory")
    for obj in (obj_array, memoryview(obj_array)):
        with pytest.raises(mb.InvalidArgumentError, match=r"buffer_from_host_ptr.*(dtype|format).*object pointers"):
            device.buffer_from_host_ptr(obj)


def test_buffer_set_refuses_objects(device, obj_array):
    with device.buffer_type.alloc(64) as buf:
        buf.clear(7)
        for obj in (obj_array, memoryview(obj_array)):
            with pytest.raises(mb.InvalidArgumentError, match=r"Buffer::set.*object pointers"):
                buf.set(obj)
        assert buf.get() == bytes([7]) * 64  # nothing was written


def test_error_names_the_dtype():
    dev = mb.device("CPU")
    with dev.buffer_type.alloc(64) as buf:
        with pytest.raises(mb.InvalidArgumentError, match=r"ndarray of dtype object"):
            buf.set(np.array([None, None], dtype=object))
        with pytest.raises(mb.InvalidArgumentError, match=r"dtype \[\('a', '<f8'\), \('o', 'O'\)\]"):
            buf.set(np.zeros(1, dtype=[("a", "f8"), ("o", "O")]))
        with pytest.raises(mb.InvalidArgumentError, match=r"memoryview of buffer format 'O'"):
            buf.set(memoryview(np.array([None], dtype=object)))


def test_field_named_O_is_plain_data():
    """The object code is looked for outside field names: a float field called 'O' is plain."""
    dev = mb.device("CPU")
    arr = np.zeros(2, dtype=[("O", "f4")])
    arr["O"] = [1.5, 2.5]
    with dev.buffer_type.alloc(8) as buf:
        buf.set(arr)
        assert np.frombuffer(buf.get(), np.float32).tolist() == [1.5, 2.5]


def test_tensor_set_and_async_copies_refuse_objects(target, obj_array):
    device, params = target
    backend = device.init_backend(params)
    ctx = mb.Context()
    t = ctx.tensor(mb.f32, (4,), name="t")
    mb.alloc_ctx_tensors(ctx, device.buffer_type)
    t.set(np.arange(4, dtype=np.float32))
    raw = memoryview(obj_array)
    assert raw.nbytes == t.nbytes  # the size check alone would let these through
    with pytest.raises(TypeError, match=r"Tensor.set.*dtype"):  # not numbers: never converted
        t.set(obj_array)
    with pytest.raises(mb.InvalidArgumentError, match=r"Tensor.set.*object pointers"):
        t.set(raw)
    with pytest.raises(mb.InvalidArgumentError, match=r"set_tensor_async.*object pointers"):
        backend.set_tensor_async(t, raw)
    with pytest.raises(mb.InvalidArgumentError, match=r"get_tensor_async.*object pointers"):
        backend.get_tensor_async(t, obj_array)
    backend.synchronize()
    assert t.get().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_dequantize_refuses_objects():
    with pytest.raises(mb.InvalidArgumentError, match=r"dequantize.*object pointers"):
        mb.dequantize(np.array([None] * 17, dtype=object), mb.q8_0, (32,))


def test_object_array_survives_refused_writes():
    """The probe that crashed: wrap an object array, write the buffer, then use the objects."""
    out = run_isolated("""
        import gc
        import numpy as np
        import metal_backend as mb
        dev = mb.device("CPU")
        arr = np.array([object() for _ in range(64)], dtype=object)
        for attempt in (lambda: dev.buffer_from_host_ptr(arr), lambda: dev.buffer_type.alloc(512).set(arr)):
            try:
                attempt()
            except mb.InvalidArgumentError:
                pass
        ctx = mb.Context()
        t = ctx.tensor(mb.f32, (128,))
        mb.alloc_ctx_tensors(ctx, dev.buffer_type)
        t.set(np.full(128, 1e30, np.float32))
        be = dev.init_backend()
        try:
            be.get_tensor_async(t, arr)
        except mb.InvalidArgumentError:
            pass
        be.synchronize()
        gc.collect()
        print(sum(1 for o in arr if type(o) is object))
    """)
    assert out.split() == ["64"]
