"""python -m metal_backend.whisper with --vad_filter, --vad_parameters, --batch_size, --workers and
folders, run as a user runs it (a subprocess)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from whisper_testing import DOOR_TEXT, JFK_TEXT, MORNING_TEXT, normalize

FAST = ("--device", "CPU", "--beam_size", "None", "--quiet")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metal_backend.whisper", *args], capture_output=True, text=True,
                          timeout=900)


def test_folder_with_two_workers_and_the_vad(tiny_en_dir, asset, tmp_path):
    folder = tmp_path / "audio"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(asset("jfk.wav"), folder / "a_jfk.wav")
    shutil.copy(asset("door_light.wav"), folder / "b_door.wav")
    shutil.copy(asset("good_morning.wav"), folder / "sub" / "c_morning.wav")
    (folder / "notes.txt").write_text("not audio")
    proc = run_cli(str(folder), "--model", str(tiny_en_dir), *FAST, "--threads", "1", "--workers", "2",
                   "--vad_filter", "True", "--vad_parameters", "min_silence_duration_ms=500", "speech_pad_ms=200",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    assert [d["audio"] for d in docs] == [str(folder / "a_jfk.wav"), str(folder / "b_door.wav"),
                                          str(folder / "sub" / "c_morning.wav")]
    assert [normalize(d["text"]) for d in docs] == [normalize(t) for t in (JFK_TEXT, DOOR_TEXT, MORNING_TEXT)]
    assert all(d["device"] == "CPU" and d["timings"]["vad"] > 0 for d in docs)


def test_batch_size_and_bad_file_among_workers(tiny_en_dir, asset, tmp_path):
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF0000WAVEjunk")
    proc = run_cli(str(asset("jfk.wav")), str(bad), "--model", str(tiny_en_dir), *FAST, "--threads", "1",
                   "--workers", "2", "--batch_size", "2")
    assert proc.returncode == 1
    assert normalize(proc.stdout) == normalize(JFK_TEXT)
    assert f"error: {bad}" in proc.stderr


def test_bad_vad_flags(tiny_en_dir, asset):
    jfk = str(asset("jfk.wav"))
    proc = run_cli(jfk, "--model", str(tiny_en_dir), *FAST, "--vad_filter", "--vad_parameters", "threshhold=0.5")
    assert proc.returncode == 1 and "unknown vad_parameters 'threshhold'" in proc.stderr
    proc = run_cli(jfk, "--model", str(tiny_en_dir), *FAST, "--vad_filter", "--vad_parameters", "threshold=2")
    assert proc.returncode == 1 and "threshold must be a probability between 0 and 1 (got 2)" in proc.stderr
    proc = run_cli(jfk, "--model", str(tiny_en_dir), *FAST, "--vad_parameters", "threshold=0.4")
    assert proc.returncode == 1 and "the VAD is off" in proc.stderr
    for flags, message in ((("--vad_parameters", "threshold"), "expected KEY=VALUE"),
                           (("--vad_parameters", "threshold=high"), "threshold: expected a number"),
                           (("--workers", "0"), "--workers must be a positive integer"),
                           (("--workers", "2", "--profile"), "--profile needs --workers 1")):
        proc = run_cli(jfk, "--model", str(tiny_en_dir), *flags)
        assert proc.returncode == 2 and message in proc.stderr, (flags, proc.stderr)
    proc = run_cli(jfk, "--model", str(tiny_en_dir), *FAST, "--workers", "2", "--batch_size", "0")
    assert proc.returncode == 1 and "batch_size must be a positive integer" in proc.stderr
