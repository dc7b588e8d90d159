"""ggml tensor type ids as stored in ggml model files (whisper.cpp's, ...), and raw quantized tensors."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

import metal_backend as mb


class GgmlType(enum.IntEnum):
    """The ggml type ids a whisper.cpp model file may use for its tensors (ids, block sizes and
    bytes as mb.Type states them)."""

    F32 = mb.f32.id
    F16 = mb.f16.id
    Q4_0 = mb.q4_0.id
    Q4_1 = mb.q4_1.id
    Q5_0 = mb.q5_0.id
    Q5_1 = mb.q5_1.id
    Q8_0 = mb.q8_0.id

    @property
    def mb_type(self) -> mb.Type:
        """The metal_backend type of this id."""
        return getattr(mb, self.name.lower())

    @property
    def block_size(self) -> int:
        """Elements per block (1 for the float types)."""
        return self.mb_type.block_size

    @property
    def block_bytes(self) -> int:
        """Bytes per block."""
        return self.mb_type.type_size

    @property
    def is_quantized(self) -> bool:
        """True for the block-quantized types."""
        return self.mb_type.is_quantized

    def row_bytes(self, n: int) -> int:
        """Bytes taken by a row of n elements (n must be a multiple of the block size)."""
        return n // self.block_size * self.block_bytes


NUMPY_TYPES = {GgmlType.F32: np.dtype("<f4"), GgmlType.F16: np.dtype("<f2")}


@dataclass(frozen=True)
class QuantizedTensor:
    """A block-quantized tensor kept as its raw ggml bytes.

    shape is the logical numpy-order shape; data is uint8 of shape
    (prod(shape[:-1]), ggml_type.row_bytes(shape[-1])), one row per row of the
    logical tensor, exactly as ggml lays the blocks out.
    """

    ggml_type: GgmlType
    shape: tuple[int, ...]
    data: np.ndarray

    @property
    def nbytes(self) -> int:
        """Size of the raw block data in bytes."""
        return int(self.data.nbytes)
