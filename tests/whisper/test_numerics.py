"""How far the backend's arithmetic is from exact: the encoder output and the first-step logits
against the float64 numpy model on the same weights and the same log-mel.

Bounds, from measurements (tiny.en, CPU device, relative L2 error against float64):
encoder output 1.6e-6 (numpy float32: 7e-7, CTranslate2 float32: 1.1e-6), first-step logits
2e-4 .. 6e-4 (the decoder keeps its self-attention cache and the window's cross-attention keys
and values in f16); whisper.cpp (f16 ggml file of the same weights, same log-mel) is at
3.7e-2 .. 7.4e-2 on the logits. The bounds below leave a factor of about 5.
"""

from __future__ import annotations

import numpy as np
import pytest

from metal_backend.whisper.audio import load_audio
from metal_backend.whisper.backend_compute import BackendWhisper
from metal_backend.whisper.mel import mel_windows
from numpy_whisper import float64_reference

ENCODER_BOUND = 1e-5
LOGITS_BOUND = 3e-3


def _relative(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.fixture(scope="module")
def tiny_en_float64(tiny_en):
    return float64_reference(tiny_en)


@pytest.mark.parametrize("clip", ["door_light.wav", "good_morning.wav"])
def test_cpu_error_against_float64(tiny_en, tiny_en_float64, asset, clip):
    mel = mel_windows(load_audio(asset(clip)), tiny_en.hparams.n_mels, filters=tiny_en.mel_filters)[0]
    special = tiny_en.special
    prompt = [special.sot, special.no_timestamps]
    exact = tiny_en_float64.encode(mel)
    exact_logits = tiny_en_float64.decode(exact, prompt, 0)

    backend = BackendWhisper(tiny_en, device="CPU")
    features = backend.encode(mel)
    encoder_error = _relative(backend.encoder_output(), exact.encoded)
    logits = backend.decode(features, prompt, 0)
    logits_error = _relative(logits, exact_logits)
    assert encoder_error < ENCODER_BOUND, f"encoder output relative error {encoder_error:.2e}"
    assert logits_error < LOGITS_BOUND, f"first-step logits relative error {logits_error:.2e}"
    text = slice(0, special.eot)
    assert int(np.argmax(logits[text])) == int(np.argmax(exact_logits[text]))
