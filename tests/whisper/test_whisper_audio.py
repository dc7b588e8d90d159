"""Audio input: WAV reading, other formats (audio extra), channel mixing and resampling.

WAVs are written independently of the reader (stdlib wave, hand-made chunks); the resamplers are
checked against exact sines and against sox's output.
"""

from __future__ import annotations

import importlib.util
import struct
import sys
import wave

import numpy as np
import pytest

from metal_backend.whisper import WhisperError, load_audio, read_wav, resample
from metal_backend.whisper.audio import read_audio, resample_sinc
from whisper_testing import require


@pytest.fixture
def soundfile():
    require(importlib.util.find_spec("soundfile") is not None, 'soundfile (pip install "metal_backend[audio]")')
    import soundfile

    return soundfile


def _has_soxr() -> bool:
    return importlib.util.find_spec("soxr") is not None


@pytest.fixture(params=["sinc", "soxr"])
def resampler(request):
    """Each resampler: our own filter, and resample() with soxr (the audio extra)."""
    if request.param == "sinc":
        return resample_sinc
    require(_has_soxr(), 'soxr (pip install "metal_backend[audio]")')
    return resample


def write_pcm(path, samples: np.ndarray, rate: int, width: int) -> None:
    """Integer PCM with the stdlib wave module; samples float (frames, channels) in [-1, 1)."""
    samples = np.atleast_2d(samples.T).T
    scale = 2 ** (8 * width - 1)
    ints = np.clip(np.round(samples * scale), -scale, scale - 1).astype(np.int64)
    if width == 1:
        raw = (ints + 128).astype(np.uint8).tobytes()
    else:
        # Little-endian two's complement, `width` bytes per sample.
        u = ints.reshape(-1) & ((1 << (8 * width)) - 1)
        raw = b"".join(int(v).to_bytes(width, "little") for v in u)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(raw)


def riff(chunks: list[tuple[bytes, bytes]]) -> bytes:
    body = b"WAVE"
    for cid, data in chunks:
        body += cid + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")
    return b"RIFF" + struct.pack("<I", len(body)) + body


def fmt_chunk(tag: int, channels: int, rate: int, bits: int, extensible_tag: int | None = None) -> bytes:
    block = channels * bits // 8
    head = struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits)
    if extensible_tag is None:
        return head
    guid = struct.pack("<H", extensible_tag) + bytes.fromhex("000000001000800000aa00389b71")
    return head + struct.pack("<HHI", 22, bits, 0) + guid


