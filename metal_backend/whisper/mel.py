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
    The whole of LogMel's frames: equal, value for value, to any of its windows.
    """
    mel = LogMel(audio, n_mels, padding, filters)
    return mel.frames(0, mel.n_frames)


# LogMel keeps every chunk of its spectrogram when they fit in this many bytes (float64).
KEEP_ALL_BYTES = 64 << 20


class LogMel:
    """The log-mel spectrogram of audio followed by `padding` zero samples, computed by windows.

    Memory is bounded in the audio's length: frames(start, stop) computes only the chunks of
    chunk_frames frames that cover the range (the last few are kept for the next call); the
    (max - 8) floor, which needs every frame, comes from one pass made at construction that
    keeps only the maximum. When every chunk fits in KEEP_ALL_BYTES (float64: about 16 minutes of
    audio at 80 mel bins), that pass keeps the chunks too, so no chunk is computed twice (the
    transcription loop's windows overlap chunks, which otherwise recomputes each one two or
    three times); the memory is then at most that constant. Frame i is the periodic-Hann window
    of samples 160 i - 200 .. 160 i + 199 of the audio and its padding, mirrored (numpy's "reflect") past either end, so
    every window equals the same columns of the whole-file spectrogram (log_mel_spectrogram).
    Arguments and errors as log_mel_spectrogram.
    """

    def __init__(self, audio: np.ndarray, n_mels: int = 80, padding: int = 0,
                 filters: np.ndarray | None = None, chunk_frames: int = N_FRAMES):
        audio = check_samples(audio)
        if isinstance(padding, bool) or not isinstance(padding, (int, np.integer)) or padding < 0:
            raise WhisperError(f"padding must be a non-negative number of samples (got {padding!r})")
        if isinstance(chunk_frames, bool) or not isinstance(chunk_frames, (int, np.integer)) or chunk_frames <= 0:
            raise WhisperError(f"chunk_frames must be a positive integer (got {chunk_frames!r})")
        if audio.size + padding == 0:
            raise WhisperError("audio is empty")
        if filters is None:
            filters = mel_filters(n_mels)
        elif filters.shape != (n_mels, N_FFT // 2 + 1):
            raise WhisperError(f"mel filters have shape {filters.shape}, expected {(n_mels, N_FFT // 2 + 1)}")
        self._audio = audio
        self._length = audio.size + int(padding)  # samples, padding included
        self._filters = filters.astype(np.float64)
        self._window = _periodic_hann(N_FFT)
        self.n_mels = n_mels
        self.chunk_frames = int(chunk_frames)
        # Centred framing gives 1 + length // hop frames; whisper drops the last one.
        self.n_frames = self._length // HOP_LENGTH
        self._chunks: dict[int, np.ndarray] = {}
        every_chunk = self._n_chunks() * n_mels * self.chunk_frames * 8
        self._keep = max(3, self._n_chunks()) if every_chunk <= KEEP_ALL_BYTES else 3
        peak = max((float(self._log_chunk(k).max()) for k in range(self._n_chunks())), default=-10.0)
        self._floor = peak - 8.0
        if self._keep < self._n_chunks():
            self._chunks.clear()

    @property
    def shape(self) -> tuple[int, int]:
        """(n_mels, n_frames), as the whole-file spectrogram's."""
        return (self.n_mels, self.n_frames)

    def frames(self, start: int, stop: int) -> np.ndarray:
        """Frames start..stop-1 (clipped to the spectrogram), float32 (n_mels, count), C-contiguous."""
        start, stop = max(0, int(start)), min(int(stop), self.n_frames)
        if stop <= start:
            return np.zeros((self.n_mels, 0), np.float32)
        first, last = start // self.chunk_frames, (stop - 1) // self.chunk_frames
        parts = [self._log_chunk(k) for k in range(first, last + 1)]
        log_spec = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        offset = first * self.chunk_frames
        log_spec = log_spec[:, start - offset:stop - offset]
        log_spec = np.maximum(log_spec, self._floor)
        return np.ascontiguousarray(((log_spec + 4.0) / 4.0).astype(np.float32))

    def _n_chunks(self) -> int:
        return -(-self.n_frames // self.chunk_frames)

    def _log_chunk(self, k: int) -> np.ndarray:
        """log10 of the mel power of chunk k's frames, float64 (n_mels, frames of the chunk)."""
        cached = self._chunks.get(k)
        if cached is not None:
            return cached
        first = k * self.chunk_frames
        count = min(self.chunk_frames, self.n_frames - first)
        # The padded signal's samples first*hop .. (first + count - 1)*hop + n_fft - 1; padded sample j
        # is sample j - n_fft/2 of the audio and its zero padding, mirrored past both ends.
        half = N_FFT // 2
        index = np.arange(first * HOP_LENGTH, (first + count - 1) * HOP_LENGTH + N_FFT) - half
        n = self._length
        if n > 1:
            period = 2 * (n - 1)
            index = np.abs(index) % period
            index = np.where(index >= n, period - index, index)
        else:
            index = np.zeros_like(index)
        segment = np.zeros(index.size, np.float64)
        inside = index < self._audio.size
        segment[inside] = self._audio[index[inside]]
        frames = np.lib.stride_tricks.sliding_window_view(segment, N_FFT)[::HOP_LENGTH][:count]
        power = np.abs(np.fft.rfft(frames * self._window, axis=-1)) ** 2
        log_spec = np.log10(np.maximum(self._filters @ power.T, 1e-10))
        if len(self._chunks) >= self._keep:
            self._chunks.pop(next(iter(self._chunks)))
        self._chunks[k] = log_spec
        return log_spec



class MelArray:
    """Frames computed already (window_log_mel's window) behind LogMel's interface: n_frames,
    shape and frames(start, stop), so a transcription loop reads either the same way."""

    def __init__(self, frames: np.ndarray):
        self._frames = frames
        self.n_mels, self.n_frames = frames.shape

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_mels, self.n_frames)

    def frames(self, start: int, stop: int) -> np.ndarray:
        """Frames start..stop-1 (clipped), float32 (n_mels, count), C-contiguous."""
        start, stop = max(0, int(start)), min(int(stop), self.n_frames)
        return np.ascontiguousarray(self._frames[:, start:max(start, stop)])


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

    The spectrogram is that of the whole audio followed by 30 s of silence, as
    openai-whisper's transcribe computes it, so the (max - 8) floor is shared by
    all windows and a short final window is padded with the spectrogram of
    silence rather than with zeros; it is computed window by window (LogMel).
    """
    mel = LogMel(audio, n_mels, padding=N_SAMPLES, filters=filters)
    content_frames = mel.n_frames - N_FRAMES
    # Audio shorter than one hop still gets one window.
    starts = range(0, max(content_frames, 1), N_FRAMES)
    return [pad_or_trim(mel.frames(s, s + N_FRAMES)) for s in starts]
