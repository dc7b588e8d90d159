"""Whisper tiny.en on MetalSim with one shader family rejected: the family's ops (NORM, Whisper's
layer norms) run on the CPU through the model's Scheduler, everything else stays on MetalSim, and
the transcript is the expected one."""

from __future__ import annotations

import dataclasses

import pytest

import metal_backend as mb
from metal_backend.whisper import DecodingOptions, Whisper
from whisper_testing import JFK_TEXT, normalize

SIM = [d for d in mb.devices() if d.name == "MetalSim"]
pytestmark = pytest.mark.skipif(not SIM, reason="MetalSim not built")


@pytest.fixture
def norm_rejected():
    dev = SIM[0]
    dev.set_prop("reject_shader_families", "norm")
    yield dev
    dev.set_prop("reject_shader_families", "")


def test_transcript_with_the_norm_family_rejected(norm_rejected, tiny_en_dir, asset):
    assert norm_rejected.compile_shader_families()["norm"].startswith("failed: ")
    model = Whisper.load(tiny_en_dir, device="MetalSim", threads=2)
    names = {f.name for f in dataclasses.fields(DecodingOptions)}
    wanted = {"temperature": 0.0, "beam_size": None, "best_of": None, "without_timestamps": True}
    text = model.transcribe(asset("jfk.wav"), DecodingOptions(**{k: v for k, v in wanted.items() if k in names})).text
    assert normalize(text) == normalize(JFK_TEXT)
    placements = model.compute.placements()
    encoder = placements["encoder"]
    # Both devices work on it: the layer norms on the CPU, the rest (matrices, attention) on MetalSim.
    assert encoder.get("CPU", 0) > 0 and encoder.get("MetalSim", 0) > encoder["CPU"], encoder
    for graph in model.compute.encoder_scheduler.plan(model.compute.encoder_graph):
        if graph.node.op == "NORM":
            assert graph.backend.name == "CPU"
