"""python -m metal_backend.whisper.convert --type: whisper.cpp-quantized .bin files (issue 26, item 3).

The files are walked independently of our reader and checked against whisper.cpp's quantize tool
(examples/quantize/quantize.cpp with examples/common-ggml.cpp's ggml_common_quantize_0): every
tensor the file stores with 2 dimensions is quantized except encoder.conv1.bias, encoder.conv2.bias
and the two positional embeddings; everything else keeps the source file's type (f16 conv weights,
f32 vectors); the header's ftype is 1000 x 2 (ggml's quantization version) + ggml's ftype. The
blocks are ggml-python's ggml_quantize_chunk bytes over the source's values. Then the same files
load in whisper.cpp (pywhispercpp) and ours, and give the same words on jfk.wav.
"""

from __future__ import annotations

import ctypes
import importlib.util

import numpy as np
import pytest
from random_whisper import random_model

import metal_backend as mb
from metal_backend.whisper import QuantizedTensor, Whisper, WhisperError, load_audio, load_model_data
from metal_backend.whisper.convert import FILE_TYPES, convert, main
from metal_backend.whisper.ggml_format import write_ggml
from whisper_testing import JFK_TEXT, normalize, require, walk_ggml_file

QUANTIZED = ["q8_0", "q5_1", "q5_0", "q4_1", "q4_0"]
# ggml type ids, from ggml.h.
GGML_IDS = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8}
# ggml's ftype (GGML_FTYPE_MOSTLY_*) of each type.
GGML_FTYPES = {"q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9}
SKIPPED = {"encoder.conv1.bias", "encoder.conv2.bias", "encoder.positional_embedding",
           "decoder.positional_embedding"}


def walk(path) -> tuple[tuple[int, ...], dict[str, tuple[int, tuple[int, ...], bytes]]]:
    """(hparams, {name: (ggml type, ne, data bytes)}) of a whisper.cpp file, read by hand."""
    hparams, _, tensors = walk_ggml_file(path)
    return hparams, tensors


def ggml_quantize_chunk(values: np.ndarray, qtype: str) -> bytes:
    ggml = pytest.importorskip("ggml")
    x = np.ascontiguousarray(values, dtype=np.float32)
    rows, n = x.shape
    out = np.zeros(rows * getattr(mb, qtype).row_size(n), np.uint8)
    ggml.ggml_quantize_chunk(GGML_IDS[qtype], x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                             out.ctypes.data_as(ctypes.c_void_p), 0, rows, n, None)
    return out.tobytes()


@pytest.fixture(scope="module")
def f16_file(tmp_path_factory):
    model = random_model("tiny.en", n_audio_layer=1, n_text_layer=1, n_audio_ctx=8, n_text_ctx=8, seed=3)
    path = tmp_path_factory.mktemp("convert") / "ggml-model-f16.bin"
    write_ggml(model, path)
    return path


@pytest.mark.parametrize("qtype", QUANTIZED)
def test_quantized_file_follows_whisper_cpp_quantize(f16_file, tmp_path, qtype):
    out = tmp_path / f"ggml-model-{qtype}.bin"
    assert main([str(f16_file), str(out), "--type", qtype]) == 0
    src_hparams, src = walk(f16_file)
    hparams, tensors = walk(out)
    assert hparams[:10] == src_hparams[:10] and hparams[10] == 2000 + GGML_FTYPES[qtype] == FILE_TYPES[qtype]
    assert list(tensors) == list(src)
    n_quantized = 0
    for name, (ttype, ne, data) in tensors.items():
        src_type, src_ne, src_data = src[name]
        assert ne == src_ne, name
        if len(ne) == 2 and name not in SKIPPED:
            assert ttype == GGML_IDS[qtype], name
            n_quantized += 1
        else:
            assert (ttype, data) == (src_type, src_data), name  # kept as it was, byte for byte
            assert ttype == (GGML_IDS["f16"] if name.startswith("encoder.conv") and name.endswith("weight")
                             else GGML_IDS["f32"]), name
    # 1 encoder block (q, k, v, out, 2 mlp) + 1 decoder block (twice the attention) + the token embedding.
    assert n_quantized == 6 + 10 + 1
    # The blocks are ggml's own quantization of the f16 values, for a few tensors.
    for name in ("decoder.token_embedding.weight", "encoder.blocks.0.mlp.0.weight", "decoder.blocks.0.attn.key.weight"):
        _, ne, src_data = src[name]
        values = np.frombuffer(src_data, np.float16).reshape(ne[1], ne[0])
        if name == "decoder.token_embedding.weight":
            rows = np.r_[0:64, 50250:50270, ne[1] - 64:ne[1]]
            row_bytes = getattr(mb, qtype).row_size(ne[0])
            ours = np.frombuffer(tensors[name][2], np.uint8).reshape(ne[1], row_bytes)[rows].tobytes()
            assert ours == ggml_quantize_chunk(values[rows], qtype), name
        else:
            assert tensors[name][2] == ggml_quantize_chunk(values, qtype), name


def test_quantized_file_loads_back(f16_file, tmp_path):
    source = load_model_data(f16_file)
    out = tmp_path / "q5_1.bin"
    written = convert(f16_file, out, type="q5_1")
    back = load_model_data(out)
    assert back.hparams == written.hparams and back.hparams.ftype == 2009
    assert back.vocab == source.vocab
    np.testing.assert_array_equal(back.mel_filters, source.mel_filters)
    embedding = back.tensors["decoder.token_embedding.weight"]
    assert isinstance(embedding, QuantizedTensor) and embedding.ggml_type.name == "Q5_1"
    values = mb.dequantize(embedding.data, mb.q5_1, embedding.shape)
    reference = np.asarray(source.tensors["decoder.token_embedding.weight"], np.float32)
    # q5_1: 32 levels from each block's minimum m in steps d = range / 31, so within d / 2, plus the f16
    # rounding (2^-11 relative) of d over up to 31 steps and of m: measured 1.027 d / 2.
    d = (reference.max() - reference.min()) / 31
    assert np.abs(values - reference).max() <= d / 2 + (31 * d + np.abs(reference).max()) * 2.0 ** -11
    assert back.tensors["encoder.conv1.weight"].dtype == np.float16


def test_f32_and_f16_outputs(f16_file, tmp_path):
    assert convert(f16_file, tmp_path / "f32.bin", type="f32").hparams.ftype == 0
    hparams, tensors = walk(tmp_path / "f32.bin")
    assert hparams[10] == 0 and {t for t, _, _ in tensors.values()} == {GGML_IDS["f32"]}
    convert(tmp_path / "f32.bin", tmp_path / "f16.bin")
    assert (tmp_path / "f16.bin").read_bytes() == f16_file.read_bytes()


def test_bad_requests_are_refused_and_write_nothing(f16_file, tmp_path, capsys):
    out = tmp_path / "out.bin"
    assert main([str(f16_file), str(out), "--type", "q3_k"]) == 1
    expected = "unknown output type 'q3_k'; expected one of f32, f16, q4_0, q4_1, q8_0, q5_0, q5_1"
    assert expected in capsys.readouterr().err
    assert not out.exists()

    # An existing file is kept unless --force.
    out.write_bytes(b"the user's file")
    assert main([str(f16_file), str(out), "--type", "q8_0"]) == 1
    assert "out.bin: already exists; choose another name or pass force=True (--force)" in capsys.readouterr().err
    assert out.read_bytes() == b"the user's file"
    assert main([str(f16_file), str(out), "--type", "q8_0", "--force"]) == 0
    assert walk(out)[0][10] == 2007

    with pytest.raises(WhisperError, match="is the source model itself"):
        convert(f16_file, f16_file, force=True)
    with pytest.raises(WhisperError, match="is a directory"):
        convert(f16_file, tmp_path)
    with pytest.raises(WhisperError, match="no_such_dir: output directory does not exist"):
        convert(f16_file, tmp_path / "no_such_dir" / "m.bin")
    with pytest.raises(WhisperError, match=r"model is already quantized \(q8_0\); convert from its float"):
        convert(out, tmp_path / "again.bin", type="q4_0")
    with pytest.raises(WhisperError, match="missing.bin: model not found"):
        convert(tmp_path / "missing.bin", tmp_path / "x.bin")
    with pytest.raises(WhisperError, match="unknown output type 'Q8_0'"):
        convert(f16_file, tmp_path / "x.bin", type="Q8_0")
    assert not (tmp_path / "x.bin").exists() and not (tmp_path / "again.bin").exists()
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("qtype", ["q8_0", "q5_0"])
def test_whisper_cpp_and_ours_load_the_same_quantized_file(tiny_en_dir, asset, tmp_path, qtype):
    require(importlib.util.find_spec("pywhispercpp") is not None, "pywhispercpp (pip install pywhispercpp)")
    from pywhispercpp.model import Model

    path = tmp_path / f"ggml-tiny.en-{qtype}.bin"
    convert(tiny_en_dir, path, type=qtype)
    audio = load_audio(asset("jfk.wav"))
    theirs = Model(str(path), n_threads=2, print_progress=False, print_realtime=False, redirect_whispercpp_logs_to=None)
    their_text = " ".join(segment.text.strip() for segment in theirs.transcribe(audio))
    ours = Whisper.load(path, device="CPU", threads=2)
    assert ours.compute.w["encoder.blocks.0.mlp.0.weight"].type == getattr(mb, qtype)
    assert normalize(their_text) == normalize(ours.transcribe(audio).text) == normalize(JFK_TEXT)
