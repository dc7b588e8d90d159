"""The log-mel computed by windows (mel.LogMel) equals the whole-file spectrogram, and its memory
does not grow with the audio beyond the samples themselves."""

from __future__ import annotations

import numpy as np
import pytest

from isolated import run_isolated
from metal_backend.whisper import (
    N_FRAMES,
    N_SAMPLES,
    DecodingOptions,
    SpecialTokens,
    WhisperError,
    WhisperHParams,
    WhisperModelData,
    log_mel_spectrogram,
    mel_filters,
    mel_windows,
    transcribe,
)
from metal_backend.whisper.mel import LogMel, pad_or_trim


def whole_file_log_mel(audio: np.ndarray, n_mels: int = 80, padding: int = 0) -> np.ndarray:
    """The spectrogram of every frame at once, as openai-whisper computes it (numpy's reflect pad)."""
    x = np.concatenate([audio, np.zeros(padding, np.float32)]).astype(np.float64)
    padded = np.pad(x, 200, mode="reflect")
    n_frames = x.size // 160
    frames = np.lib.stride_tricks.sliding_window_view(padded, 400)[: n_frames * 160: 160]
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(400) / 400)
    power = np.abs(np.fft.rfft(frames * window, axis=-1)) ** 2
    log_spec = np.log10(np.maximum(mel_filters(n_mels).astype(np.float64) @ power.T, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)


def _clip(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(seconds * 16000)
    t = np.arange(n) / 16000.0
    # A loud start and end, so that the reflected frames at both ends carry signal.
    return (0.3 * np.sin(2 * np.pi * 440 * t) * (1 + t) + 0.05 * rng.standard_normal(n)).astype(np.float32)


@pytest.mark.parametrize("chunk_frames", [1, 7, 64, 3000])
@pytest.mark.parametrize("padding", [0, 1234])
def test_windows_equal_the_whole_file(chunk_frames, padding):
    audio = _clip(2.37)
    whole = whole_file_log_mel(audio, padding=padding)
    mel = LogMel(audio, padding=padding, chunk_frames=chunk_frames)
    assert mel.shape == whole.shape
    n = mel.n_frames
    # Ranges inside one chunk, across chunk boundaries, and touching both reflected ends.
    ranges = [(0, 1), (0, n), (n - 1, n), (0, 5), (n - 5, n), (3, 200), (63, 65), (100, 101), (6, 8), (n - 70, n)]
    for start, stop in ranges:
        got = mel.frames(start, stop)
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_allclose(got, whole[:, start:stop], rtol=0, atol=2e-6, err_msg=f"frames {start}:{stop}")
        # Value for value equal to the whole-file function, whatever the chunking.
        assert np.array_equal(got, log_mel_spectrogram(audio, padding=padding)[:, start:stop])
    # Reading out of order (chunks dropped from the cache and computed again) gives the same values.
    assert np.array_equal(mel.frames(n - 20, n), mel.frames(0, n)[:, n - 20:])
    assert mel.frames(n, n + 10).shape == (80, 0)
    assert np.array_equal(mel.frames(n - 3, n + 100), mel.frames(n - 3, n))


@pytest.mark.parametrize("n_samples", [1, 2, 150, 199, 200, 201, 399, 401, 1600])
def test_short_audio_reflects_like_numpy(n_samples):
    # Shorter than the 200-sample half window: numpy's reflect pad mirrors more than once.
    audio = _clip(n_samples / 16000.0, seed=n_samples)
    if n_samples < 160:
        # Not one whole hop: no frame (the whole-file code raised numpy's ValueError on the empty max).
        assert log_mel_spectrogram(audio).shape == (80, 0)
        return
    whole = whole_file_log_mel(audio)
    for chunk_frames in (1, 3, 3000):
        np.testing.assert_allclose(LogMel(audio, chunk_frames=chunk_frames).frames(0, whole.shape[1]), whole,
                                   rtol=0, atol=2e-6)


def test_mel_windows_are_windows_of_one_spectrogram():
    audio = _clip(61.3)
    whole = whole_file_log_mel(audio, padding=N_SAMPLES)
    windows = mel_windows(audio)
    assert len(windows) == 3
    for i, w in enumerate(windows):
        np.testing.assert_allclose(w, pad_or_trim(whole[:, i * N_FRAMES:(i + 1) * N_FRAMES]), rtol=0, atol=2e-6)


def test_bad_arguments_raise():
    audio = _clip(1.0)
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(WhisperError, match="padding"):
            LogMel(audio, padding=bad)
    for bad in (0, -3, 2.0, False):
        with pytest.raises(WhisperError, match="chunk_frames"):
            LogMel(audio, chunk_frames=bad)
    with pytest.raises(WhisperError, match="empty"):
        LogMel(np.zeros(0, np.float32))
    with pytest.raises(WhisperError, match="filters"):
        LogMel(audio, filters=np.zeros((80, 3), np.float32))


class RecordingCompute:
    """Records each window transcribe encodes; every window decodes to "<|0.00|> hello <|1.00|>
    <|1.00|> ..." cut at the window's end, so the next window starts 1 s (100 frames) later."""

    def __init__(self, hp: WhisperHParams):
        self.special = SpecialTokens.for_hparams(hp)
        self.n_vocab = hp.n_vocab
        self.windows: list[np.ndarray] = []
        self.step = 0

    def encode(self, mel):
        self.windows.append(np.array(mel))
        return len(self.windows)

    def decode_batch(self, features, tokens, offset):
        if offset == 0:
            self.step = 0
        tb = self.special.timestamp_begin
        script = [tb, 1000, tb + 50, tb + 50, 1000]
        token = script[self.step] if self.step < len(script) else self.special.eot
        self.step += 1
        logits = np.zeros((len(tokens), self.n_vocab), np.float32)
        logits[:, token] = 100.0
        return logits

    def decode(self, features, tokens, offset):
        return self.decode_batch(features, [tokens], offset)[0]

    def reorder(self, sequences):
        pass


def test_transcribe_encodes_windows_of_the_whole_file_spectrogram():
    hp = WhisperHParams(51864, 1500, 8, 2, 1, 448, 8, 2, 1, 80)
    special = SpecialTokens.for_hparams(hp)
    names = special.names(hp.n_vocab)
    vocab = [b" hello" if i == 1000 else b"t%d" % i for i in range(special.eot)]
    vocab += [names[i] for i in range(special.eot, hp.n_vocab)]
    model = WhisperModelData(hparams=hp, tensors={}, vocab=vocab, mel_filters=mel_filters(80), suppress_tokens=())
    audio = _clip(34.5, seed=4)
    compute = RecordingCompute(hp)
    result = transcribe(compute, model, audio, DecodingOptions(beam_size=None, temperature=0.0))
    whole = whole_file_log_mel(audio, padding=N_SAMPLES)
    seeks = sorted({s.seek for s in result.segments})
    assert len(seeks) >= 3 and any(s % N_FRAMES for s in seeks)  # windows that start inside a 30 s chunk
    assert len(compute.windows) == len(seeks)
    for seek, window in zip(seeks, compute.windows):
        np.testing.assert_allclose(window, pad_or_trim(whole[:, seek:seek + N_FRAMES]), rtol=0, atol=2e-6)
    assert result.timings["mel"] > 0


_PEAK = """
import resource, sys
import numpy as np
from metal_backend.whisper.mel import LogMel
minutes = {minutes}
audio = (0.01 * np.sin(np.arange(minutes * 60 * 16000, dtype=np.float32) * 0.05)).astype(np.float32)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
mel = LogMel(audio, padding=480000)
for seek in range(0, mel.n_frames - 3000, 3000):
    mel.frames(seek, seek + 3000)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) // 1024)
"""


def test_memory_does_not_grow_with_the_audio():
    # ru_maxrss (KiB on Linux) over the samples: about 40 MB whatever the length; the whole-file
    # spectrogram took about 50 MB per minute of audio (500 MB here).
    grown = int(run_isolated(_PEAK.format(minutes=10), timeout=300).split()[-1])
    assert grown < 200, f"the windowed log-mel of 10 minutes grew the peak by {grown} MB"


@pytest.mark.parametrize("keep_all", [True, False])
def test_chunks_are_computed_once_when_they_all_fit(monkeypatch, keep_all):
    # Windows that start inside chunks (as the transcription loop's seeks do) read each chunk two or
    # three times; under KEEP_ALL_BYTES the construction's peak pass keeps them, so each chunk's FFT
    # runs once. Past it (0 here) only the last three chunks stay.
    from metal_backend.whisper import mel as mel_module

    if not keep_all:
        monkeypatch.setattr(mel_module, "KEEP_ALL_BYTES", 0)
    audio = _clip(95.0, seed=5)
    whole = whole_file_log_mel(audio, padding=N_SAMPLES)
    ffts = []
    rfft = np.fft.rfft
    monkeypatch.setattr(np.fft, "rfft", lambda *a, **kw: ffts.append(1) or rfft(*a, **kw))
    mel = LogMel(audio, padding=N_SAMPLES)
    chunks = -(-mel.n_frames // N_FRAMES)
    for seek in range(0, mel.n_frames - N_FRAMES, 2200):
        np.testing.assert_allclose(mel.frames(seek, seek + N_FRAMES), whole[:, seek:seek + N_FRAMES], rtol=0, atol=2e-6)
        assert len(mel._chunks) == chunks if keep_all else len(mel._chunks) <= 3
    assert len(ffts) == chunks if keep_all else len(ffts) > chunks
