"""Reading what models consume: audio files and samples, model-file bytes and ggml types; one base error.

- InputError (a ValueError): the base of every application's bad-input error (WhisperError, VadError).
- audio: read_wav, read_audio (other formats with the audio extra), load_audio (mono at a rate),
  check_samples, to_mono, resample (soxr where installed), resample_sinc.
- map_file, ByteCursor: little-endian reads over a memory-mapped file, truncation reported by name.
- GgmlType, QuantizedTensor: ggml's type ids as model files store them, raw quantized tensors.
"""

from . import audio
from .audio import SAMPLE_RATE, check_samples, load_audio, read_audio, read_wav, resample, resample_sinc, to_mono
from .byte_cursor import ByteCursor, map_file
from .errors import InputError
from .ggml_types import NUMPY_TYPES, GgmlType, QuantizedTensor

__all__ = ["ByteCursor", "GgmlType", "InputError", "NUMPY_TYPES", "QuantizedTensor", "SAMPLE_RATE", "audio",
           "check_samples", "load_audio", "map_file", "read_audio", "read_wav", "resample", "resample_sinc",
           "to_mono"]
