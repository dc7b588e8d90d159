"""metal_backend: a ggml-style compute backend for Python.

Devices, buffer types (shared, private, mapped), buffers, tensors, graphs and backends that compute
graphs: Metal on Apple silicon, a fast CPU device everywhere, and MetalSim, which runs the Metal
kernels on the CPU so the Metal path is tested where no Mac exists.
"""
from __future__ import annotations

import os
import warnings
from typing import List, Optional

from . import _core, ops
from ._core import (
    Backend,
    BackendOptions,
    Buffer,
    BufferType,
    Context,
    Device,
    DeviceCaps,
    DeviceError,
    DeviceProps,
    DeviceType,
    DLPackError,
    Graph,
    GraphAllocator,
    InvalidArgumentError,
    MetalBackendError,
    OutOfMemoryError,
    OutOfRangeError,
    PendingWorkError,
    PlanEntry,
    Registry,
    Scheduler,
    Status,
    Tensor,
    Type,
    UnsupportedOpError,
    alloc_ctx_tensors,
    bf16,
    dequantize,
    f16,
    f32,
    i32,
    iq1_m,
    iq1_s,
    iq2_s,
    iq2_xs,
    iq2_xxs,
    iq3_s,
    iq3_xxs,
    iq4_nl,
    iq4_xs,
    log_softmax_rows,
    mxfp4,
    q2_K,
    q3_K,
    q4_0,
    q4_1,
    q4_K,
    q5_0,
    q5_1,
    q5_K,
    q6_K,
    q8_0,
    q8_K,
    quantize,
    registries,
    types,
)
from .io import gguf
from .profile import Profile, ProfileNode
from .profile import profile as _profile

# The profile method is Python (tables, trace export) over the native per-node timings.
Backend.profile = _profile  # type: ignore[attr-defined]

__version__: str = _core.__version__

# Real devices in order of preference for device(None); MetalSim is for testing and only by name.
_PREFERRED = ("Metal", "CPU")


def devices() -> List[Device]:
    """Every device of every registry."""
    return [dev for reg in registries() for dev in reg.devices]


def device(name: Optional[str] = None) -> Device:
    """The device called `name` ("Metal", "CPU", "MetalSim").

    With no name, the best real device: Metal where present, else the CPU; never MetalSim.
    An unknown name raises InvalidArgumentError (a ValueError) listing the known names.
    """
    all_devices = devices()
    if name is None:
        for preferred in _PREFERRED:
            for dev in all_devices:
                if dev.name == preferred:
                    return dev
        raise MetalBackendError("no real device is registered")  # the CPU registry always exists
    if not isinstance(name, str):
        raise TypeError(f"device name must be a str, got {type(name).__name__}")
    for dev in all_devices:
        if dev.name == name:
            return dev
    known = ", ".join(repr(dev.name) for dev in all_devices)
    raise InvalidArgumentError(f"[metal_backend.device] unknown device {name!r}; known devices: {known}")


def from_dlpack(x: object, device: Optional[Device] = None, *, name: str = "",
                ctx: Optional[Context] = None) -> Tensor:
    """A tensor over the memory of `x` (anything with ``__dlpack__`` in host memory), without a copy.

    The memory becomes a mapped buffer of `device` (default: :func:`device`'s best real device), so
    writes through either side are seen by the other, and the tensor keeps `x`'s memory alive. float32,
    float16, bfloat16 and int32 arrays of 1 to 4 dimensions with non-negative strides are accepted; a
    strided array becomes a view. Other dtypes, read-only arrays and non-CPU memory raise
    :class:`DLPackError` (a ``BufferError``). The tensor belongs to `ctx` when given (so that several
    imports, and tensors made in `ctx`, can be sources of one op), else to a Context of its own.
    """
    if ctx is not None and not isinstance(ctx, Context):
        raise TypeError(f"from_dlpack: ctx must be a metal_backend Context or None (got {type(ctx).__name__})")
    return _core.from_dlpack(x, device if device is not None else _best_device(), name, ctx)


_best_device = device


def _check_cpu_isa_variable() -> None:
    """MB_CPU_MAX_ISA caps the CPU's SIMD paths; native code ignores a value it does not know, so
    such a value is named in a RuntimeWarning rather than ignored silently."""
    value = os.environ.get("MB_CPU_MAX_ISA", "")
    if value and value not in ("portable", "avx2", "avx512"):
        warnings.warn(f"MB_CPU_MAX_ISA={value!r} is not 'portable', 'avx2' or 'avx512'; it is ignored and every "
                      f"instruction set the CPU has is used", RuntimeWarning, stacklevel=2)


_check_cpu_isa_variable()


__all__ = [
    "Backend",
    "BackendOptions",
    "Buffer",
    "BufferType",
    "Context",
    "Device",
    "DeviceCaps",
    "DeviceError",
    "DeviceProps",
    "DeviceType",
    "DLPackError",
    "Graph",
    "GraphAllocator",
    "InvalidArgumentError",
    "MetalBackendError",
    "OutOfMemoryError",
    "OutOfRangeError",
    "PendingWorkError",
    "PlanEntry",
    "Profile",
    "ProfileNode",
    "Registry",
    "Scheduler",
    "Status",
    "Tensor",
    "Type",
    "UnsupportedOpError",
    "__version__",
    "alloc_ctx_tensors",
    "bf16",
    "dequantize",
    "device",
    "devices",
    "f16",
    "f32",
    "from_dlpack",
    "gguf",
    "i32",
    "log_softmax_rows",
    "ops",
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "q8_0",
    "q2_K",
    "q3_K",
    "q4_K",
    "q5_K",
    "q6_K",
    "q8_K",
    "iq4_nl",
    "iq4_xs",
    "mxfp4",
    "iq2_xxs",
    "iq2_xs",
    "iq2_s",
    "iq3_xxs",
    "iq3_s",
    "iq1_s",
    "iq1_m",
    "quantize",
    "registries",
    "types",
]
