"""whisper.cpp's own VAD (pywhispercpp's libwhisper) runs the Silero file we write and computes the
network it should: the check that our writer's layout (names, ggml sizes, f16 tensors, LSTM gate
order, conv taps) is the one whisper.cpp reads.

whisper.cpp does not frame windows as silero-vad does: its graph takes each 512-sample window alone
and reflect-pads it 64 on both sides, where silero-vad puts the previous window's last 64 samples in
front (whisper_vad_build_stft_layer: ggml_pad_reflect_1d(frame, 64, 64) on a 512-sample frame;
whisper_vad_detect_speech_no_reset copies window i alone into it). So its reference is onnxruntime
fed each window with its own mirrored samples in front (OnnxSilero framing "reflect"), the same
640 samples whisper.cpp computes on. Against silero's framing whisper.cpp differs by far more than
any numerics (asserted below): that, not our file, is the large difference benchmarks/vad.py
reports between whisper.cpp and onnxruntime.

Numerics: whisper.cpp holds the STFT basis and the conv weights in f16 (its loader fixes those
types; an f32 file is refused) and ggml_conv_1d rounds every conv's input patches to f16, so the
reference is that model with those roundings (OnnxSilero f16_weights, f16_conv_inputs;
vad_testing.ggml_f16_numerics). Measured (x86, 1 thread): 8.7e-5 on this clip, 8.9e-4 over 10 min of
benchmarks/vad.py's audio (18750 windows, none above 2e-3, 99.9% below 1.9e-4); against the f32
model 7.8e-3 on this clip, 3.6e-2 over the 10 min (the LSTM carries the roundings on). The residue is
most likely an f16 rounding of a conv input that lands the other way after a different f32 summation order
(one f16 step is 4.9e-4 relative): TOLERANCE 2e-3 allows a few such flips and is still 50 times
below what a layout error (0.97 and more, the mis-laid files below) or silero-vad's framing (0.13 on
this clip) move the probabilities."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from isolated import run_isolated
from metal_backend.vad import SileroVad, read_silero_file, write_silero_file
from metal_backend.vad.silero_vad import DEFAULT_WEIGHTS
from vad_testing import ONNX, OnnxSilero, require, signals, speech

TOLERANCE = 2e-3


@pytest.fixture(scope="module")
def audio() -> np.ndarray:
    """5 s: speech with an onset after silence, then a chirp and noise (a few windows each)."""
    s = signals()
    return np.concatenate([np.zeros(8000, np.float32), speech("jfk")[:3 * 16000], s["chirp"][:8000],
                           s["white_noise"][:8000]]).astype(np.float32)


@pytest.fixture(scope="module")
def reflect_reference(audio: np.ndarray) -> np.ndarray:
    require(ONNX.is_file(), f"{ONNX} (see tests/assets/vad/README.md)")
    return OnnxSilero(framing="reflect", f16_weights=True, f16_conv_inputs=True).probabilities(audio)


def whisper_cpp(path: Path, audio: np.ndarray) -> np.ndarray:
    """whisper.cpp's probabilities, computed in a fresh interpreter: libwhisper links libggml by its
    soname, so in a process where ggml-python's libggml is already loaded (the quantization tests
    load it) libwhisper runs on that ggml instead of its own (another version, built with other
    flags), and the numerics this file pins move (measured: 0.015 on this clip after
    tests/ops/test_quant_ggml_exact.py in the same process, 8.7e-5 alone)."""
    require(importlib.util.find_spec("pywhispercpp") is not None, "pywhispercpp (the test extra)")
    src, out = path.with_suffix(".audio.npy"), path.with_suffix(".probs.npy")
    np.save(src, audio)
    run_isolated(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import numpy as np
        from vad_testing import WhisperCppVad
        vad = WhisperCppVad({str(path)!r})
        try:
            np.save({str(out)!r}, vad.probabilities(np.load({str(src)!r})))
        finally:
            vad.close()
    """, timeout=120)
    return np.load(out)


def shipped() -> dict[str, np.ndarray]:
    return dict(read_silero_file(DEFAULT_WEIGHTS).tensors)


