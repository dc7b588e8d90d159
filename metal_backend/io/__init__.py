"""Reading what models consume: audio files and samples, raw bytes of model files; one base error.

- InputError (a ValueError): the base of every application's bad-input error (WhisperError, VadError).
- map_file, ByteCursor: little-endian reads over a memory-mapped file, truncation reported by name.
"""

from .byte_cursor import ByteCursor, map_file
from .errors import InputError

__all__ = ["ByteCursor", "InputError", "map_file"]
