"""Sequential little-endian reads over a memory-mapped model file, with errors that name the file."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .errors import WhisperError


def map_file(path: Path) -> np.ndarray:
    """The file as a read-only uint8 array over a memory mapping (slices share it, no copies)."""
    try:
        if path.is_dir():
            raise WhisperError(f"{path}: is a directory, expected a model file")
        if path.stat().st_size == 0:
            raise WhisperError(f"{path}: model file is empty")
        return np.frombuffer(np.memmap(path, dtype=np.uint8, mode="r"), dtype=np.uint8)
    except FileNotFoundError:
        raise WhisperError(f"{path}: model file not found") from None
    except PermissionError:
        raise WhisperError(f"{path}: model file is not readable (permission denied)") from None


class ByteCursor:
    """Reads values in order from a byte array; running off the end is a truncated file."""

    def __init__(self, data: np.ndarray, name: str):
        self.data = data
        self.name = name
        self.pos = 0

    def need(self, n: int, what: str) -> None:
        """Raises WhisperError unless n more bytes are available."""
        if n < 0 or self.pos + n > len(self.data):
            raise WhisperError(f"{self.name}: truncated model file (cannot read {what} at byte {self.pos}, "
                               f"file has {len(self.data)} bytes)")

    def ints(self, fmt: str, what: str) -> tuple[int, ...]:
        """Unpacks a struct format (little-endian) and advances."""
        size = struct.calcsize("<" + fmt)
        self.need(size, what)
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += size
        return values

    def take(self, n: int, what: str) -> np.ndarray:
        """The next n bytes as a view, and advances."""
        self.need(n, what)
        view = self.data[self.pos:self.pos + n]
        self.pos += n
        return view

    def remaining(self) -> int:
        """Bytes left after the current position."""
        return max(0, len(self.data) - self.pos)

    def at_end(self) -> bool:
        """True once every byte has been read."""
        return self.pos >= len(self.data)
