"""DLPack: Tensor.__dlpack__ / __dlpack_device__ and mb.from_dlpack, checked with numpy.from_dlpack both
ways: shared memory, dtypes, strides, read-only flags, refusals, and lifetimes."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import metal_backend as mb

KDLCPU = (1, 0)
KDLMETAL = (8, 0)


def _host_visible(buft) -> bool:
    return not buft.name.endswith("_Private")


def _tensor(buft_or_dev, dtype, shape, name="t", values=None):
    ctx = mb.Context()
    t = ctx.tensor(dtype, shape, name=name)
    mb.alloc_ctx_tensors(ctx, buft_or_dev)
    if values is None:
        values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 3
    t.set(values)
    return t


def _capsule_name(capsule) -> str:
    return repr(capsule).split('"')[1]


# every host-visible buffer type: CPU, and Metal/MetalSim shared and mapped (unified memory: kDLCPU)
_HOST_BUFTS = [(d, b) for d in mb.devices() for b in d.buffer_types if _host_visible(b)]


def _mapped_or_plain(buft):
    """A tensor of this buffer type: mapped types wrap host memory, the others allocate."""
    if buft.name.endswith("_Mapped"):
        return buft.device.buffer_from_host_ptr(np.zeros(1 << 12, np.uint8))
    return buft


@pytest.mark.parametrize("dtype,np_dtype", [(mb.f32, np.float32), (mb.f16, np.float16), (mb.i32, np.int32)])
@pytest.mark.parametrize("host_buft", [b for _, b in _HOST_BUFTS], ids=[f"{d.name}-{b.name}" for d, b in _HOST_BUFTS])
def test_export_shares_memory(host_buft, dtype, np_dtype):
    buft = host_buft
    target = _mapped_or_plain(buft)
    if isinstance(target, mb.Buffer):
        ctx = mb.Context()
        t = ctx.tensor(dtype, (3, 5), name="t")
        t.place(target)
        t.set(np.arange(15).reshape(3, 5) - 3)
        assert t.buffer.buffer_type.name == buft.name
    else:
        t = _tensor(buft, dtype, (3, 5))
    assert t.__dlpack_device__() == KDLCPU
    arr = np.from_dlpack(t)
    assert arr.dtype == np_dtype and arr.shape == (3, 5) and arr.flags.writeable
    np.testing.assert_array_equal(arr, t.get())
    arr[1, 2] = 77
    assert t.get()[1, 2] == 77
    t.set(np.full((3, 5), 5))
    assert (arr == 5).all()


def test_capsule_versions():
    t = _tensor(mb.device("CPU"), mb.f32, (4,))
    assert _capsule_name(t.__dlpack__()) == "dltensor"
    assert _capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert _capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert _capsule_name(t.__dlpack__(max_version=(1, 3), dl_device=KDLCPU, copy=False)) == "dltensor_versioned"
    with pytest.raises(mb.InvalidArgumentError, match="max_version"):
        t.__dlpack__(max_version=(1,))
    with pytest.raises(TypeError, match="max_version"):
        t.__dlpack__(max_version="1.0")


@pytest.mark.parametrize("view", ["transpose", "permute", "slice", "step"])
def test_export_strided_views(view):
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (2, 3, 8), name="a")
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    ref = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    a.set(ref)
    if view == "transpose":
        v, want = a.transpose(), ref.transpose(0, 2, 1)
    elif view == "permute":
        v, want = a.permute(2, 0, 1), np.transpose(ref, (2, 0, 1))
    elif view == "slice":  # rows 1..2 of every matrix, columns 4..7
        v, want = a.view((2, 2, 4), strides=(96, 32, 4), offset=32 + 16), ref[:, 1:3, 4:]
    else:  # every other column
        v, want = a.view((2, 3, 4), strides=(96, 32, 8)), ref[:, :, ::2]
    arr = np.from_dlpack(v)
    assert arr.shape == want.shape
    np.testing.assert_array_equal(arr, want)
    np.testing.assert_array_equal(arr, v.get())
    arr[...] = -1  # written through the view's strides into a's memory
    back = a.get()
    if view == "step":
        assert (back[:, :, ::2] == -1).all() and (back[:, :, 1::2] == ref[:, :, 1::2]).all()


def test_stride_zero_views_export_read_only():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4,), name="a")
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    a.set(np.arange(4))
    b = a.view((3, 4), strides=(0, 4))  # the row repeated three times, as numpy.broadcast_to
    arr = np.from_dlpack(b)
    assert not arr.flags.writeable
    np.testing.assert_array_equal(arr, np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)))
    with pytest.raises(mb.DLPackError, match="read-only"):
        b.__dlpack__()  # a legacy capsule cannot say read-only


def test_bf16_roundtrip_through_our_import():
    # numpy has no bfloat16; our own import reads the DLPack dtype (kDLBfloat, 16 bits) back as bf16
    t = _tensor(mb.device("CPU"), mb.bf16, (2, 4), values=np.array([[1.5, -2, 3.25, 0], [1e3, -1e-2, 7, 8]]))
    u = mb.from_dlpack(t, mb.device("CPU"))
    assert u.type == mb.bf16 and u.shape == (2, 4)
    np.testing.assert_array_equal(u.get(), t.get())
    assert u.get_bytes() == t.get_bytes()
    u.set(np.ones((2, 4)))
    np.testing.assert_array_equal(t.get(), np.ones((2, 4)))


@pytest.mark.parametrize("qtype", [mb.q4_0, mb.q4_1, mb.q5_0, mb.q5_1, mb.q8_0])
def test_quantized_types_are_refused(qtype):
    t = _tensor(mb.device("CPU"), qtype, (2, 32))
    with pytest.raises(mb.DLPackError) as info:
        np.from_dlpack(t)
    assert isinstance(info.value, BufferError)
    assert qtype.name in str(info.value) and "'t'" in str(info.value)


def test_private_memory_is_refused_unless_copied():
    private = [b for d in mb.devices() for b in d.buffer_types if b.name.endswith("_Private")]
    if not private:
        pytest.skip("no device with private memory (MetalSim not built)")
    for buft in private:
        t = _tensor(buft, mb.f32, (3, 4))
        assert t.__dlpack_device__() == KDLMETAL
        with pytest.raises(mb.DLPackError, match=buft.name):
            np.from_dlpack(t)
        arr = np.from_dlpack(t, copy=True)
        np.testing.assert_array_equal(arr, t.get())
        arr[0, 0] = 100  # a copy: the tensor is untouched
        assert t.get()[0, 0] == -3


def test_copy_true_packs_strided_views():
    t = _tensor(mb.device("CPU"), mb.f32, (3, 4))
    v = t.transpose()
    arr = np.from_dlpack(v, copy=True)
    np.testing.assert_array_equal(arr, t.get().T)
    assert arr.flags.c_contiguous
    arr[0, 0] = 9
    assert t.get()[0, 0] == -3


def test_export_argument_errors():
    t = _tensor(mb.device("CPU"), mb.f32, (2,))
    with pytest.raises(mb.InvalidArgumentError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(mb.DLPackError, match="dl_device"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(TypeError, match="copy"):
        t.__dlpack__(copy="yes")
    ctx = mb.Context()
    u = ctx.tensor(mb.f32, (2,), name="u")
    with pytest.raises(mb.InvalidArgumentError, match="not allocated"):
        np.from_dlpack(u)
    with pytest.raises(mb.InvalidArgumentError, match="not allocated"):
        u.__dlpack_device__()


def test_export_lifetime_outlives_tensor_and_free():
    ctx = mb.Context()
    t = ctx.tensor(mb.f32, (1000,), name="t")
    buf = mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    t.set(np.arange(1000))
    arr = np.from_dlpack(t)
    capsule = t.__dlpack__(max_version=(1, 0))  # never consumed: its destructor releases it
    buf.free()
    del t, ctx, buf, capsule
    gc.collect()
    np.testing.assert_array_equal(arr, np.arange(1000, dtype=np.float32))  # memory still held by arr


@pytest.mark.parametrize("np_dtype,mb_type", [(np.float32, mb.f32), (np.float16, mb.f16), (np.int32, mb.i32)])
def test_import_shares_memory_and_computes(np_dtype, mb_type):
    x = (np.arange(12).reshape(3, 4) - 5).astype(np_dtype)
    t = mb.from_dlpack(x, mb.device("CPU"), name="x")
    assert t.type == mb_type and t.shape == (3, 4) and t.name == "x" and t.is_contiguous()
    assert t.buffer.buffer_type.name == "CPU_Mapped"
    np.testing.assert_array_equal(t.get(), x)
    x[0, 0] = 42
    assert t.get()[0, 0] == 42
    if mb_type == mb.f32:
        y = mb.ops.scale(t, 2.0)
        mb.alloc_ctx_tensors(t.context, mb.device("CPU"))
        mb.device("CPU").init_backend().graph_compute(mb.Graph(y))
        np.testing.assert_allclose(y.get(), x.astype(np.float32) * 2, rtol=1e-3)


@pytest.mark.parametrize("index", [np.s_[:, ::2], np.s_[1:, 1:3], np.s_[::2, ::3]])
def test_import_strided_is_a_view(index):
    base = np.random.default_rng(1).standard_normal((6, 9)).astype(np.float32)
    x = base[index]
    t = mb.from_dlpack(x, mb.device("CPU"))
    assert t.shape == x.shape
    np.testing.assert_array_equal(t.get(), x)
    y = mb.ops.cont(t)  # the CPU backend reads the strided memory
    mb.alloc_ctx_tensors(t.context, mb.device("CPU"))
    mb.device("CPU").init_backend().graph_compute(mb.Graph(y))
    np.testing.assert_array_equal(y.get(), x)
    np.testing.assert_array_equal(np.from_dlpack(t), x)  # and back out, with the same strides


def test_import_transposed_and_broadcast():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = mb.from_dlpack(base.T, mb.device("CPU"))
    np.testing.assert_array_equal(t.get(), base.T)
    assert not t.is_contiguous()
    one = np.ones((1, 4), np.float32)
    t1 = mb.from_dlpack(one, mb.device("CPU"))
    assert t1.is_contiguous() and t1.shape == (1, 4)


def test_import_on_metal_sim_computes_there():
    try:
        sim = mb.device("MetalSim")
    except mb.InvalidArgumentError:
        pytest.skip("MetalSim not built")
    x = np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)
    t = mb.from_dlpack(x, sim, name="x")
    assert t.buffer.buffer_type.name.endswith("_Mapped")
    y = mb.ops.scale(t, 3.0)
    mb.alloc_ctx_tensors(t.context, sim)
    sim.init_backend().graph_compute(mb.Graph(y))
    np.testing.assert_allclose(y.get(), x * 3, rtol=1e-6)


def test_import_default_device_is_the_best_real_one():
    t = mb.from_dlpack(np.zeros(4, np.float32))
    assert t.buffer.buffer_type.device.name == mb.device().name


def test_import_refusals():
    cpu = mb.device("CPU")
    with pytest.raises(mb.DLPackError, match="float64"):
        mb.from_dlpack(np.zeros(3), cpu)
    with pytest.raises(mb.DLPackError, match="uint8"):
        mb.from_dlpack(np.zeros(3, np.uint8), cpu)
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(mb.DLPackError, match="read-only"):
        mb.from_dlpack(ro, cpu)
    with pytest.raises(mb.DLPackError, match="negative stride"):
        mb.from_dlpack(np.zeros(4, np.float32)[::-1], cpu)
    with pytest.raises(mb.DLPackError, match="0"):
        mb.from_dlpack(np.array(1.0, np.float32), cpu)
    with pytest.raises(mb.DLPackError, match="5"):
        mb.from_dlpack(np.zeros((1, 1, 1, 1, 2), np.float32), cpu)
    with pytest.raises(TypeError, match="__dlpack__"):
        mb.from_dlpack([1.0, 2.0], cpu)
    # a refused import releases the producer's capsule: the array is not pinned afterwards
    a = np.zeros(3)
    with pytest.raises(mb.DLPackError):
        mb.from_dlpack(a, cpu)
    a.resize(5, refcheck=True)


class _Producer:
    """A minimal DLPack producer (what torch or JAX would be), so its lifetime can be watched."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, **kwargs):
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


