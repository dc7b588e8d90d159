"""SileroVad's probabilities against onnxruntime running silero-vad 6.2.3's silero_vad.onnx.

Within 1e-4 on every device (CPU, MetalSim, Metal): speech (espeak sentences, jfk.wav), silence,
noise, tones, a chirp and a mixture of odd length (the last window zero-padded): between them the
block graphs of every size (64, 16, 4, 1) and the state carried from block to block.
"""

from __future__ import annotations

import numpy as np
import pytest

from metal_backend.vad import SileroVad
from vad_testing import signals, speech

TOLERANCE = 1e-4


@pytest.mark.parametrize("name", sorted(signals()))
def test_synthetic_signals_match_onnxruntime(vad: SileroVad, onnx_silero, name: str) -> None:
    x = signals()[name]
    ours = vad.speech_probabilities(x)
    ref = onnx_silero.probabilities(x)
    assert ours.shape == ref.shape == (-(-x.size // 512),)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("name", ["door_light", "jfk"])
def test_speech_matches_onnxruntime(vad: SileroVad, onnx_silero, name: str) -> None:
    x = speech(name)
    ours = vad.speech_probabilities(x)
    ref = onnx_silero.probabilities(x)
    np.testing.assert_allclose(ours, ref, atol=TOLERANCE, rtol=0)
    # The signal really is speech and silence: both sides of the threshold are exercised.
    assert ref.max() > 0.9 and ref.min() < 0.1


def test_signals_are_told_apart(cpu_vad: SileroVad) -> None:
    """Speech scores high, silence and a steady tone low (what the reference says too, above)."""
    assert cpu_vad.speech_probabilities(speech("jfk")).max() > 0.9
    assert cpu_vad.speech_probabilities(signals()["silence"]).max() < 0.1


def test_probabilities_do_not_depend_on_earlier_calls(cpu_vad: SileroVad) -> None:
    x = signals()["chirp"]
    first = cpu_vad.speech_probabilities(x)
    cpu_vad.speech_probabilities(signals()["white_noise"])
    cpu_vad.push(signals()["tone_440"][:1000])
    np.testing.assert_array_equal(cpu_vad.speech_probabilities(x), first)


def test_every_graph_node_runs_on_the_device(vad: SileroVad) -> None:
    """No op of the network falls back to the CPU on MetalSim (or Metal)."""
    vad.speech_probabilities(signals()["mixed_odd_length"])
    placements = vad.placements()
    assert placements
    for graph, counts in placements.items():
        assert set(counts) == {vad.device.name}, (graph, counts)


def test_load_names_the_version_and_source() -> None:
    vad = SileroVad.load(device="CPU")
    assert vad.version == (6, 2, 3)
    assert vad.source.endswith("silero_vad_v6.2.bin")
