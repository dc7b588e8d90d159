"""The README's Ray Data recipe (examples/ray_transcribe.py) on a local Ray cluster: two actors,
each with its own model, transcribe three files (one of them bad) into the expected texts."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from whisper_testing import DOOR_TEXT, JFK_TEXT, MORNING_TEXT, normalize, require

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")
sys.path.insert(0, EXAMPLES)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # raised inside ray.data
def test_ray_data_recipe_on_a_local_cluster(tiny_en_dir, asset, tmp_path):
    require(importlib.util.find_spec("ray") is not None, 'ray (pip install "ray[data]")')
    import ray
    from ray_transcribe import transcribe_paths

    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF0000WAVEjunk")
    paths = [str(asset("jfk.wav")), str(bad), str(asset("door_light.wav")), str(asset("good_morning.wav"))]
    # The actors import the recipe's module as the driver does.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([EXAMPLES, *sys.path])}})
    try:
        rows = transcribe_paths(paths, str(tiny_en_dir), actors=2, threads=1, beam_size=None)
    finally:
        ray.shutdown()
    assert [r["path"] for r in rows] == paths
    assert [normalize(r["text"]) for r in rows] == [normalize(t) for t in (JFK_TEXT, "", DOOR_TEXT, MORNING_TEXT)]
    assert rows[1]["error"] and str(bad) in rows[1]["error"]
    assert all(not r["error"] for r in rows if r["path"] != str(bad))
