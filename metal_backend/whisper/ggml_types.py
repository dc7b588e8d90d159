"""ggml tensor type ids as stored in whisper.cpp model files, and raw quantized tensors."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class GgmlType(enum.IntEnum):
    """The ggml type ids a whisper.cpp model file may use for its tensors."""

    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8

    @property
    def block_size(self) -> int:
        """Elements per block (1 for the float types)."""
        return _BLOCKS[self][0]

    @property
    def block_bytes(self) -> int:
        """Bytes per block."""
        return _BLOCKS[self][1]

    @property
    def is_quantized(self) -> bool:
        """True for the block-quantized types."""
        return self.block_size > 1

    def row_bytes(self, n: int) -> int:
        """Bytes taken by a row of n elements (n must be a multiple of the block size)."""
        return n // self.block_size * self.block_bytes


_BLOCKS = {
    GgmlType.F32: (1, 4),
    GgmlType.F16: (1, 2),
    GgmlType.Q4_0: (32, 18),
    GgmlType.Q4_1: (32, 20),
    GgmlType.Q5_0: (32, 22),
    GgmlType.Q5_1: (32, 24),
    GgmlType.Q8_0: (32, 34),
}

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
