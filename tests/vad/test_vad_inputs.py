"""Bad input to the VAD raises VadError (an InputError, a ValueError) naming the value."""

from __future__ import annotations

import re

import numpy as np
import pytest

import metal_backend as mb
from metal_backend.io import InputError
from metal_backend.vad import SileroVad, VadError


@pytest.mark.parametrize("samples, match", [
    (np.zeros(1000, np.int16), "dtype int16"),
    (np.zeros(1000, np.int32), "dtype int32"),
    (np.zeros(1000, bool), "dtype bool"),
    (np.zeros(1000, np.complex64), "dtype complex64"),
    (np.zeros((2, 1000), np.float32), r"shape \(2, 1000\)"),
    (np.zeros((1000, 1), np.float32), r"shape \(1000, 1\)"),
    (np.float32(0.5), r"shape \(\)"),
    (np.zeros(0, np.float32), "empty"),
    (np.array([0.0, np.nan, 0.1], np.float32), "non-finite.*index 1: nan"),
    (np.array([0.0, 0.2, np.inf]), "non-finite.*index 2: inf"),
    (["a", "b"], "dtype <U1"),
])
def test_bad_samples(cpu_vad: SileroVad, samples, match: str) -> None:
    with pytest.raises(VadError, match=match):
        cpu_vad.speech_probabilities(samples)
    with pytest.raises(VadError, match=match):
        cpu_vad.speech_segments(samples)


@pytest.mark.parametrize("rate", [8000, 44100, 0, -16000, 16000.5, "16000", True, None])
def test_wrong_sampling_rate_names_the_value(cpu_vad: SileroVad, rate) -> None:
    x = np.zeros(2048, np.float32)
    with pytest.raises(VadError, match=rf"16000 Hz audio \(got sampling_rate={re.escape(repr(rate))}\)"):
        cpu_vad.speech_probabilities(x, sampling_rate=rate)
    with pytest.raises(VadError, match=re.escape(repr(rate))):
        cpu_vad.speech_segments(x, sampling_rate=rate)
    # The model's own rate is accepted, and the answer is the default call's.
    np.testing.assert_array_equal(cpu_vad.speech_probabilities(x, sampling_rate=16000),
                                  cpu_vad.speech_probabilities(x))


@pytest.mark.parametrize("chunk, match", [
    (np.zeros(100, np.int16), "chunk must be floating point"),
    (np.zeros((2, 100), np.float32), "chunk must be a 1-D"),
    (np.array([np.nan], np.float32), "chunk hold 1 non-finite"),
])
def test_bad_chunks_leave_the_stream_as_it_was(cpu_vad: SileroVad, chunk, match: str) -> None:
    x = np.sin(np.arange(5000) / 7).astype(np.float32) * 0.3
    cpu_vad.reset()
    want = cpu_vad.push(x)
    cpu_vad.reset()
    cpu_vad.push(x[:700])
    with pytest.raises(VadError, match=match):
        cpu_vad.push(chunk)
    # Other block sizes than in one push: the same values up to float rounding.
    np.testing.assert_allclose(np.concatenate([want[:1], cpu_vad.push(x[700:])]), want, atol=1e-6, rtol=0)


def test_errors_are_input_errors() -> None:
    assert issubclass(VadError, InputError) and issubclass(VadError, ValueError)


def test_unknown_device_and_bad_threads() -> None:
    with pytest.raises(VadError, match="NoSuchDevice"):
        SileroVad.load(device="NoSuchDevice")
    with pytest.raises(VadError, match="threads"):
        SileroVad.load(device="CPU", threads=0)
    with pytest.raises(VadError, match="device"):
        SileroVad.load(device=3)


def test_threads_option_reaches_the_backend() -> None:
    vad = SileroVad.load(device="CPU", threads=1)
    assert vad.runner.backend.options["n_threads"] == 1
    assert isinstance(vad.device, mb.Device)
