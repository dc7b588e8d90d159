"""Silero VAD weight files in whisper.cpp's layout (models/convert-silero-vad-to-ggml.py).

The layout, all little-endian int32 unless said otherwise:
    magic 0x67676d6c ("ggml"); model type: length, then that many bytes ("silero-16k");
    version major, minor, patch; window 512; context 64; encoder layers 4;
    per encoder layer: in channels, out channels, kernel size; LSTM input size, hidden size;
    final conv in channels, out channels;
    then tensors until the end of the file, each: n_dims, name length, ftype (0 f32, 1 f16),
    n_dims sizes innermost first (ggml order), the name, the data (numpy order, squeezed:
    the final conv's (1, 128, 1) weight is stored as (128,), its (1,) bias with n_dims 0).

whisper.cpp's ggml-silero-v6.2.0.bin stores the conv weights and the STFT basis as f16 (its loader
fixes those types and refuses an f32 file). The file shipped in this package (data/silero_vad_v6.2.bin,
made by scripts/make_silero_weights.py from the silero-vad 6.2.3 wheel's silero_vad.onnx) has the
same layout with every tensor f32, so the network is the ONNX one exactly. write_silero_file(...,
f16=True) with version (6, 2, 0) writes, byte for byte, the file whisper.cpp's converter makes from
the silero-vad 6.2.0 package (its ggml-silero-v6.2.0.bin; pinned in tests/vad/test_whisper_cpp_runs_our_file.py).

whisper.cpp's own VAD computes on a different framing: each 512-sample window alone, reflect-padded
64 on both sides, where silero-vad puts the previous window's last 64 samples in front. Its
probabilities therefore differ from silero-vad's (and ours) around onsets, whatever the file; on
the same framing it matches onnxruntime (tests/vad/test_whisper_cpp_runs_our_file.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from metal_backend.io import ByteCursor, map_file

from .errors import VadError

MAGIC = 0x67676D6C
MODEL_TYPE = "silero-16k"
WINDOW = 512
CONTEXT = 64
ENCODER = ((129, 128), (128, 64), (64, 64), (64, 128))  # (in, out) channels, kernel 3
KERNEL = 3
HIDDEN = 128
N_FFT = 256

# whisper.cpp's tensor names and the numpy shape each is used with here.
SHAPES: dict[str, tuple[int, ...]] = {}
for _i, (_cin, _cout) in enumerate(ENCODER):
    SHAPES[f"_model.encoder.{_i}.reparam_conv.weight"] = (_cout, _cin, KERNEL)
    SHAPES[f"_model.encoder.{_i}.reparam_conv.bias"] = (_cout,)
SHAPES.update({
    "_model.decoder.rnn.weight_ih": (4 * HIDDEN, HIDDEN),
    "_model.decoder.rnn.weight_hh": (4 * HIDDEN, HIDDEN),
    "_model.decoder.rnn.bias_ih": (4 * HIDDEN,),
    "_model.decoder.rnn.bias_hh": (4 * HIDDEN,),
    "_model.decoder.decoder.2.weight": (1, HIDDEN, 1),
    "_model.decoder.decoder.2.bias": (1,),
    "_model.stft.forward_basis_buffer": (N_FFT + 2, 1, N_FFT),
})
# Stored as f16 in whisper.cpp's file.
F16_IN_WHISPER_CPP = tuple(n for n in SHAPES if n.endswith("weight") and "rnn" not in n) + (
    "_model.stft.forward_basis_buffer",)


@dataclass(frozen=True)
class SileroWeights:
    """The tensors of a Silero VAD 16 kHz model (float32, shapes as SHAPES) and its version."""

    tensors: Mapping[str, np.ndarray]
    version: tuple[int, int, int]
    source: str


def check_tensors(tensors: Mapping[str, np.ndarray], source: str) -> dict[str, np.ndarray]:
    """float32 copies of the tensors SHAPES names, checked for presence, shape and finiteness."""
    out: dict[str, np.ndarray] = {}
    missing = [n for n in SHAPES if n not in tensors]
    if missing:
        raise VadError(f"{source}: Silero VAD weights lack {', '.join(missing)}")
    for name, shape in SHAPES.items():
        array = np.asarray(tensors[name])
        if array.size != int(np.prod(shape)):
            raise VadError(f"{source}: tensor {name} has {array.size} values, expected shape {shape}")
        array = np.ascontiguousarray(array.reshape(shape), dtype=np.float32)
        if not np.all(np.isfinite(array)):
            raise VadError(f"{source}: tensor {name} holds non-finite values")
        out[name] = array
    return out


def read_silero_file(path: str | Path) -> SileroWeights:
    """The weights of a Silero VAD file in whisper.cpp's layout; a file that is not one (wrong
    magic, model type or dimensions, truncated, unknown or missing tensors) raises VadError naming
    the path and what is wrong."""
    path = Path(path)
    cur = ByteCursor(map_file(path, VadError, "Silero VAD weight file"), str(path), VadError,
                     "Silero VAD weight file")
    (magic,) = cur.ints("I", "the magic number")
    if magic != MAGIC:
        raise VadError(f"{path}: not a Silero VAD ggml file (magic 0x{magic:08x}, expected 0x{MAGIC:08x})")
    (length,) = cur.ints("i", "the model type length")
    if not 0 < length <= 64:
        raise VadError(f"{path}: model type length {length} is not in 1..64")
    model_type = bytes(cur.take(length, "the model type")).decode("utf-8", "replace")
    if model_type != MODEL_TYPE:
        raise VadError(f"{path}: model type {model_type!r} is not supported (only {MODEL_TYPE!r})")
    version = cur.ints("3i", "the version")
    window, context, n_layers = cur.ints("3i", "the window, context and layer count")
    if (window, context, n_layers) != (WINDOW, CONTEXT, len(ENCODER)):
        raise VadError(f"{path}: window {window}, context {context}, {n_layers} encoder layers; expected "
                       f"{WINDOW}, {CONTEXT}, {len(ENCODER)}")
    for i, (cin, cout) in enumerate(ENCODER):
        dims = cur.ints("3i", f"encoder layer {i}'s dimensions")
        if dims != (cin, cout, KERNEL):
            raise VadError(f"{path}: encoder layer {i} is {dims} (in, out, kernel); expected {(cin, cout, KERNEL)}")
    lstm = cur.ints("2i", "the LSTM dimensions")
    final = cur.ints("2i", "the final conv dimensions")
    if lstm != (HIDDEN, HIDDEN) or final != (HIDDEN, 1):
        raise VadError(f"{path}: LSTM {lstm} and final conv {final}; expected {(HIDDEN, HIDDEN)} and {(HIDDEN, 1)}")
    tensors: dict[str, np.ndarray] = {}
    while not cur.at_end():
        n_dims, name_len, ftype = cur.ints("3i", "a tensor header")
        if not 0 <= n_dims <= 4 or not 0 < name_len <= 256 or ftype not in (0, 1):
            raise VadError(f"{path}: bad tensor header at byte {cur.pos - 12} "
                           f"(n_dims {n_dims}, name length {name_len}, ftype {ftype})")
        dims = cur.ints(f"{n_dims}i", "tensor sizes") if n_dims else ()
        if any(d <= 0 for d in dims):
            raise VadError(f"{path}: tensor sizes {dims} must be positive")
        name = bytes(cur.take(name_len, "a tensor name")).decode("utf-8", "replace")
        if name not in SHAPES:
            raise VadError(f"{path}: unknown tensor {name!r}")
        if name in tensors:
            raise VadError(f"{path}: tensor {name!r} appears twice")
        count = int(np.prod(dims)) if dims else 1
        dtype = np.dtype("<f4") if ftype == 0 else np.dtype("<f2")
        raw = cur.take(count * dtype.itemsize, f"tensor {name}'s data")
        tensors[name] = np.frombuffer(raw, dtype=dtype).astype(np.float32).reshape(tuple(reversed(dims)))
    return SileroWeights(check_tensors(tensors, str(path)), tuple(version), str(path))


def write_silero_file(path: str | Path, tensors: Mapping[str, np.ndarray], version: tuple[int, int, int],
                      f16: bool = False) -> None:
    """Writes tensors (the names and shapes of SHAPES) in whisper.cpp's layout; f16 stores the conv
    weights and STFT basis as float16, as whisper.cpp's converter does, else every tensor is f32."""
    checked = check_tensors(tensors, str(path))
    out = bytearray()
    out += struct.pack("<I", MAGIC)
    out += struct.pack("<i", len(MODEL_TYPE)) + MODEL_TYPE.encode()
    out += struct.pack("<3i", *version)
    out += struct.pack("<3i", WINDOW, CONTEXT, len(ENCODER))
    for cin, cout in ENCODER:
        out += struct.pack("<3i", cin, cout, KERNEL)
    out += struct.pack("<4i", HIDDEN, HIDDEN, HIDDEN, 1)
    order = [n for n in SHAPES if n != "_model.stft.forward_basis_buffer"] + ["_model.stft.forward_basis_buffer"]
    for name in order:
        data = checked[name]
        if name != "_model.stft.forward_basis_buffer":
            data = data.squeeze()
        half = f16 and name in F16_IN_WHISPER_CPP
        data = data.astype("<f2" if half else "<f4")
        dims = tuple(reversed(data.shape))
        encoded = name.encode()
        out += struct.pack("<3i", len(dims), len(encoded), 1 if half else 0)
        out += struct.pack(f"<{len(dims)}i", *dims) if dims else b""
        out += encoded + data.tobytes()
    Path(path).write_bytes(bytes(out))
