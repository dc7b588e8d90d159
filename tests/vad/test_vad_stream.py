"""reset()/push(): audio in chunks of any size gives the probabilities of the whole file."""

from __future__ import annotations

import numpy as np
import pytest

from metal_backend.vad import SileroVad
from vad_testing import signals, speech


def whole_windows(vad: SileroVad, x: np.ndarray) -> np.ndarray:
    n = x.size // 512
    return vad.speech_probabilities(x[:n * 512])


@pytest.mark.parametrize("seed", range(3))
def test_random_chunks_equal_the_whole_file(vad: SileroVad, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.concatenate([speech("door_light")[:2 * 16000], signals()["mixed_odd_length"]])
    if vad.device.name != "CPU":
        x = x[:40000]
    want = whole_windows(vad, x)
    vad.reset()
    got, pos = [], 0
    while pos < x.size:
        n = int(rng.choice([0, 1, 77, 511, 512, 513, 1600, 5000, 20000]))
        probs = vad.push(x[pos:pos + n])
        assert probs.dtype == np.float32
        got.append(probs)
        pos += n
        assert vad.pending_samples == pos % 512 if pos <= x.size else True
    got = np.concatenate(got)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_push_returns_windows_as_they_complete(cpu_vad: SileroVad) -> None:
    x = signals()["white_noise"]
    cpu_vad.reset()
    assert cpu_vad.push(x[:300]).shape == (0,)
    assert cpu_vad.push(x[300:600]).shape == (1,)
    assert cpu_vad.pending_samples == 88
    assert cpu_vad.push(x[600:600]).shape == (0,)
    assert cpu_vad.push(x[600:5000]).shape == (8,)


def test_reset_starts_a_new_stream(cpu_vad: SileroVad) -> None:
    x = speech("jfk")[:16000]
    cpu_vad.reset()
    first = cpu_vad.push(x)
    cpu_vad.push(signals()["chirp"][:3000])
    cpu_vad.reset()
    np.testing.assert_array_equal(cpu_vad.push(x), first)
    assert cpu_vad.pending_samples == x.size % 512
