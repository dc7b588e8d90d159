"""WAV reading, channel mixing and resampling, on WAVs written independently of the reader."""

from __future__ import annotations

import struct
import wave

import numpy as np
import pytest

from metal_backend.whisper import WhisperError, load_audio, read_wav, resample


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
def test_resampled_sine_is_accurate(tmp_path, rate):
    path = tmp_path / f"sine{rate}.wav"
    write_pcm(path, sine(1000, rate, 1.0), rate, 3)
    y = load_audio(path)
    assert len(y) == 16000 and y.dtype == np.float32
    expected = sine(1000, 16000, 1.0)
    # Away from the edges the band-limited result matches the exact sine (24-bit input).
    np.testing.assert_allclose(y[400:-400], expected[400:-400], atol=2e-5)


@pytest.mark.parametrize("rate_in,rate_out", [(44100, 16000), (48000, 16000), (16000, 8000)])
def test_resampler_rejects_frequencies_above_nyquist(rate_in, rate_out):
    # A tone at 1.2x the output Nyquist frequency would alias to 0.8x; it must be gone.
    x = sine(0.6 * rate_out, rate_in, 1.0, 1.0)
    y = resample(x, rate_in, rate_out)
    assert np.abs(y[200:-200]).max() < 1e-3


def test_resample_length_and_identity():
    x = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal(resample(x, 16000, 16000), x)
    assert len(resample(x[:441], 44100, 16000)) == 160
    assert len(resample(x[:7], 48000, 16000)) == 3


def test_resample_keeps_dc_level():
    y = resample(np.full(44100, 0.25, np.float32), 44100, 16000)
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


def test_real_speech_at_22k_resamples_like_sox(asset):
    # espeak writes 22050 Hz; sox made the 16 kHz file from it. Both must agree closely.
    ours = load_audio(asset("door_light_22k.wav"))
    sox = load_audio(asset("door_light.wav"))
    n = min(len(ours), len(sox))
    assert abs(len(ours) - len(sox)) <= 1
    err = ours[:n] - sox[:n]
    assert np.sqrt(np.mean(err ** 2)) < 0.02 * np.sqrt(np.mean(sox[:n] ** 2))
