"""The command's stdout when it cannot take the transcript: closed (exit status 1 with an error,
never a lost transcript with status 0), failing (a closed pipe), or unable to encode it (ASCII
escapes, valid JSON with the same values, no traceback); and bytes paths."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from metal_backend.io import InputError
from metal_backend.whisper import load_audio
from metal_backend.whisper.__main__ import _emit, _emit_json


def _ascii_stdout():
    raw = io.BytesIO()
    return raw, io.TextIOWrapper(raw, encoding="ascii", errors="strict")


def test_closed_stdout_is_an_error(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", None)
    assert _emit("hello") is False
    assert "stdout is closed" in capsys.readouterr().err


def test_failing_stdout_is_an_error(monkeypatch, capsys):
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stdout", closed)
    assert _emit("hello") is False
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as pipe:  # the reader is gone: EPIPE
        monkeypatch.setattr(sys, "stdout", pipe)
        assert _emit("hello " * 10000) is False
        monkeypatch.undo()
        try:
            pipe.close()
        except BrokenPipeError:
            pass
    assert capsys.readouterr().err.count("cannot write the transcript") == 2


def test_stdout_that_cannot_encode(monkeypatch):
    raw, out = _ascii_stdout()
    monkeypatch.setattr(sys, "stdout", out)
    document = {"audio": "caf\u00e9/\u65e5\u672c.wav", "text": "na\u00efve"}
    assert _emit_json(document)
    assert _emit("na\u00efve \u65e5")
    text = raw.getvalue().decode("ascii")
    first, second = text[: text.rindex("}") + 1], text[text.rindex("}") + 1:]
    assert json.loads(first) == document
    assert second == "\nna\\xefve \\u65e5\n"  # the JSON line ends, then the text line


def test_utf8_stdout_gets_the_text_itself(monkeypatch):
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8"))
    assert _emit_json({"text": "\u65e5"})
    assert json.loads(raw.getvalue().decode("utf-8")) == {"text": "\u65e5"}
    assert "\u65e5" in raw.getvalue().decode("utf-8")


def test_bytes_and_bad_audio_paths(tmp_path):
    import wave

    path = tmp_path / "tone.wav"
    samples = (np.sin(np.arange(8000) * 0.1) * 10000).astype(np.int16)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(samples.tobytes())
    assert np.array_equal(load_audio(os.fsencode(path)), load_audio(path))
    with pytest.raises(InputError, match="int"):
        load_audio(123)


def test_cli_with_closed_stdout_and_ascii_stdout(tiny_en_dir, asset, tmp_path):
    named = tmp_path / "caf\u00e9.wav"
    shutil.copy(asset("jfk.wav"), named)
    cmd = [sys.executable, "-m", "metal_backend.whisper", str(named), "--model", str(tiny_en_dir),
           "--device", "CPU", "--threads", "2"]
    # File descriptor 1 closed: Python's sys.stdout is None.
    closed = subprocess.run(cmd, stdout=None, stderr=subprocess.PIPE, text=True, timeout=300,
                            preexec_fn=lambda: os.close(1))
    assert closed.returncode == 1 and "stdout is closed" in closed.stderr
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    proc = subprocess.run(cmd + ["--json"], capture_output=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    document = json.loads(proc.stdout.decode("ascii"))
    assert document["audio"] == str(named) and "ask not" in document["text"]
