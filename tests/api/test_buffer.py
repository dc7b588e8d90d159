"""Buffers: allocation, set/get/memset/clear with bounds checks, host views, free and use after free."""
from __future__ import annotations

import mmap

import numpy as np
import pytest

import metal_backend as mb


def _host_visible(buft) -> bool:
    """CPU memory and Metal's shared and mapped memory are host-visible; only private memory is not."""
    return not buft.name.endswith("_Private")


def _rand(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=n, dtype=np.uint8)


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 4096, 1 << 20])
def test_alloc_sizes(buft, n):
    buf = buft.alloc(n)
    assert buf.size == n and len(buf) == n
    assert buf.buffer_type.name == buft.name
    assert buf.is_host == buft.is_host
    assert not buf.is_freed
    buf.free()


def test_set_get_roundtrip(buft):
    data = _rand(10_000)
    with buft.alloc(data.size) as buf:
        buf.set(data)
        assert buf.get() == data.tobytes()
        buf.set(b"\x01\x02\x03", offset=9_997)
        assert buf.get(9_995, 5) == bytes([data[9_995], data[9_996], 1, 2, 3])
        assert buf.get(10_000) == b""


def test_set_accepts_any_contiguous_bytes_like(buft):
    with buft.alloc(16) as buf:
        buf.set(np.arange(4, dtype=np.float32))
        assert np.frombuffer(buf.get(), dtype=np.float32).tolist() == [0, 1, 2, 3]
        buf.set(bytearray(b"ab"), offset=14)
        buf.set(memoryview(b"cd"), offset=12)
        assert buf.get(12, 4) == b"cdab"


def test_memset_and_clear(buft):
    data = _rand(1000)
    with buft.alloc(1000) as buf:
        buf.set(data)
        buf.memset(0x5A, offset=10, size=20)
        back = np.frombuffer(buf.get(), dtype=np.uint8)
        assert (back[10:30] == 0x5A).all()
        assert (back[:10] == data[:10]).all() and (back[30:] == data[30:]).all()
        buf.memset(7, offset=990)  # to the end
        assert buf.get(990) == bytes([7] * 10)
        buf.clear()
        assert buf.get() == bytes(1000)
        buf.clear(255)
        assert buf.get() == bytes([255] * 1000)


@pytest.mark.parametrize("offset,size", [(0, 101), (100, 1), (101, 0), (50, 51), (2**40, 1)])
def test_out_of_range_access_raises(buft, offset, size):
    with buft.alloc(100) as buf:
        with pytest.raises(IndexError) as info:
            buf.get(offset, size)
        assert isinstance(info.value, mb.OutOfRangeError)
        assert str(offset) in str(info.value) and "100" in str(info.value)
        with pytest.raises(mb.OutOfRangeError):
            buf.set(bytes(size if size < 1000 else 1), offset=offset)
        with pytest.raises(mb.OutOfRangeError):
            buf.memset(1, offset=offset, size=size)


def test_set_larger_than_buffer_raises_and_writes_nothing(buft):
    with buft.alloc(8) as buf:
        buf.clear(1)
        with pytest.raises(mb.OutOfRangeError) as info:
            buf.set(bytes(9))
        assert "9" in str(info.value) and "8" in str(info.value)
        assert buf.get() == bytes([1] * 8)


@pytest.mark.parametrize("bad", [-1, -(2**70)])
def test_negative_sizes_and_offsets_raise(buft, bad):
    with pytest.raises(ValueError) as info:
        buft.alloc(bad)
    assert str(bad) in str(info.value)
    with buft.alloc(10) as buf:
        with pytest.raises(mb.InvalidArgumentError):
            buf.get(bad)
        with pytest.raises(mb.InvalidArgumentError):
            buf.get(0, bad)
        with pytest.raises(mb.InvalidArgumentError):
            buf.set(b"x", offset=bad)
        with pytest.raises(mb.InvalidArgumentError):
            buf.memset(0, offset=0, size=bad)


@pytest.mark.parametrize("value", [-1, 256, 1000])
def test_byte_values_out_of_range(buft, value):
    with buft.alloc(10) as buf:
        with pytest.raises(mb.InvalidArgumentError):
            buf.clear(value)
        with pytest.raises(mb.InvalidArgumentError):
            buf.memset(value)


def test_non_int_arguments_raise_type_error(buft):
    with pytest.raises(TypeError):
        buft.alloc(1.5)
    with pytest.raises(TypeError):
        buft.alloc("10")
    with buft.alloc(10) as buf:
        with pytest.raises(TypeError):
            buf.get("0")
        with pytest.raises(TypeError):
            buf.set("text")


@pytest.mark.parametrize("n", [2**62, 2**64 + 5, 2**200])
def test_alloc_larger_than_memory_raises_memory_error(buft, n):
    with pytest.raises(MemoryError) as info:
        buft.alloc(n)
    assert isinstance(info.value, mb.OutOfMemoryError)


def test_alloc_larger_than_device_memory_names_sizes(device):
    total = device.memory[1]
    with pytest.raises(mb.OutOfMemoryError) as info:
        device.buffer_type.alloc(total + 1)
    assert str(total + 1) in str(info.value)


def test_use_after_free_raises(buft):
    buf = buft.alloc(32)
    buf.free()
    assert buf.is_freed
    for call in (lambda: buf.get(), lambda: buf.set(b"x"), lambda: buf.memset(0), lambda: buf.clear(),
                 lambda: buf.numpy(), lambda: memoryview(buf)):
        with pytest.raises((mb.InvalidArgumentError, BufferError)) as info:
            call()
        assert "freed" in str(info.value) or isinstance(info.value, BufferError)
    buf.free()  # double free is harmless
    assert "freed" in repr(buf)