def test_whisper_cpp_on_our_file_matches_onnxruntime(tmp_path: Path, audio: np.ndarray,
                                                     reflect_reference: np.ndarray) -> None:
    path = tmp_path / "ggml-silero-v6.2.0.bin"
    write_silero_file(path, shipped(), (6, 2, 0), f16=True)
    probs = whisper_cpp(path, audio)
    assert probs.shape == reflect_reference.shape
    assert probs.max() > 0.9 and probs.min() < 0.1  # the clip has speech and non-speech
    np.testing.assert_allclose(probs, reflect_reference, atol=TOLERANCE, rtol=0)
    # The framing, not the file, is what sets whisper.cpp apart from silero-vad's own probabilities.
    silero = OnnxSilero().probabilities(audio)
    assert np.abs(probs - silero).max() > 10 * TOLERANCE


def test_our_loader_reads_the_f16_file_whisper_cpp_users_have(tmp_path: Path, audio: np.ndarray) -> None:
    """The f16 file (byte for byte whisper.cpp's converter's, test below) loads in ours as the
    network onnxruntime computes with the same f16-rounded weights, in silero-vad's framing: the
    ~1e-2 by which it differs from the f32 model is the rounding, not the layout. Measured: 2.4e-5
    over 10 min; 1e-4 is the VAD tests' tolerance."""
    path = tmp_path / "ggml-silero-v6.2.0.bin"
    write_silero_file(path, shipped(), (6, 2, 0), f16=True)
    ours = SileroVad.load(path, device="CPU").speech_probabilities(audio)
    np.testing.assert_allclose(ours, OnnxSilero(f16_weights=True).probabilities(audio), atol=1e-4, rtol=0)


# SHA-256 of the file whisper.cpp's models/convert-silero-vad-to-ggml.py (ggml-org/whisper.cpp
# 233fe1f) writes from the silero-vad 6.2.0 wheel's model, the way its ggml-silero-v6.2.0.bin is made:
#   pip install --no-deps --target T silero_vad-6.2.0-py3-none-any.whl   (plus torch; torchaudio, which
#   it imports but the converter does not use, may be an empty module)
#   PYTHONPATH=T python convert-silero-vad-to-ggml.py --output ggml-silero.bin
# Measured 2026-12-01; the 6.2.3 wheel gives the same bytes but for the version's patch field.
WHISPER_CPP_V620_SHA256 = "2aa269b785eeb53a82983a20501ddf7c1d9c48e33ab63a41391ac6c9f7fb6987"


def test_our_f16_file_is_whisper_cpps_file(tmp_path: Path) -> None:
    path = tmp_path / "ggml-silero-v6.2.0.bin"
    write_silero_file(path, shipped(), (6, 2, 0), f16=True)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == WHISPER_CPP_V620_SHA256


def gates_in_onnx_order(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The LSTM gates as ONNX orders them (i, o, f, c) left where PyTorch's (i, f, g, o) belong."""
    out = dict(w)
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        i, f, g, o = np.split(w[f"_model.decoder.rnn.{name}"], 4, axis=0)
        out[f"_model.decoder.rnn.{name}"] = np.concatenate([i, o, f, g], axis=0)
    return out


def conv_taps_reversed(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = dict(w)
    for i in range(4):
        out[f"_model.encoder.{i}.reparam_conv.weight"] = w[f"_model.encoder.{i}.reparam_conv.weight"][..., ::-1]
    return out


def lstm_matrices_swapped(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = dict(w)
    out["_model.decoder.rnn.weight_ih"] = w["_model.decoder.rnn.weight_hh"]
    out["_model.decoder.rnn.weight_hh"] = w["_model.decoder.rnn.weight_ih"]
    return out


@pytest.mark.parametrize("mislay", [gates_in_onnx_order, conv_taps_reversed, lstm_matrices_swapped])
def test_a_mislaid_file_fails_the_comparison(tmp_path: Path, audio: np.ndarray, reflect_reference: np.ndarray,
                                             mislay) -> None:
    """Layout errors a writer could make that whisper.cpp still loads (same sizes) break the match by
    far more than the tolerance, so the test above would catch them."""
    path = tmp_path / "mislaid.bin"
    write_silero_file(path, mislay(shipped()), (6, 2, 0), f16=True)
    assert np.abs(whisper_cpp(path, audio) - reflect_reference).max() > 10 * TOLERANCE
