"""Whisper's log-mel spectrogram, computed as openai-whisper computes it.

25 ms periodic-Hann frames every 10 ms (n_fft 400, hop 160 at 16 kHz),
centred with reflect padding, |STFT|^2 with the last frame dropped, 80 Slaney
mel filters, log10 clamped at 1e-10, floored at (max - 8), then (x + 4) / 4.
The filter bank is derived from the Slaney mel formula, so no asset is needed.
"""

from __future__ import annotations

import numpy as np

from .audio import SAMPLE_RATE, check_samples
from .errors import WhisperError

N_FFT = 400
HOP_LENGTH = 160
CHUNK_SECONDS = 30
N_SAMPLES = CHUNK_SECONDS * SAMPLE_RATE  # 480000 samples in a 30 s window
N_FRAMES = N_SAMPLES // HOP_LENGTH  # 3000 mel frames in a 30 s window

# Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above.
_SLANEY_HZ_PER_MEL = 200.0 / 3.0
_SLANEY_BREAK_HZ = 1000.0
_SLANEY_BREAK_MEL = _SLANEY_BREAK_HZ / _SLANEY_HZ_PER_MEL
_SLANEY_LOG_STEP = np.log(6.4) / 27.0


def hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney mel value of frequencies in Hz."""
    hz = np.asarray(hz, dtype=np.float64)
    linear = hz / _SLANEY_HZ_PER_MEL
    log = _SLANEY_BREAK_MEL + np.log(np.maximum(hz, _SLANEY_BREAK_HZ) / _SLANEY_BREAK_HZ) / _SLANEY_LOG_STEP
    return np.where(hz >= _SLANEY_BREAK_HZ, log, linear)


def mel_to_hz(mel: np.ndarray) -> np.ndarray:
    """Frequency in Hz of Slaney mel values."""
    mel = np.asarray(mel, dtype=np.float64)
    linear = mel * _SLANEY_HZ_PER_MEL
    log = _SLANEY_BREAK_HZ * np.exp(_SLANEY_LOG_STEP * (np.maximum(mel, _SLANEY_BREAK_MEL) - _SLANEY_BREAK_MEL))
    return np.where(mel >= _SLANEY_BREAK_MEL, log, linear)


def mel_filters(n_mels: int = 80, n_fft: int = N_FFT, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Slaney-normalised triangular mel filters over 0..sample_rate/2, float32 (n_mels, n_fft//2 + 1).

    The same bank librosa.filters.mel(sr, n_fft, n_mels) gives, which is what
    openai-whisper ships as mel_filters.npz.
    """
    if n_mels <= 0:
        raise WhisperError(f"n_mels must be positive (got {n_mels})")
    fft_hz = np.linspace(0.0, sample_rate / 2.0, n_fft // 2 + 1)
    # n_mels triangles need n_mels + 2 edges, equally spaced in mel.
    edges_hz = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sample_rate / 2.0), n_mels + 2))
    lower, centre, upper = edges_hz[:-2, None], edges_hz[1:-1, None], edges_hz[2:, None]
    rising = (fft_hz[None, :] - lower) / (centre - lower)
    falling = (upper - fft_hz[None, :]) / (upper - centre)
    weights = np.maximum(0.0, np.minimum(rising, falling))
    # Slaney normalisation: each triangle has unit area in Hz.
    weights *= 2.0 / (upper - lower)
    return weights.astype(np.float32)


