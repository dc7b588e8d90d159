"""Sequential little-endian reads over a memory-mapped file, with errors that name the file."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .errors import InputError


def map_file(path: Path, error: type[InputError] = InputError, what: str = "model file") -> np.ndarray:
    """The file as a read-only uint8 array over a memory mapping (slices share it, no copies).

    A missing, empty, unreadable file or a directory raises `error` naming the path; `what` names
    the kind of file in the message.
    """
    path = Path(path)
    try:
        if path.is_dir():
            raise error(f"{path}: is a directory, expected a {what}")
        if path.stat().st_size == 0:
            raise error(f"{path}: {what} is empty")
        return np.frombuffer(np.memmap(path, dtype=np.uint8, mode="r"), dtype=np.uint8)
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except PermissionError:
        raise error(f"{path}: {what} is not readable (permission denied)") from None


class ByteCursor:
    """Reads values in order from a byte array; running off the end is a truncated file.

    Errors are raised as `error` (an InputError subclass the caller picks), naming `name`.
    """

    def __init__(self, data: np.ndarray, name: str, error: type[InputError] = InputError,
                 what: str = "model file"):
        self.data = data
        self.name = name
        self.error = error
        self.what = what
        self.pos = 0

    def need(self, n: int, what: str) -> None:
        """Raises the cursor's error unless n more bytes are available."""
        if n < 0 or self.pos + n > len(self.data):
            raise self.error(f"{self.name}: truncated {self.what} (cannot read {what} at byte {self.pos}, "
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
