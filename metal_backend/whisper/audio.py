"""WAV reading, channel mixing and resampling to Whisper's 16 kHz input.

Only RIFF/WAVE is read, with no external decoder: integer PCM of 8, 16, 24 or
32 bits, IEEE float of 32 or 64 bits, plain or WAVE_FORMAT_EXTENSIBLE, any
channel count. Channels are averaged to mono.

Resampling quality: a polyphase windowed-sinc filter (Kaiser window, beta
8.6, 32 zero crossings on each side at the lower of the two rates, cutoff at
91% of the lower Nyquist frequency). Measured response: flat within 0.005 dB
up to 83% of that Nyquist frequency (6.6 kHz for 16 kHz output), -6 dB at
91%, at least 65 dB down from 99% and at least 86 dB down from the Nyquist
frequency upward, so what aliases lands above 7.9 kHz and 65 dB down. A
1 kHz sine comes out within 1e-5 of the exact one.
"""

from __future__ import annotations

import math
import os
import struct
from pathlib import Path

import numpy as np

from .errors import WhisperError

SAMPLE_RATE = 16000

_WAVE_FORMAT_PCM = 0x0001
_WAVE_FORMAT_IEEE_FLOAT = 0x0003
_WAVE_FORMAT_EXTENSIBLE = 0xFFFE
# Every KSDATAFORMAT_SUBTYPE_* GUID ends with these 14 bytes; the first two
# bytes carry the classic format tag.
_EXTENSIBLE_GUID_TAIL = bytes.fromhex("000000001000800000aa00389b71")
# Streaming writers that cannot seek back leave the data size at its maximum.
_UNKNOWN_CHUNK_SIZE = 0xFFFFFFFF

_ZERO_CROSSINGS = 32
_KAISER_BETA = 8.6
_CUTOFF = 0.91