def log_mel_spectrogram(audio: np.ndarray, n_mels: int = 80, padding: int = 0,
                        filters: np.ndarray | None = None) -> np.ndarray:
    """Log-mel spectrogram of 16 kHz mono audio, float32 (n_mels, (len(audio) + padding) // 160).

    `padding` zero samples are appended first, as openai-whisper does before
    splitting long audio into 30 s windows. `filters` overrides the computed
    mel bank (a model file may carry its own). Samples that are not float,
    not 1-D, empty or not finite raise WhisperError (audio.check_samples).
    """
    audio = check_samples(audio)
    if padding:
        audio = np.concatenate([audio, np.zeros(padding, np.float32)])
    if audio.size == 0:
        raise WhisperError("audio is empty")
    if filters is None:
        filters = mel_filters(n_mels)
    elif filters.shape != (n_mels, N_FFT // 2 + 1):
        raise WhisperError(f"mel filters have shape {filters.shape}, expected {(n_mels, N_FFT // 2 + 1)}")

    return _normalised(_log10_mel(audio, filters, audio.size // HOP_LENGTH))


def window_log_mel(audio: np.ndarray, n_mels: int = 80, filters: np.ndarray | None = None) -> np.ndarray:
    """The (n_mels, 3000) window of at most 30 s of audio: log_mel_spectrogram(audio,
    padding=N_SAMPLES - len(audio)) (equal to float32 rounding), computed in proportion to the
    audio's length. A frame whose 400-sample FFT window holds only the zero padding has mel power 0,
    so log10 floor -10 before the (max - 8) floor: only the frames that reach the audio are
    transformed (what a live stream re-transcribing a short buffer wants)."""
    audio = check_samples(audio)
    if audio.size > N_SAMPLES:
        raise WhisperError(f"window_log_mel takes at most {N_SAMPLES} samples (got {audio.size})")
    if filters is None:
        filters = mel_filters(n_mels)
    elif filters.shape != (n_mels, N_FFT // 2 + 1):
        raise WhisperError(f"mel filters have shape {filters.shape}, expected {(n_mels, N_FFT // 2 + 1)}")
    half = N_FFT // 2
    # Frames from -(-(len + half) // hop) on see zeros only (and the end's reflection of zeros).
    reached = min(-(-(audio.size + half) // HOP_LENGTH), N_FRAMES)
    length = min(reached * HOP_LENGTH + half, N_SAMPLES)
    padded = np.concatenate([audio, np.zeros(length - audio.size, np.float32)])
    log_spec = np.full((n_mels, N_FRAMES), -10.0)
    log_spec[:, :reached] = _log10_mel(padded, filters, reached)
    return _normalised(log_spec)


def _log10_mel(audio: np.ndarray, filters: np.ndarray, n_frames: int) -> np.ndarray:
    """log10 of the mel power (floored at 1e-10) of the first n_frames centred frames, float64."""
    half = N_FFT // 2
    padded = np.pad(audio.astype(np.float64), half, mode="reflect")
    # Centred framing gives 1 + len // hop frames; whisper drops the last one.
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[: n_frames * HOP_LENGTH: HOP_LENGTH]
    window = _periodic_hann(N_FFT)
    power = np.abs(np.fft.rfft(frames * window, axis=-1)) ** 2
    mel = filters.astype(np.float64) @ power.T
    return np.log10(np.maximum(mel, 1e-10))


def _normalised(log_spec: np.ndarray) -> np.ndarray:
    """Whisper's dynamic-range floor (max - 8) and scaling to about [-1, 1], float32."""
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)


def _periodic_hann(n: int) -> np.ndarray:
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n) / n)


def pad_or_trim(mel: np.ndarray, n_frames: int = N_FRAMES) -> np.ndarray:
    """Cuts or zero-pads the last axis to n_frames."""
    have = mel.shape[-1]
    if have >= n_frames:
        return mel[..., :n_frames]
    pad = [(0, 0)] * (mel.ndim - 1) + [(0, n_frames - have)]
    return np.pad(mel, pad)


def mel_windows(audio: np.ndarray, n_mels: int = 80, filters: np.ndarray | None = None) -> list[np.ndarray]:
    """Splits audio into consecutive 30 s log-mel windows of (n_mels, 3000), float32.

    The spectrogram is computed once over the whole audio followed by 30 s of
    silence, as openai-whisper's transcribe does, so the (max - 8) floor is
    shared by all windows and a short final window is padded with the
    spectrogram of silence rather than with zeros.
    """
    mel = log_mel_spectrogram(audio, n_mels, padding=N_SAMPLES, filters=filters)
    content_frames = mel.shape[-1] - N_FRAMES
    # Audio shorter than one hop still gets one window.
    starts = range(0, max(content_frames, 1), N_FRAMES)
    return [np.ascontiguousarray(pad_or_trim(mel[:, s:s + N_FRAMES])) for s in starts]
