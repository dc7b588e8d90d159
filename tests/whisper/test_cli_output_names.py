"""Output files of the CLI and what goes inside them (issue 24, items 9 and 10).

Item 10: two inputs with the same stem (a/same.wav, b/same.wav) wrote the same output file; the
first transcript was lost with exit status 0. Now the later input is refused before it is
transcribed (error naming both, exit status 1) and the first keeps its files. The class: every way
two inputs reach one output name (same stem in two folders, a stem differing only in case, the same
file twice), in one run.

Item 9: "-->" inside a cue was escaped by one replace, so "--->" became "-->". The class: any run of
dashes and '>' never leaves "-->" in a cue.
"""
from __future__ import annotations

import itertools
import random
import shutil
import subprocess
import sys

from metal_backend.whisper import Segment, Transcript
from metal_backend.whisper.writers import render
from whisper_testing import parse_cues

FAST = ("--device", "CPU", "--threads", "2", "--beam_size", "None", "--quiet")


def test_inputs_that_would_write_one_output_name_are_refused(tiny_en_dir, asset, tmp_path):
    src = asset("good_morning.wav")
    inputs = {}
    for name in ("a/same.wav", "b/same.wav", "c/SAME.wav", "d/other.wav"):
        path = tmp_path / name
        path.parent.mkdir()
        shutil.copy(src, path)
        inputs[name] = str(path)
    out = tmp_path / "out"
    args = [inputs["a/same.wav"], inputs["b/same.wav"], inputs["c/SAME.wav"], inputs["a/same.wav"],
            inputs["d/other.wav"]]
    proc = subprocess.run([sys.executable, "-m", "metal_backend.whisper", *args, "--model", str(tiny_en_dir), *FAST,
                           "-f", "txt", "-o", str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 3, proc.stderr
    for err, later in zip(errors, [inputs["b/same.wav"], inputs["c/SAME.wav"], inputs["a/same.wav"]]):
        assert err.startswith(f"error: {later}:") and f"those of {inputs['a/same.wav']}" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["other.txt", "same.txt"]
    assert "morning" in (out / "same.txt").read_text().lower()


def test_no_arrow_survives_in_a_cue():
    rng = random.Random(9)
    texts = ["--->", "---->", "----->>", "a --> b ---> c", "<!-- -->", "-->-->", "- - >"]
    texts += ["".join(p) for n in range(3, 7) for p in itertools.product("->", repeat=n)]
    texts += ["".join(rng.choice("-> a\n") for _ in range(rng.randrange(1, 30))) for _ in range(300)]
    for text in texts:
        if not text.strip():
            continue
        seg = Segment(id=0, seek=0, start=0.0, end=1.0, text=text, tokens=[], temperature=0.0, avg_logprob=0.0,
                      compression_ratio=1.0, no_speech_prob=0.0)
        t = Transcript(text=text, segments=[seg])
        for kind in ("srt", "vtt"):
            doc = render(t, kind)
            cues = parse_cues(doc, kind)  # strict: a stray timing line or an extra block fails it
            assert len(cues) == 1 and "-->" not in cues[0][2], (kind, text, doc)
