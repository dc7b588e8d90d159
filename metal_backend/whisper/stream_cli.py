"""The command line's live mode: `python -m metal_backend.whisper --stream SOURCE`.

SOURCE is "-" (raw signed 16-bit little-endian 16 kHz mono PCM on stdin, as `arecord -f S16_LE -r
16000 -c 1` or `sox in.mp3 -t raw -r 16000 -c 1 -e signed -b 16 -` write it), an audio file (as
fast as it transcribes, or at real-time pace with --realtime), or "mic" (the default input device
through sounddevice: the `mic` extra). Audio is read on its own thread into a queue, so reading
never waits for a transcription: each push takes everything that arrived meanwhile.

Each committed segment is printed on its own line as `[mm:ss.mmm --> mm:ss.mmm] text`. When stdout
is a terminal the tentative text is shown dimmed on the line below, rewritten in place; otherwise
only committed lines are written. At the end (end of input, or Ctrl-C) the rest is committed and
--output_format / --json write the whole transcript as in file mode.
"""

from __future__ import annotations

import os
import queue
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

import numpy as np

from .audio import SAMPLE_RATE, load_audio
from .errors import WhisperError
from .transcript import Segment

READ_SECONDS = 0.1
FILE_CHUNK_SECONDS = 0.5


def timestamp(seconds: float) -> str:
    """mm:ss.mmm (hh:mm:ss.mmm past an hour)."""
    ms = int(round(seconds * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}" if h else f"{m:02d}:{s:02d}.{ms:03d}"


def segment_line(seg: Segment) -> str:
    """The printed line of a committed segment."""
    return f"[{timestamp(seg.start)} --> {timestamp(seg.end)}] {seg.text.strip()}"


class LiveDisplay:
    """Committed lines and, on a terminal, the tentative text on a last line rewritten in place."""

    def __init__(self, out: TextIO, tty: bool | None = None):
        self.out = out
        self.tty = out.isatty() if tty is None else tty
        self._tentative = ""
        self._lock = threading.Lock()

    def commit(self, segments: list[Segment]) -> None:
        with self._lock:
            if self.tty:
                self.out.write("\r\x1b[K")
            for seg in segments:
                self.out.write(segment_line(seg) + "\n")
            if self.tty and self._tentative:
                self._draw()
            self.out.flush()

    def tentative(self, text: str) -> None:
        if not self.tty:
            return
        with self._lock:
            self._tentative = text
            self.out.write("\r\x1b[K")
            self._draw()
            self.out.flush()

    def close(self) -> None:
        with self._lock:
            if self.tty and self._tentative:
                self.out.write("\r\x1b[K")
                self.out.flush()
            self._tentative = ""

    def _draw(self) -> None:
        width = shutil.get_terminal_size((80, 24)).columns - 1
        text = self._tentative
        if len(text) > width:
            text = "…" + text[-(width - 1):]
        if text:
            self.out.write("\x1b[2m" + text + "\x1b[0m")


Sink = Callable[["np.ndarray | None"], None]


def read_pcm(stream, put: Sink, stop: threading.Event) -> None:
    """Reads s16le mono PCM from a binary stream until EOF; puts float32 chunks, then None."""
    leftover = b""
    block = int(READ_SECONDS * SAMPLE_RATE) * 2
    try:
        while not stop.is_set():
            data = stream.read1(block) if hasattr(stream, "read1") else stream.read(block)
            if not data:
                break
            data = leftover + data
            cut = len(data) - len(data) % 2
            leftover = data[cut:]
            if cut:
                put(np.frombuffer(data[:cut], dtype="<i2").astype(np.float32) / 32768.0)
    finally:
        put(None)


def read_file(path: str, put: Sink, stop: threading.Event, realtime: bool) -> None:
    """Puts a file's samples in 0.5 s chunks (at real-time pace when asked), then None."""
    try:
        samples = load_audio(path)
        step = int(FILE_CHUNK_SECONDS * SAMPLE_RATE)
        start = time.monotonic()
        for i in range(0, samples.size, step):
            if stop.is_set():
                break
            if realtime:
                delay = start + (i + step) / SAMPLE_RATE - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            put(samples[i:i + step])
    finally:
        put(None)


def read_mic(put: Sink, stop: threading.Event) -> None:
    """Records the default input device (sounddevice) until stop is set, then puts None."""
    try:
        import sounddevice
    except ImportError:
        put(None)
        raise WhisperError('--stream mic needs the mic extra: pip install "metal_backend[mic]" (sounddevice)') \
            from None
    try:
        with sounddevice.InputStream(samplerate=SAMPLE_RATE, channels=1, dtype="float32",
                                     blocksize=int(READ_SECONDS * SAMPLE_RATE),
                                     callback=lambda data, frames, t, status: put(data[:, 0].copy())):
            while not stop.wait(0.1):
                pass
    finally:
        put(None)


def check_mic() -> None:
    """WhisperError naming the extra when sounddevice is missing."""
    try:
        import sounddevice  # noqa: F401
    except ImportError:
        raise WhisperError('--stream mic needs the mic extra: pip install "metal_backend[mic]" (sounddevice)') \
            from None
    except OSError as exc:  # sounddevice is there but PortAudio is not
        raise WhisperError(f"--stream mic: sounddevice cannot load PortAudio ({exc})") from None


def source_stem(source: str) -> str:
    """The output file stem of a stream source."""
    return "stream" if source in ("-", "mic") else Path(source).stem


def run(model, source: str, options, realtime: bool, out: TextIO | None = None, stdin=None,
        vad_parameters: dict | None = None, forced_prefix: bool = False, agreement: int = 2,
        final_beam_size: int | None | str = "default", confirm_beam_size: int | None | str = "default"):
    """Streams SOURCE through model.stream(options, vad_parameters=, forced_prefix=, agreement=,
    final_beam_size=, confirm_beam_size=); prints as it goes; returns the Stream."""
    out = sys.stdout if out is None else out
    if source == "mic":
        check_mic()
    elif source != "-" and not os.path.exists(source):
        raise WhisperError(f"--stream: no such file {source!r} (use - for stdin, mic for the microphone)")
    display = LiveDisplay(out)
    stream = model.stream(options, on_commit=display.commit, on_tentative=display.tentative,
                          vad_parameters=vad_parameters, forced_prefix=forced_prefix, agreement=agreement,
                          final_beam_size=final_beam_size, confirm_beam_size=confirm_beam_size)
    chunks: queue.Queue = queue.Queue()
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            if source == "-":
                read_pcm(stdin if stdin is not None else sys.stdin.buffer, chunks.put, stop)
            elif source == "mic":
                read_mic(chunks.put, stop)
            else:
                read_file(source, chunks.put, stop, realtime)
        except BaseException as exc:  # reported on the main thread
            errors.append(exc)
            chunks.put(None)

    thread = threading.Thread(target=reader, name="stream-reader", daemon=True)
    thread.start()
    try:
        done = False
        while not done:
            got = [chunks.get()]
            while True:
                try:
                    got.append(chunks.get_nowait())
                except queue.Empty:
                    break
            done = any(c is None for c in got)
            data = [c for c in got if c is not None]
            if data:
                stream.push(np.concatenate(data))
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        stream.finish()
        display.close()
    if errors:
        raise errors[0]
    return stream
