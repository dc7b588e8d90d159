"""A model's weights in one Context: declared as tensors, then uploaded to the device at once."""

from __future__ import annotations

from typing import Iterator, Optional, Sequence, Union

import numpy as np

import metal_backend as mb

ArrayOrBytes = Union[np.ndarray, bytes, bytearray, memoryview]


class Weights:
    """Named weight tensors in one Context, placed in one buffer of a buffer type by upload().

    add() declares a tensor and remembers its data; upload() allocates every declared tensor and
    copies the data in. Tensors for graph inputs or state may be added to `ctx` directly (they get a
    buffer of their own from mb.alloc_ctx_tensors). Indexing by name gives a tensor.
    """

    def __init__(self, buffer_type: mb.BufferType, ctx: Optional[mb.Context] = None):
        self.buffer_type = buffer_type
        self.ctx = ctx if ctx is not None else mb.Context()
        self.tensors: dict[str, mb.Tensor] = {}
        self.buffer: Optional[mb.Buffer] = None
        self._pending: list[tuple[mb.Tensor, ArrayOrBytes]] = []

    def add(self, name: str, data: np.ndarray, type: Optional[mb.Type] = None,
            quantize: Optional[mb.Type] = None, check_finite: bool = False) -> mb.Tensor:
        """A tensor holding data (numpy-order shape).

        type: the stored type (default f16 for float16 arrays, else f32). quantize: a quantized
        type to store the data in instead (mb.q8_0, ...), applied only when the rows are a whole
        number of its blocks (else the tensor keeps `type`). Raises InvalidArgumentError for a
        repeated name, a non-float array, or (check_finite) NaN or infinity.
        """
        if self.buffer is not None:
            raise mb.InvalidArgumentError(f"[Weights.add] {name!r}: the weights are already uploaded")
        if name in self.tensors:
            raise mb.InvalidArgumentError(f"[Weights.add] a weight named {name!r} exists already")
        array = np.asarray(data)
        if array.dtype.kind != "f":
            raise mb.InvalidArgumentError(f"[Weights.add] {name!r}: weights must be floating point "
                                          f"(got dtype {array.dtype})")
        if check_finite and not np.all(np.isfinite(array)):
            raise mb.InvalidArgumentError(f"[Weights.add] {name!r}: weights hold non-finite values")
        if type is None:
            type = mb.f16 if array.dtype == np.float16 else mb.f32
        if quantize is not None and array.ndim >= 1 and array.shape[-1] % quantize.block_size == 0:
            type = quantize
        if type == mb.f16:
            array = np.ascontiguousarray(array, dtype=np.float16)
        elif type == mb.f32 or type.is_quantized or type == mb.bf16:
            array = np.ascontiguousarray(array, dtype=np.float32)
        else:
            raise mb.InvalidArgumentError(f"[Weights.add] {name!r}: cannot store weights as {type.name}")
        return self._declare(name, type, array.shape, array)

    def add_raw(self, name: str, type: mb.Type, shape: Sequence[int], data: ArrayOrBytes) -> mb.Tensor:
        """A tensor of `type` and `shape` holding data as stored bytes (ggml layout, e.g. a quantized
        tensor read from a model file)."""
        if self.buffer is not None:
            raise mb.InvalidArgumentError(f"[Weights.add_raw] {name!r}: the weights are already uploaded")
        if name in self.tensors:
            raise mb.InvalidArgumentError(f"[Weights.add_raw] a weight named {name!r} exists already")
        return self._declare(name, type, tuple(shape), data)

    def _declare(self, name: str, type: mb.Type, shape: Sequence[int], data: ArrayOrBytes) -> mb.Tensor:
        tensor = self.ctx.tensor(type, tuple(int(n) for n in shape), name=name)
        self._pending.append((tensor, data))
        self.tensors[name] = tensor
        return tensor

    def upload(self) -> mb.Buffer:
        """Allocates every tensor of the Context not yet placed (the declared weights) in one buffer
        and copies their data in; the host copies are dropped."""
        if self.buffer is not None:
            raise mb.InvalidArgumentError("[Weights.upload] the weights are already uploaded")
        self.buffer = mb.alloc_ctx_tensors(self.ctx, self.buffer_type)
        for tensor, data in self._pending:
            tensor.set(data)
        self._pending.clear()
        return self.buffer

    def __getitem__(self, name: str) -> mb.Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"no weight named {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    @property
    def nbytes(self) -> int:
        """Bytes of the declared weights."""
        return sum(t.nbytes for t in self.tensors.values())