def read_wav(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """Reads a WAV file.

    Returns (samples, sample_rate) where samples is float32 of shape
    (frames, channels) scaled to [-1, 1) for integer formats.
    Raises WhisperError naming the file when it is missing, is not a WAV,
    is truncated, or uses an unsupported encoding.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise WhisperError(f"{path}: audio file not found") from None
    except IsADirectoryError:
        raise WhisperError(f"{path}: is a directory, expected a WAV file") from None
    except OSError as exc:
        raise WhisperError(f"{path}: cannot read audio file ({exc.strerror})") from None
    return _parse_wav(raw, str(path))


def _parse_wav(raw: bytes, name: str) -> tuple[np.ndarray, int]:
    if len(raw) < 12 or raw[0:4] != b"RIFF" or raw[8:12] != b"WAVE":
        if raw[0:4] in (b"RIFX", b"RF64"):
            raise WhisperError(f"{name}: {raw[0:4].decode()} WAV files are not supported (only little-endian RIFF)")
        raise WhisperError(f"{name}: not a WAV file (no RIFF/WAVE header)")

    fmt = None
    data = None
    pos = 12
    while pos + 8 <= len(raw):
        chunk_id = raw[pos:pos + 4]
        (size,) = struct.unpack_from("<I", raw, pos + 4)
        body_start = pos + 8
        if chunk_id == b"data":
            available = len(raw) - body_start
            if size == _UNKNOWN_CHUNK_SIZE:
                size = available
            elif size > available:
                raise WhisperError(
                    f"{name}: truncated WAV file (data chunk declares {size} bytes, {available} present)")
            data = raw[body_start:body_start + size]
            if fmt is not None:
                break
        elif chunk_id == b"fmt ":
            if body_start + size > len(raw):
                raise WhisperError(f"{name}: truncated WAV file (fmt chunk cut short)")
            fmt = raw[body_start:body_start + size]
            if data is not None:
                break
        # Chunks are padded to an even size.
        pos = body_start + size + (size & 1)

    if fmt is None:
        raise WhisperError(f"{name}: WAV file has no fmt chunk (truncated or corrupt)")
    if data is None:
        raise WhisperError(f"{name}: WAV file has no data chunk (truncated or corrupt)")

    tag, channels, rate, container_bytes = _parse_fmt(fmt, name)
    frame_bytes = container_bytes * channels
    if len(data) % frame_bytes:
        raise WhisperError(
            f"{name}: truncated WAV file ({len(data)} data bytes is not a whole number of "
            f"{frame_bytes}-byte frames)")
    samples = _decode_samples(data, tag, container_bytes, name)
    return samples.reshape(-1, channels), rate


def _parse_fmt(fmt: bytes, name: str) -> tuple[int, int, int, int]:
    if len(fmt) < 16:
        raise WhisperError(f"{name}: fmt chunk is {len(fmt)} bytes, expected at least 16")
    tag, channels, rate, _byte_rate, block_align, bits = struct.unpack_from("<HHIIHH", fmt, 0)
    if tag == _WAVE_FORMAT_EXTENSIBLE:
        if len(fmt) < 40:
            raise WhisperError(f"{name}: WAVE_FORMAT_EXTENSIBLE fmt chunk is {len(fmt)} bytes, expected 40")
        guid = fmt[24:40]
        if guid[2:] != _EXTENSIBLE_GUID_TAIL:
            raise WhisperError(f"{name}: unsupported WAVE_FORMAT_EXTENSIBLE sub-format {guid.hex()}")
        (tag,) = struct.unpack_from("<H", guid, 0)
    if tag not in (_WAVE_FORMAT_PCM, _WAVE_FORMAT_IEEE_FLOAT):
        raise WhisperError(
            f"{name}: unsupported WAV encoding (format tag 0x{tag:04x}); "
            "only integer PCM and IEEE float are read")
    if channels == 0:
        raise WhisperError(f"{name}: WAV file declares 0 channels")
    if rate == 0:
        raise WhisperError(f"{name}: WAV file declares a sample rate of 0 Hz")
    if block_align:
        # The container size is what block_align says: extensible files may
        # store e.g. 20 valid bits in 24-bit containers.
        if block_align % channels:
            raise WhisperError(f"{name}: block align {block_align} does not fit {channels} channels")
        container_bytes = block_align // channels
    elif bits and bits % 8 == 0:
        container_bytes = bits // 8
    else:
        raise WhisperError(f"{name}: unsupported sample size of {bits} bits")
    supported = {_WAVE_FORMAT_PCM: (1, 2, 3, 4), _WAVE_FORMAT_IEEE_FLOAT: (4, 8)}[tag]
    if container_bytes not in supported:
        kind = "integer PCM" if tag == _WAVE_FORMAT_PCM else "float"
        raise WhisperError(
            f"{name}: unsupported {kind} sample size of {container_bytes * 8} bits")
    return tag, channels, rate, container_bytes


def _decode_samples(data: bytes, tag: int, width: int, name: str) -> np.ndarray:
    if tag == _WAVE_FORMAT_IEEE_FLOAT:
        values = np.frombuffer(data, dtype="<f4" if width == 4 else "<f8")
        if not np.all(np.isfinite(values)):
            raise WhisperError(f"{name}: float WAV data contains NaN or infinity")
        return values.astype(np.float32)
    if width == 1:
        # 8-bit WAV is the one unsigned PCM width.
        return (np.frombuffer(data, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    if width == 2:
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    if width == 3:
        b = np.frombuffer(data, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        # Put the 24 bits in the top of an int32 so the sign comes for free.
        values = (b[:, 0] << 8) | (b[:, 1] << 16) | (b[:, 2] << 24)
        return (values >> 8).astype(np.float32) / 8388608.0
    return (np.frombuffer(data, dtype="<i4").astype(np.float64) / 2147483648.0).astype(np.float32)


def to_mono(samples: np.ndarray) -> np.ndarray:
    """Averages the channels of a (frames, channels) array into float32 (frames,)."""
    if samples.ndim == 1:
        return samples.astype(np.float32, copy=False)
    if samples.shape[1] == 1:
        return samples[:, 0].astype(np.float32, copy=False)
    return samples.mean(axis=1, dtype=np.float64).astype(np.float32)


def resample(x: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """Resamples a 1-D signal from rate_in to rate_out Hz (see module docstring for quality).

    Output length is ceil(len(x) * rate_out / rate_in); float32 result.
    """
    if rate_in <= 0 or rate_out <= 0:
        raise WhisperError(f"sample rates must be positive (got {rate_in} -> {rate_out})")
    x = np.asarray(x, dtype=np.float32)
    if rate_in == rate_out or x.size == 0:
        return x.copy()
    g = math.gcd(rate_in, rate_out)
    up, down = rate_out // g, rate_in // g
    taps = _resampling_filter(up, down)
    half = (len(taps) - 1) // 2
    n_out = -(-len(x) * up // down)

    # The filter spans at most taps_per_phase input samples on each side; pad
    # so every window stays in bounds.
    taps_per_phase = -(-len(taps) // up)
    pad = taps_per_phase + 1
    xp = np.concatenate([np.zeros(pad, np.float32), x, np.zeros(pad + taps_per_phase, np.float32)])
    # Phase-major filter bank, reversed so it lines up with ascending windows:
    # output k with s = k*down + half uses taps[s%up + j*up] * x[s//up - j].
    bank = np.zeros((up, taps_per_phase), dtype=np.float32)
    for p in range(up):
        sub = taps[p::up]
        bank[p, :len(sub)] = sub
    bank = bank[:, ::-1]

    windows = np.lib.stride_tricks.sliding_window_view(xp, taps_per_phase)
    y = np.empty(n_out, dtype=np.float32)
    # Outputs k and k+up share a phase (gcd(up, down) = 1) and read windows
    # `down` samples apart: one strided matrix-vector product per residue of k.
    for k0 in range(min(up, n_out)):
        s0 = k0 * down + half
        phase, base0 = s0 % up, s0 // up
        count = (n_out - k0 + up - 1) // up
        start = base0 + pad - (taps_per_phase - 1)
        y[k0::up] = windows[start:start + down * count:down] @ bank[phase]
    return y


def _resampling_filter(up: int, down: int) -> np.ndarray:
    """Kaiser-windowed sinc low-pass at the upsampled rate, scaled by `up` for unity gain."""
    widest = max(up, down)
    half = _ZERO_CROSSINGS * widest
    n = np.arange(-half, half + 1, dtype=np.float64)
    cutoff = _CUTOFF / widest
    h = cutoff * np.sinc(cutoff * n) * np.kaiser(2 * half + 1, _KAISER_BETA)
    h *= up / h.sum()
    return h.astype(np.float32)


def load_audio(path: str | os.PathLike, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Reads a WAV file as mono float32 at `sample_rate` (16 kHz by default).

    Raises WhisperError when the file is missing, not a supported WAV, or holds no audio.
    """
    samples, rate = read_wav(path)
    if samples.shape[0] == 0:
        raise WhisperError(f"{path}: WAV file contains no audio samples")
    return resample(to_mono(samples), rate, sample_rate)