def sine(freq: float, rate: int, seconds: float, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return amplitude * np.sin(2 * np.pi * freq * t)


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_pcm_widths_read_exactly(tmp_path, width):
    rng = np.random.default_rng(width)
    x = rng.uniform(-0.9, 0.9, 1000)
    path = tmp_path / f"pcm{width}.wav"
    write_pcm(path, x, 16000, width)
    samples, rate = read_wav(path)
    assert rate == 16000 and samples.shape == (1000, 1) and samples.dtype == np.float32
    step = 1.0 / 2 ** (8 * width - 1)
    np.testing.assert_allclose(samples[:, 0], x, atol=step)


def test_stereo_is_averaged(tmp_path):
    left, right = sine(440, 16000, 0.5), sine(1000, 16000, 0.5, 0.25)
    path = tmp_path / "stereo.wav"
    write_pcm(path, np.stack([left, right], axis=1), 16000, 2)
    samples, _ = read_wav(path)
    assert samples.shape == (8000, 2)
    np.testing.assert_allclose(load_audio(path), (left + right) / 2, atol=2 / 32768)


def test_many_channels(tmp_path):
    x = np.stack([sine(300 * (c + 1), 16000, 0.1, 0.1) for c in range(6)], axis=1)
    path = tmp_path / "six.wav"
    write_pcm(path, x, 16000, 2)
    np.testing.assert_allclose(load_audio(path), x.mean(axis=1), atol=2 / 32768)


@pytest.mark.parametrize("bits,dtype", [(32, "<f4"), (64, "<f8")])
@pytest.mark.parametrize("extensible", [False, True])
def test_float_wav(tmp_path, bits, dtype, extensible):
    x = np.stack([sine(440, 16000, 0.25), sine(880, 16000, 0.25)], axis=1)
    fmt = fmt_chunk(0xFFFE, 2, 16000, bits, 3) if extensible else fmt_chunk(3, 2, 16000, bits)
    path = tmp_path / "float.wav"
    path.write_bytes(riff([(b"fmt ", fmt), (b"LIST", b"INFOjunk!"), (b"data", x.astype(dtype).tobytes())]))
    samples, rate = read_wav(path)
    assert rate == 16000
    np.testing.assert_allclose(samples, x, atol=1e-7)


def test_extensible_24bit(tmp_path):
    x = sine(1000, 16000, 0.25, 0.8)
    ints = np.round(x * 2 ** 23).astype(np.int64) & 0xFFFFFF
    data = b"".join(int(v).to_bytes(3, "little") for v in ints)
    path = tmp_path / "ext24.wav"
    path.write_bytes(riff([(b"fmt ", fmt_chunk(0xFFFE, 1, 16000, 24, 1)), (b"data", data)]))
    np.testing.assert_allclose(load_audio(path), x, atol=2 ** -23)


@pytest.mark.parametrize("rate", [8000, 22050, 44100, 48000])
def test_resampled_sine_is_accurate(tmp_path, rate, resampler):
    path = tmp_path / f"sine{rate}.wav"
    write_pcm(path, sine(1000, rate, 1.0), rate, 3)
    samples, got_rate = read_wav(path)
    y = resampler(samples[:, 0], got_rate, 16000)
    assert len(y) == 16000 and y.dtype == np.float32
    expected = sine(1000, 16000, 1.0)
    # Away from the edges the band-limited result matches the exact sine (24-bit input).
    np.testing.assert_allclose(y[400:-400], expected[400:-400], atol=2e-5)


@pytest.mark.parametrize("rate_in,rate_out", [(44100, 16000), (48000, 16000), (16000, 8000)])
def test_resampler_rejects_frequencies_above_nyquist(rate_in, rate_out, resampler):
    # A tone at 1.2x the output Nyquist frequency would alias to 0.8x; it must be gone.
    x = sine(0.6 * rate_out, rate_in, 1.0, 1.0)
    y = resampler(x, rate_in, rate_out)
    assert np.abs(y[200:-200]).max() < 1e-3


def test_resample_length_and_identity(resampler):
    x = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal(resampler(x, 16000, 16000), x)
    assert len(resampler(x[:441], 44100, 16000)) == 160
    # 7 samples at 48 kHz are 2.33 at 16 kHz: ours rounds up, soxr to the nearest.
    assert len(resample_sinc(x[:7], 48000, 16000)) == 3


@pytest.mark.parametrize("rates,message", [((0, 16000), "must be positive"), ((16000, -1), "must be positive"),
                                           ((4_000_000_000, 16000), "above 1000000 Hz")])
def test_resample_rejects_bad_rates(resampler, rates, message):
    with pytest.raises(WhisperError, match=message):
        resampler(np.zeros(10, np.float32), *rates)


def test_resample_keeps_dc_level(resampler):
    y = resampler(np.full(44100, 0.25, np.float32), 44100, 16000)
    np.testing.assert_allclose(y[200:-200], 0.25, atol=1e-5)


def test_missing_file(tmp_path):
    with pytest.raises(WhisperError, match="nope.wav: audio file not found"):
        load_audio(tmp_path / "nope.wav")


def test_not_a_wav(tmp_path):
    path = tmp_path / "fake.wav"
    path.write_bytes(b"ID3\x03" + bytes(100))
    with pytest.raises(WhisperError, match="fake.wav: not a WAV file"):
        load_audio(path)


def test_truncated_data_chunk(tmp_path):
    path = tmp_path / "cut.wav"
    write_pcm(path, sine(440, 16000, 0.5), 16000, 2)
    path.write_bytes(path.read_bytes()[:-1000])
    with pytest.raises(WhisperError, match="cut.wav: truncated WAV file"):
        load_audio(path)


def test_truncated_header(tmp_path):
    path = tmp_path / "stub.wav"
    write_pcm(path, sine(440, 16000, 0.1), 16000, 2)
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(WhisperError, match="stub.wav: .*(truncated|no data chunk)"):
        load_audio(path)


def test_partial_frame_is_truncation(tmp_path):
    path = tmp_path / "odd.wav"
    path.write_bytes(riff([(b"fmt ", fmt_chunk(1, 2, 16000, 16)), (b"data", bytes(6))]))
    with pytest.raises(WhisperError, match="odd.wav: truncated WAV file .*4-byte frames"):
        load_audio(path)


def test_empty_audio(tmp_path):
    path = tmp_path / "empty.wav"
    write_pcm(path, np.zeros(0), 16000, 2)
    with pytest.raises(WhisperError, match="empty.wav: WAV file contains no audio samples"):
        load_audio(path)


@pytest.mark.parametrize("tag", [0x0002, 0x0006, 0x0055])
def test_unsupported_encoding(tmp_path, tag):
    path = tmp_path / "adpcm.wav"
    path.write_bytes(riff([(b"fmt ", fmt_chunk(tag, 1, 8000, 16)), (b"data", bytes(64))]))
    with pytest.raises(WhisperError, match=f"adpcm.wav: unsupported WAV encoding \\(format tag 0x{tag:04x}\\)"):
        load_audio(path)


def test_unsupported_float_width(tmp_path):
    path = tmp_path / "f16.wav"
    path.write_bytes(riff([(b"fmt ", fmt_chunk(3, 1, 8000, 16)), (b"data", bytes(64))]))
    with pytest.raises(WhisperError, match="f16.wav: unsupported float sample size of 16 bits"):
        load_audio(path)


def test_directory_is_not_audio(tmp_path):
    with pytest.raises(WhisperError, match="is a directory"):
        load_audio(tmp_path)


def snr_db(reference: np.ndarray, x: np.ndarray) -> float:
    n = min(len(reference), len(x))
    return float(10 * np.log10(np.sum(reference[:n] ** 2) / np.sum((reference[:n] - x[:n]) ** 2)))


@pytest.mark.parametrize("clip", ["door_light", "good_morning"])
def test_real_speech_at_22k_resamples_like_sox(asset, resampler, clip):
    # espeak writes 22050 Hz; `sox in.wav -r 16000 -b 16` made the 16 kHz file from it (with dither).
    # Measured: soxr 75 dB (the dither's level), our filter 58 dB; the old 91%-cutoff filter gave 40.
    samples, rate = read_wav(asset(f"{clip}_22k.wav"))
    ours = resampler(samples[:, 0], rate, 16000)
    sox = load_audio(asset(f"{clip}.wav"))
    assert abs(len(ours) - len(sox)) <= 1
    assert snr_db(sox, ours) > (70 if resampler is resample else 55)


def test_resample_without_soxr_uses_own_filter(monkeypatch):
    monkeypatch.setitem(sys.modules, "soxr", None)
    x = sine(1000, 22050, 0.5).astype(np.float32)
    np.testing.assert_array_equal(resample(x, 22050, 16000), resample_sinc(x, 22050, 16000))


@pytest.mark.parametrize("fmt_bits,block_align,message", [
    (0, 2, "declares 0 bits per sample"),
    (0, 0, "declares 0 bits per sample"),
    (24, 2, "declares 24 bits per sample in 16-bit sample frames"),
    (12, 0, "unsupported sample size of 12 bits"),
])
def test_impossible_bits_per_sample(tmp_path, fmt_bits, block_align, message):
    fmt = struct.pack("<HHIIHH", 1, 1, 16000, 32000, block_align, fmt_bits)
    path = tmp_path / "bits.wav"
    path.write_bytes(riff([(b"fmt ", fmt), (b"data", bytes(64))]))
    with pytest.raises(WhisperError, match=f"bits.wav: .*{message}"):
        load_audio(path)


def test_zero_channels_and_rate(tmp_path):
    path = tmp_path / "zero.wav"
    path.write_bytes(riff([(b"fmt ", struct.pack("<HHIIHH", 1, 0, 16000, 0, 0, 16)), (b"data", bytes(8))]))
    with pytest.raises(WhisperError, match="declares 0 channels"):
        load_audio(path)
    path.write_bytes(riff([(b"fmt ", struct.pack("<HHIIHH", 1, 1, 0, 0, 2, 16)), (b"data", bytes(8))]))
    with pytest.raises(WhisperError, match="sample rate of 0 Hz"):
        load_audio(path)
    path.write_bytes(riff([(b"fmt ", struct.pack("<HHIIHH", 1, 1, 4_000_000_000, 0, 2, 16)), (b"data", bytes(8))]))
    with pytest.raises(WhisperError, match="sample rate of 4000000000 Hz, above the 1000000 Hz"):
        load_audio(path)


# ---------------------------------------------------------------- other formats (the audio extra)


@pytest.mark.parametrize("fmt,subtype,min_snr", [("FLAC", "PCM_16", None), ("OGG", "VORBIS", 15.0),
                                                  ("MP3", "MPEG_LAYER_III", 15.0), ("AIFF", "PCM_24", None)])
def test_compressed_formats(tmp_path, soundfile, fmt, subtype, min_snr):
    rate = 44100
    # Chirps, not steady tones, so the cross-correlation below has one clear peak.
    t = np.arange(rate) / rate
    x = np.stack([0.4 * np.sin(2 * np.pi * (200 * t + 1500 * t ** 2)),
                  0.3 * np.sin(2 * np.pi * (300 * t + 1000 * t ** 2))], axis=1)
    path = tmp_path / f"tone.{fmt.lower()}"
    soundfile.write(str(path), x, rate, format=fmt, subtype=subtype)
    samples, got_rate = read_audio(path)
    assert got_rate == rate and samples.shape[1] == 2 and samples.dtype == np.float32
    y = load_audio(path)
    expected = resample_sinc(x.mean(axis=1), rate, 16000)
    assert abs(len(y) - len(expected)) <= 1152 * 16000 // rate + 1  # MP3 pads whole frames
    if min_snr is None:
        # Lossless: the same samples up to the 16/24-bit quantisation.
        np.testing.assert_allclose(samples, x, atol=2 ** -15)
        assert snr_db(expected[300:-300], y[300:-300]) > 60
    else:
        # Lossy codecs may delay the signal; align by cross-correlation before comparing.
        n = min(len(y), len(expected))
        lag = int(np.argmax(np.correlate(y[:n], expected[:4000], mode="valid")))
        assert lag < 2000
        assert snr_db(expected[1000:n - 3000], y[lag + 1000:lag + n - 3000]) > min_snr


def test_undecodable_file(tmp_path, soundfile):
    path = tmp_path / "junk.flac"
    path.write_bytes(b"fLaC" + bytes(50))
    with pytest.raises(WhisperError, match="junk.flac: not a WAV file, and libsndfile cannot decode it"):
        load_audio(path)


def test_other_formats_without_the_extra_name_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "soundfile", None)
    path = tmp_path / "speech.flac"
    path.write_bytes(b"fLaC" + bytes(50))
    with pytest.raises(WhisperError, match=r'speech.flac: not a WAV file; .*pip install "metal_backend\[audio\]"'):
        load_audio(path)
    # WAV needs no extra.
    wav = tmp_path / "plain.wav"
    write_pcm(wav, sine(440, 16000, 0.1), 16000, 2)
    assert load_audio(wav).shape == (1600,)


@pytest.mark.parametrize("audio,message", [
    (np.zeros(100, np.int16), "must be floating point in \\[-1, 1\\] \\(got dtype int16\\); scale integer PCM first"),
    (np.zeros(100, bool), "got dtype bool"),
    (np.zeros((100, 2), np.float32), "1-D array"),
    (np.zeros(0, np.float64), "audio is empty"),
    (np.array([0.0, 0.5, np.nan, np.inf], np.float64),
     "2 non-finite samples \\(NaN or infinity\\), the first at index 2"),
])
def test_log_mel_checks_samples(audio, message):
    from metal_backend.whisper import log_mel_spectrogram

    with pytest.raises(WhisperError, match=message):
        log_mel_spectrogram(audio)