def test_import_keeps_producer_alive():
    p = _Producer(np.arange(8, dtype=np.float32))
    ref = weakref.ref(p)
    t = mb.from_dlpack(p, mb.device("CPU"))
    del p
    gc.collect()
    assert ref() is not None  # the tensor holds the producer
    np.testing.assert_array_equal(t.get(), np.arange(8))
    del t
    gc.collect()
    assert ref() is None  # and lets it go with the tensor


def test_import_memory_outlives_producer_deletion():
    x = np.arange(1 << 16, dtype=np.float32)
    t = mb.from_dlpack(x, mb.device("CPU"))
    del x
    gc.collect()
    np.testing.assert_array_equal(t.get()[-3:], [65533, 65534, 65535])


def test_import_legacy_producer():
    class Legacy:
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, stream=None):  # pre-1.0 producers take no max_version
            return self.arr.__dlpack__()

    x = np.arange(6, dtype=np.float32)
    t = mb.from_dlpack(Legacy(x), mb.device("CPU"))
    x[2] = -1
    assert t.get()[2] == -1


def test_roundtrip_numpy_to_tensor_to_numpy():
    x = np.random.default_rng(3).standard_normal((2, 3, 4, 5)).astype(np.float32)
    back = np.from_dlpack(mb.from_dlpack(x, mb.device("CPU")))
    assert np.shares_memory(back, x)
    np.testing.assert_array_equal(back, x)


def test_torch_when_installed():
    torch = pytest.importorskip("torch")
    t = _tensor(mb.device("CPU"), mb.bf16, (2, 3), values=np.array([[1, 2, 3], [4, 5, 6.5]]))
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.bfloat16
    np.testing.assert_array_equal(tt.float().numpy(), t.get())
    src = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    m = mb.from_dlpack(src, mb.device("CPU"))
    src[0, 0] = 9
    assert m.get()[0, 0] == 9
    mt = mb.from_dlpack(src.t(), mb.device("CPU"))
    np.testing.assert_array_equal(mt.get(), src.t().numpy())
