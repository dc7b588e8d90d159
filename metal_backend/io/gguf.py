"""GGUF files (ggml's model format): the header, metadata and tensor infos, and tensors over an mmap.

``open(path)`` maps the file and parses everything before the tensor data (magic, version 2 or 3,
metadata of every value type including nested arrays, tensor infos), checking every count, length,
type, shape and offset against the file's size as it goes, so a bad file raises GGUFError (an
mb.InvalidArgumentError, so also a ValueError) naming what is wrong before any tensor data is read.
``GGUFFile.load()`` gives the tensors as mb.Tensor objects placed in one mapped buffer over a
copy-on-write mmap of the file (zero-copy where the device can wrap host memory), or copies them
into a buffer of another buffer type when one is given.
"""
from __future__ import annotations

import builtins
import mmap
import os
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from .. import _core

__all__ = ["GGUFError", "GGUFFile", "TensorInfo", "open"]

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
# Arrays nest (an array of arrays); ggml's own reader allows one level, a little more costs nothing.
MAX_ARRAY_DEPTH = 8

# Metadata value types: id -> (name, struct format or None for string/array).
_SCALARS = {
    0: ("uint8", "<B"),
    1: ("int8", "<b"),
    2: ("uint16", "<H"),
    3: ("int16", "<h"),
    4: ("uint32", "<I"),
    5: ("int32", "<i"),
    6: ("float32", "<f"),
    7: ("bool", "<B"),
    10: ("uint64", "<Q"),
    11: ("int64", "<q"),
    12: ("float64", "<d"),
}
_STRING = 8
_ARRAY = 9

# ggml type ids of types this library does not handle, for the error message.
_GGML_TYPE_NAMES = {
    9: "q8_1", 24: "i8", 25: "i16", 27: "i64", 28: "f64", 34: "tq1_0", 35: "tq2_0", 40: "nvfp4", 41: "q1_0",
}


class GGUFError(_core.InvalidArgumentError):
    """A file that is not a well-formed GGUF file this library can read; the message says where."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file: name, mb type, numpy-order shape, byte offset from the start of the
    data section, and size in bytes."""

    name: str
    type: Any
    shape: Tuple[int, ...]
    offset: int
    nbytes: int


def _type_by_id() -> Dict[int, Any]:
    return {t.id: t for t in _core.types}


class _Reader:
    """Little-endian reads from a memoryview with every length checked against the end."""

    def __init__(self, view: memoryview, path: str):
        self.view = view
        self.pos = 0
        self.path = path

    def fail(self, what: str) -> GGUFError:
        return GGUFError(f"[gguf.open] {self.path}: {what}")

    def take(self, n: int, what: str) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.view):
            raise self.fail(f"truncated: {what} needs {n} bytes at offset {self.pos}, the file has "
                            f"{len(self.view)}")
        out = self.view[self.pos:end]
        self.pos = end
        return out

    def scalar(self, fmt: str, what: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def u32(self, what: str) -> int:
        return self.scalar("<I", what)

    def u64(self, what: str) -> int:
        return self.scalar("<Q", what)

    def string(self, what: str) -> str:
        n = self.u64(f"the length of {what}")
        if n > len(self.view) - self.pos:
            raise self.fail(f"{what} has length {n} at offset {self.pos - 8}, past the end of the file "
                            f"({len(self.view)} bytes)")
        raw = self.take(n, what)
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} is not valid UTF-8 ({e.reason} at byte {e.start})") from None

    def value(self, vtype: int, what: str, depth: int = 0):
        if vtype in _SCALARS:
            name, fmt = _SCALARS[vtype]
            v = self.scalar(fmt, what)
            if vtype == 7:
                if v > 1:
                    raise self.fail(f"{what}: bool value {v} is neither 0 nor 1")
                return bool(v)
            return v
        if vtype == _STRING:
            return self.string(what)
        if vtype == _ARRAY:
            if depth >= MAX_ARRAY_DEPTH:
                raise self.fail(f"{what}: arrays nested deeper than {MAX_ARRAY_DEPTH}")
            itype = self.u32(f"the item type of {what}")
            count = self.u64(f"the length of {what}")
            if itype not in _SCALARS and itype not in (_STRING, _ARRAY):
                raise self.fail(f"{what}: unknown array item type {itype}")
            # Every item takes at least this many bytes, so a count the rest of the file cannot hold
            # is refused before any allocation.
            least = struct.calcsize(_SCALARS[itype][1]) if itype in _SCALARS else (8 if itype == _STRING else 12)
            if count * least > len(self.view) - self.pos:
                raise self.fail(f"{what}: array of {count} items of type {itype} cannot fit in the "
                                f"{len(self.view) - self.pos} bytes left")
            if itype in _SCALARS and itype != 7:
                fmt = _SCALARS[itype][1]
                raw = self.take(count * struct.calcsize(fmt), what)
                return list(struct.unpack(f"<{count}{fmt[1]}", raw))
            return [self.value(itype, f"{what}[{i}]", depth + 1) for i in range(count)]
        raise self.fail(f"{what}: unknown value type {vtype}")


