"""Log-mel spectrogram against a direct re-derivation of openai-whisper's algorithm."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metal_backend.whisper import N_FRAMES, N_SAMPLES, WhisperError, log_mel_spectrogram, mel_filters, mel_windows
from metal_backend.whisper.mel import pad_or_trim


def slaney_mel(hz: float) -> float:
    if hz < 1000.0:
        return 3.0 * hz / 200.0
    return 15.0 + 27.0 * math.log(hz / 1000.0) / math.log(6.4)


def slaney_hz(mel: float) -> float:
    if mel < 15.0:
        return 200.0 * mel / 3.0
    return 1000.0 * 6.4 ** ((mel - 15.0) / 27.0)


def reference_filters(n_mels: int, n_fft: int = 400, rate: int = 16000) -> np.ndarray:
    """Triangles of unit area, scalar loops in float64."""
    top = slaney_mel(rate / 2)
    edges = [slaney_hz(top * i / (n_mels + 1)) for i in range(n_mels + 2)]
    out = np.zeros((n_mels, n_fft // 2 + 1))
    for m in range(n_mels):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        for k in range(n_fft // 2 + 1):
            f = k * rate / n_fft
            if lo < f <= mid:
                w = (f - lo) / (mid - lo)
            elif mid < f < hi:
                w = (hi - f) / (hi - mid)
            else:
                w = 0.0
            out[m, k] = w * 2.0 / (hi - lo)
    return out


def reference_log_mel(audio: np.ndarray, n_mels: int = 80) -> np.ndarray:
    """torch.stft(center=True, reflect) as a DFT matrix, |.|^2 without the last frame, mel, log10, floor, scale."""
    n_fft, hop = 400, 160
    n = len(audio)
    # Reflect padding by index arithmetic: x[-i] = x[i], x[n-1+i] = x[n-1-i].
    idx = np.arange(-n_fft // 2, n + n_fft // 2)
    idx = np.where(idx < 0, -idx, idx)
    idx = np.where(idx > n - 1, 2 * (n - 1) - idx, idx)
    padded = audio.astype(np.float64)[idx]
    window = np.array([0.5 - 0.5 * math.cos(2 * math.pi * i / n_fft) for i in range(n_fft)])
    k = np.arange(n_fft // 2 + 1)[:, None]
    dft = np.exp(-2j * np.pi * k * np.arange(n_fft)[None, :] / n_fft)
    frames = np.stack([padded[t * hop:t * hop + n_fft] * window for t in range(1 + n // hop)], axis=1)
    power = np.abs(dft @ frames) ** 2
    power = power[:, :-1]
    mel = reference_filters(n_mels).astype(np.float32).astype(np.float64) @ power
    log = np.log10(np.maximum(mel, 1e-10))
    log = np.maximum(log, log.max() - 8.0)
    return (log + 4.0) / 4.0


@pytest.mark.parametrize("n_mels", [80, 128])
def test_filters_match_slaney_formula(n_mels):
    ours = mel_filters(n_mels)
    assert ours.shape == (n_mels, 201) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, reference_filters(n_mels), rtol=0, atol=1e-8)


def test_filters_cover_the_band():
    f = mel_filters(80).astype(np.float64)
    assert (f >= 0).all()
    # Each filter is one contiguous triangle; together they cover every bin
    # strictly between 0 Hz and 8 kHz, where the outermost triangles end.
    for row in f:
        nz = np.flatnonzero(row)
        assert len(nz) >= 1 and (np.diff(nz) == 1).all()
    assert f[:, 1:-1].sum(axis=0).min() > 0


@pytest.mark.parametrize("n_samples", [16000, 16000 * 3 + 77, 1234])
def test_log_mel_matches_direct_dft(n_samples):
    rng = np.random.default_rng(n_samples)
    t = np.arange(n_samples) / 16000
    audio = (0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(n_samples)).astype(np.float32)
    ours = log_mel_spectrogram(audio)
    ref = reference_log_mel(audio)
    assert ours.shape == (80, n_samples // 160) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, rtol=0, atol=2e-6)


def test_silence_is_floor():
    out = log_mel_spectrogram(np.zeros(16000, np.float32))
    np.testing.assert_allclose(out, (-10.0 + 4.0) / 4.0)


def test_padding_appends_silence():
    audio = np.random.default_rng(0).standard_normal(8000).astype(np.float32) * 0.1
    padded = log_mel_spectrogram(audio, padding=N_SAMPLES)
    assert padded.shape == (80, (8000 + N_SAMPLES) // 160)
    manual = log_mel_spectrogram(np.concatenate([audio, np.zeros(N_SAMPLES, np.float32)]))
    np.testing.assert_array_equal(padded, manual)


def test_pad_or_trim():
    x = np.ones((80, 10), np.float32)
    assert pad_or_trim(x, 20).shape == (80, 20) and pad_or_trim(x, 20)[:, 10:].sum() == 0
    assert pad_or_trim(np.ones((80, 4000)), N_FRAMES).shape == (80, N_FRAMES)


@pytest.mark.parametrize("seconds,windows", [(0.001, 1), (11, 1), (30, 1), (30.5, 2), (65, 3)])
def test_window_count(seconds, windows):
    audio = np.full(int(seconds * 16000), 0.01, np.float32)
    out = mel_windows(audio)
    assert len(out) == windows
    assert all(w.shape == (80, N_FRAMES) and w.dtype == np.float32 for w in out)


def test_windows_slice_one_spectrogram():
    rng = np.random.default_rng(1)
    audio = (0.1 * rng.standard_normal(16000 * 40)).astype(np.float32)
    whole = log_mel_spectrogram(audio, padding=N_SAMPLES)
    first, second = mel_windows(audio)
    np.testing.assert_array_equal(first, whole[:, :N_FRAMES])
    np.testing.assert_array_equal(second, whole[:, N_FRAMES:2 * N_FRAMES])


def test_empty_audio_raises():
    with pytest.raises(WhisperError, match="audio is empty"):
        mel_windows(np.zeros(0, np.float32))
    with pytest.raises(WhisperError, match="1-D"):
        log_mel_spectrogram(np.zeros((2, 100), np.float32))


@pytest.mark.parametrize("n_samples", [1, 159, 161, 16000, 80123, N_SAMPLES - 200, N_SAMPLES])
def test_window_log_mel_equals_the_padded_spectrogram(n_samples):
    """The live stream's short-cut (only frames that reach the audio are transformed) gives the
    window of the full computation over the audio padded to 30 s."""
    from metal_backend.whisper.mel import window_log_mel
    rng = np.random.default_rng(n_samples)
    audio = (0.1 * rng.standard_normal(n_samples)).astype(np.float32)
    want = log_mel_spectrogram(audio, padding=N_SAMPLES - n_samples)[:, :N_FRAMES]
    got = window_log_mel(audio)
    assert got.shape == (80, N_FRAMES) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_window_log_mel_bad_input():
    from metal_backend.whisper.mel import window_log_mel
    with pytest.raises(WhisperError, match="at most 480000 samples"):
        window_log_mel(np.zeros(N_SAMPLES + 1, np.float32))
    with pytest.raises(WhisperError, match="mel filters have shape"):
        window_log_mel(np.zeros(100, np.float32), 80, np.zeros((80, 10)))
    with pytest.raises(WhisperError):
        window_log_mel(np.zeros(100, np.int16))
