"""Silero weight files in whisper.cpp's layout: the shipped f32 file and ggml-silero-v6.2.0.bin's
f16 variant (written here from the documented layout), and broken files."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from metal_backend.vad import SileroVad, VadError, read_silero_file, write_silero_file
from metal_backend.vad.silero_file import SHAPES
from metal_backend.vad.silero_vad import DEFAULT_WEIGHTS
from vad_testing import signals, speech


def parse(path: Path) -> tuple[tuple, dict]:
    """A reader written from whisper.cpp's converter (models/convert-silero-vad-to-ggml.py): header
    ints, then (n_dims, name length, ftype, dims innermost first, name, data) records."""
    raw = path.read_bytes()
    pos = 0

    def ints(n):
        nonlocal pos
        v = struct.unpack_from(f"<{n}i", raw, pos)
        pos += 4 * n
        return v

    magic, = struct.unpack_from("<I", raw, 0)
    pos = 4
    n, = ints(1)
    kind = raw[pos:pos + n].decode()
    pos += n
    header = (magic, kind) + ints(3 + 3 + 12 + 2 + 2)
    tensors = {}
    while pos < len(raw):
        n_dims, name_len, ftype = ints(3)
        dims = ints(n_dims)
        name = raw[pos:pos + name_len].decode()
        pos += name_len
        dtype = "<f4" if ftype == 0 else "<f2"
        count = int(np.prod(dims)) if dims else 1
        tensors[name] = (ftype, dims, np.frombuffer(raw, dtype, count, pos))
        pos += count * np.dtype(dtype).itemsize
    return header, tensors


def test_shipped_file_follows_the_layout() -> None:
    header, tensors = parse(DEFAULT_WEIGHTS)
    assert header == (0x67676D6C, "silero-16k", 6, 2, 3, 512, 64, 4, 129, 128, 3, 128, 64, 3, 64, 64, 3, 64, 128,
                      3, 128, 128, 128, 1)
    assert set(tensors) == set(SHAPES)
    assert all(ftype == 0 for ftype, _, _ in tensors.values())
    assert tensors["_model.stft.forward_basis_buffer"][1] == (256, 1, 258)
    assert tensors["_model.encoder.0.reparam_conv.weight"][1] == (3, 129, 128)
    assert tensors["_model.decoder.decoder.2.weight"][1] == (128,)
    assert tensors["_model.decoder.decoder.2.bias"][1] == ()
    assert list(tensors)[-1] == "_model.stft.forward_basis_buffer"


def test_whisper_cpp_f16_file_loads_and_agrees(tmp_path: Path, cpu_vad: SileroVad) -> None:
    shipped = read_silero_file(DEFAULT_WEIGHTS)
    path = tmp_path / "ggml-silero-v6.2.0.bin"
    write_silero_file(path, shipped.tensors, (6, 2, 0), f16=True)
    header, tensors = parse(path)
    assert header[2:5] == (6, 2, 0)
    halves = {n for n, (ftype, _, _) in tensors.items() if ftype == 1}
    assert halves == {"_model.stft.forward_basis_buffer", "_model.decoder.decoder.2.weight"} | {
        f"_model.encoder.{i}.reparam_conv.weight" for i in range(4)}
    loaded = read_silero_file(path)
    assert loaded.version == (6, 2, 0)
    for name, value in shipped.tensors.items():
        expected = value.astype(np.float16).astype(np.float32) if name in halves else value
        np.testing.assert_array_equal(loaded.tensors[name], expected)
    vad16 = SileroVad.load(path, device="CPU")
    for x in (speech("jfk"), signals()["chirp"]):
        # f16 weights move the probabilities a little, never the decisions.
        np.testing.assert_allclose(vad16.speech_probabilities(x), cpu_vad.speech_probabilities(x), atol=2e-2)


def test_broken_files_raise_naming_the_file(tmp_path: Path) -> None:
    good = DEFAULT_WEIGHTS.read_bytes()
    cases = {
        "missing.bin": None,
        "empty.bin": b"",
        "magic.bin": b"GGUF" + good[4:],
        "truncated.bin": good[:len(good) // 2],
        "type.bin": good[:8] + b"silero-08k" + good[18:],
        "window.bin": good[:30] + struct.pack("<i", 256) + good[34:],
        "short.bin": good[:200],
    }
    messages = {"missing.bin": "not found", "empty.bin": "is empty", "magic.bin": "magic",
                "truncated.bin": "truncated", "type.bin": "silero-08k", "window.bin": "window 256",
                "short.bin": "truncated|lack"}
    for name, data in cases.items():
        path = tmp_path / name
        if data is not None:
            path.write_bytes(data)
        with pytest.raises(VadError, match=messages[name]) as info:
            SileroVad.load(path, device="CPU")
        assert name in str(info.value)
    with pytest.raises(VadError, match="is a directory"):
        SileroVad.load(tmp_path, device="CPU")


def test_writer_refuses_incomplete_or_non_finite_weights(tmp_path: Path) -> None:
    tensors = dict(read_silero_file(DEFAULT_WEIGHTS).tensors)
    bad = dict(tensors)
    del bad["_model.decoder.rnn.bias_hh"]
    with pytest.raises(VadError, match="bias_hh"):
        write_silero_file(tmp_path / "x.bin", bad, (6, 2, 3))
    bad = dict(tensors)
    bad["_model.decoder.rnn.bias_ih"] = np.full(512, np.nan, np.float32)
    with pytest.raises(VadError, match="non-finite"):
        write_silero_file(tmp_path / "x.bin", bad, (6, 2, 3))