def test_context_manager_frees(buft):
    with buft.alloc(8) as buf:
        buf.clear(3)
    assert buf.is_freed
    with pytest.raises(mb.InvalidArgumentError):
        buf.get()


def test_numpy_view_is_zero_copy(buft):
    if not _host_visible(buft):
        with buft.alloc(8) as buf:
            with pytest.raises(mb.InvalidArgumentError):
                buf.numpy()
        return
    with buft.alloc(64) as buf:
        view = buf.numpy()
        assert view.dtype == np.uint8 and view.shape == (64,)
        assert view.flags.writeable and view.flags.c_contiguous
        view[:] = 9
        assert buf.get() == bytes([9] * 64)
        buf.set(b"\x01", offset=5)
        assert view[5] == 1


def test_numpy_view_alignment(buft):
    if _host_visible(buft):
        with buft.alloc(1000) as buf:
            assert buf.numpy().ctypes.data % buft.alignment == 0


def test_memoryview_is_zero_copy(buft):
    if not _host_visible(buft):
        return
    with buft.alloc(16) as buf:
        mv = memoryview(buf)
        assert mv.nbytes == 16 and not mv.readonly
        mv[3] = 200
        assert buf.get(3, 1) == bytes([200])
        mv.release()


def test_numpy_view_survives_free(buft):
    if not _host_visible(buft):
        return
    buf = buft.alloc(128)
    view = buf.numpy()
    view[:] = 4
    buf.free()
    assert (view == 4).all()  # the view keeps the memory alive
    view[:] = 5
    assert (view == 5).all()


def test_memoryview_survives_free(buft):
    if not _host_visible(buft):
        return
    buf = buft.alloc(16)
    mv = memoryview(buf)
    mv[0] = 1
    buf.free()
    assert mv[0] == 1
    mv[0] = 2
    assert mv[0] == 2
    mv.release()


# --- mapped buffers over caller memory -------------------------------------------------------------

def _mappable_device(device):
    if not device.props.caps.buffer_from_host_ptr:
        pytest.skip(f"{device.name} cannot wrap host memory (caps.buffer_from_host_ptr is False)")
    return device


def test_mapped_numpy_array_zero_copy(device):
    dev = _mappable_device(device)
    host = np.arange(1024, dtype=np.float32)
    buf = dev.buffer_from_host_ptr(host)
    assert buf.size == host.nbytes
    assert "Mapped" in buf.buffer_type.name
    host[10] = -7.5
    assert np.frombuffer(buf.get(40, 4), dtype=np.float32)[0] == -7.5
    buf.set(np.float32(3.25).tobytes(), offset=0)
    assert host[0] == 3.25
    if buf.is_host:
        assert buf.numpy().ctypes.data == host.ctypes.data


@pytest.mark.parametrize("make", [
    lambda: bytearray(b"hello world!"),
    lambda: memoryview(bytearray(64)),
    lambda: np.zeros((4, 8), dtype=np.int16),
    lambda: np.zeros(0, dtype=np.uint8),
])
def test_mapped_buffer_protocol_objects(device, make):
    dev = _mappable_device(device)
    obj = make()
    buf = dev.buffer_from_host_ptr(obj)
    assert buf.size == memoryview(obj).nbytes
    if buf.size:
        buf.memset(65, 0, 1)
        assert memoryview(obj).cast("B")[0] == 65


def test_mapped_mmap(device, tmp_path):
    dev = _mappable_device(device)
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 16)
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0)
        buf = dev.buffer_from_host_ptr(mm)
        assert buf.get(0, 4) == bytes([0, 1, 2, 3])
        buf.set(b"\xff", offset=1)
        assert mm[1] == 255
        buf.free()
        del buf
        mm.close()  # possible only once the buffer released its export


def test_mapped_rejects_read_only(device):
    dev = _mappable_device(device)
    ro = np.zeros(16, dtype=np.uint8)
    ro.flags.writeable = False
    for obj in (b"immutable bytes", ro, memoryview(bytearray(8)).toreadonly()):
        with pytest.raises(mb.InvalidArgumentError) as info:
            dev.buffer_from_host_ptr(obj)
        assert "read-only" in str(info.value)


def test_mapped_rejects_non_contiguous(device):
    dev = _mappable_device(device)
    a = np.zeros((8, 8), dtype=np.float32)
    for obj in (a[:, ::2], a.T, a[::2]):
        with pytest.raises(mb.InvalidArgumentError) as info:
            dev.buffer_from_host_ptr(obj)
        assert "contiguous" in str(info.value)


def test_mapped_rejects_non_buffers(device):
    dev = _mappable_device(device)
    for obj in ([1, 2, 3], "text", 5, None):
        with pytest.raises(TypeError) as info:
            dev.buffer_from_host_ptr(obj)
        assert type(obj).__name__ in str(info.value)


def test_mapped_max_tensor_size(device):
    dev = _mappable_device(device)
    host = np.zeros(100, dtype=np.uint8)
    assert dev.buffer_from_host_ptr(host, max_tensor_size=50).size == 100
    with pytest.raises(mb.InvalidArgumentError):
        dev.buffer_from_host_ptr(host, max_tensor_size=101)
    with pytest.raises(mb.InvalidArgumentError):
        dev.buffer_from_host_ptr(host, max_tensor_size=-1)


def test_mapped_source_is_pinned_while_wrapped(device):
    dev = _mappable_device(device)
    ba = bytearray(32)
    buf = dev.buffer_from_host_ptr(ba)
    with pytest.raises(BufferError):
        ba.extend(b"more")  # resizing would move the memory under the buffer
    buf.free()
    ba.extend(b"more")  # released with the buffer
    assert len(ba) == 36