class GGUFFile:
    """A parsed GGUF file. ``metadata`` maps keys to values (arrays as lists), ``tensors`` lists
    TensorInfo in file order; ``version``, ``alignment`` and ``data_offset`` (where the tensor data
    starts) describe the layout. Nothing of the tensor data has been read."""

    def __init__(self, path: str, mm: mmap.mmap, version: int, metadata: Dict[str, Any],
                 tensors: List[TensorInfo], alignment: int, data_offset: int):
        self.path = path
        self._mmap = mm
        self.version = version
        self.metadata = metadata
        self.tensors = tensors
        self.alignment = alignment
        self.data_offset = data_offset

    def __repr__(self) -> str:
        return (f"<GGUFFile {self.path!r}: version {self.version}, {len(self.metadata)} metadata keys, "
                f"{len(self.tensors)} tensors>")

    def tensor_info(self, name: str) -> TensorInfo:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def tensor_bytes(self, name: str) -> memoryview:
        """The stored bytes of tensor `name`, a view of the file's copy-on-write mapping (no copy; the
        offsets were checked against the file's size by open). KeyError for an unknown name."""
        info = self.tensor_info(name)
        start = self.data_offset + info.offset
        return memoryview(self._mmap)[start:start + info.nbytes]

    def load(self, device_or_buffer_type=None) -> Dict[str, Any]:
        """The tensors, name -> mb.Tensor (in one Context).

        With None (the CPU) or a device that can wrap host memory (caps.buffer_from_host_ptr), each
        tensor lies in a mapped buffer over its bytes in a copy-on-write mmap of the file: no copy, and
        writing a tensor never writes the file. With a buffer type, or where the device refuses to wrap
        the memory, the data is copied into one buffer of that type (a device's default one)."""
        target = device_or_buffer_type
        if target is None:
            from .. import device

            target = device("CPU")
        ctx = _core.Context()
        made = [(info, ctx.tensor(info.type, info.shape, name=info.name)) for info in self.tensors]
        view = memoryview(self._mmap)
        if isinstance(target, _core.Device) and target.props.caps.buffer_from_host_ptr:
            try:
                for info, t in made:
                    start = self.data_offset + info.offset
                    t.place(target.buffer_from_host_ptr(view[start:start + max(info.nbytes, 1)]), 0)
                return {info.name: t for info, t in made}
            except _core.InvalidArgumentError:
                # This device cannot wrap these addresses (alignment): copy instead.
                ctx = _core.Context()
                made = [(info, ctx.tensor(info.type, info.shape, name=info.name)) for info in self.tensors]
        buft = target.buffer_type if isinstance(target, _core.Device) else target
        align = max(int(buft.alignment), 1)
        offsets = []
        total = 0
        for info, _ in made:
            offsets.append(total)
            total += -(-max(info.nbytes, 1) // align) * align
        buf = buft.alloc(max(total, 1))
        for (info, t), off in zip(made, offsets):
            start = self.data_offset + info.offset
            if info.nbytes:
                buf.set(view[start:start + info.nbytes], off)
            t.place(buf, off)
        return {info.name: t for info, t in made}


def open(path) -> GGUFFile:  # noqa: A001 - the API's name (mb.gguf.open)
    """Parses the GGUF file at path (header, metadata, tensor infos); raises GGUFError for a bad file."""
    path = os.fspath(path)
    with builtins.open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise GGUFError(f"[gguf.open] {path}: the file is empty (a GGUF file starts with b'GGUF')")
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    # On an error the mapping is left to the garbage collector: the traceback may still hold views of it.
    return _parse(path, mm)


def _parse(path: str, mm: mmap.mmap) -> GGUFFile:
    r = _Reader(memoryview(mm), path)
    magic = bytes(r.take(4, "the magic"))
    if magic != MAGIC:
        raise r.fail(f"wrong magic {magic!r} (a GGUF file starts with b'GGUF')")
    version = r.u32("the version")
    if version not in VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        if swapped in VERSIONS:
            raise r.fail(f"big-endian GGUF (version {swapped}) is not supported")
        raise r.fail(f"unsupported version {version} (supported: {', '.join(map(str, VERSIONS))})")
    n_tensors = r.u64("the tensor count")
    n_kv = r.u64("the metadata count")
    # A key-value pair takes at least 12 bytes (empty key, type, one-byte value); a tensor info 28.
    if n_kv * 13 > len(mm) - r.pos:
        raise r.fail(f"metadata count {n_kv} cannot fit in a file of {len(mm)} bytes")
    if n_tensors * 28 > len(mm) - r.pos:
        raise r.fail(f"tensor count {n_tensors} cannot fit in a file of {len(mm)} bytes")
    metadata: Dict[str, Any] = {}
    for i in range(n_kv):
        key = r.string(f"metadata key {i}")
        if key in metadata:
            raise r.fail(f"duplicate metadata key {key!r}")
        vtype = r.u32(f"the type of metadata {key!r}")
        metadata[key] = r.value(vtype, f"metadata {key!r}")
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if (not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or
            alignment & (alignment - 1)):
        raise r.fail(f"general.alignment {alignment!r} is not a power of two")
    types = _type_by_id()
    infos = []
    names = set()
    for i in range(n_tensors):
        name = r.string(f"the name of tensor {i}")
        if name in names:
            raise r.fail(f"duplicate tensor name {name!r}")
        names.add(name)
        n_dims = r.u32(f"the dimension count of tensor {name!r}")
        if n_dims > MAX_DIMS:
            raise r.fail(f"tensor {name!r} has {n_dims} dimensions (at most {MAX_DIMS})")
        ne = [r.u64(f"dimension {d} of tensor {name!r}") for d in range(n_dims)]
        type_id = r.u32(f"the type of tensor {name!r}")
        offset = r.u64(f"the data offset of tensor {name!r}")
        t = types.get(type_id)
        if t is None:
            known = _GGML_TYPE_NAMES.get(type_id)
            what = f"ggml type {known} ({type_id}), which this library does not read" if known else \
                f"unknown type id {type_id}"
            raise r.fail(f"tensor {name!r} has {what}")
        if any(d >= 2**63 for d in ne):
            raise r.fail(f"tensor {name!r} has a dimension {max(ne)} out of range")
        ne0 = ne[0] if ne else 1
        if ne0 % t.block_size:
            raise r.fail(f"tensor {name!r} of type {t.name}: its first dimension {ne0} is not a multiple of "
                         f"the block size {t.block_size}")
        rows = 1
        for d in ne[1:]:
            rows *= d
        nbytes = ne0 // t.block_size * t.type_size * rows
        if offset % alignment:
            raise r.fail(f"tensor {name!r}: data offset {offset} is not a multiple of the alignment {alignment}")
        infos.append(TensorInfo(name, t, tuple(reversed(ne)) if ne else (1,), offset, nbytes))
    data_offset = -(-r.pos // alignment) * alignment
    data_size = len(mm) - data_offset
    spans = []
    for info in infos:
        if info.offset + info.nbytes > data_size:
            raise r.fail(f"tensor {info.name!r}: its {info.nbytes} bytes at data offset {info.offset} reach past "
                         f"the end of the file (the data section holds {max(data_size, 0)} bytes)")
        if info.nbytes:
            spans.append((info.offset, info.offset + info.nbytes, info.name))
    spans.sort()
    for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            raise r.fail(f"tensors {an!r} and {bn!r} overlap in the data section")
    return GGUFFile(path, mm, version, metadata, infos, alignment, data_offset)
