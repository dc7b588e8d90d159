"""Whisper tiny.en on MetalSim: the whole Metal path (op encoding, fusion, barriers, command buffers and
every .metal kernel Whisper uses) serving real inference code, in CI.

Each check runs under two backend configurations that stress different parts of the path: the
executor's run-ahead schedule (one simdgroup runs ahead to each barrier, exposing missing
threadgroup barriers) and n_cb=2 with concurrent dispatch (the graph split over two command buffers;
the encoder's memory barriers are all that orders dependent dispatches, and the executor runs the
dispatches between barriers last to first so that a missing one shows). Transcripts must equal the
CPU device's; encoder states and first-step logits must match the numpy model within the bounds
that tests/whisper/test_backend_model.py derives (n layers x 2^-11 x max|ref|).

Decoding is pinned to greedy, text-only decoding: the same for both devices, and cheap enough here.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import metal_backend as mb
from metal_backend.whisper import BackendWhisper, DecodingOptions, GreedyDecoder, Whisper, load_audio, mel_windows
from whisper_testing import DOOR_TEXT, JFK_TEXT, normalize

SIM = [d for d in mb.devices() if d.name == "MetalSim"]
pytestmark = pytest.mark.skipif(not SIM, reason="MetalSim not built")

F16_EPS = 2.0 ** -11
CONFIGS = {
    "run-ahead": {"schedule": 1},
    "n_cb2-concurrent": {"n_cb": 2, "concurrency": 1, "schedule": 0},
}
CLIPS = [("jfk.wav", JFK_TEXT), ("door_light.wav", DOOR_TEXT)]


def greedy_options() -> DecodingOptions:
    """Greedy decoding without timestamps, set explicitly wherever the options have such fields."""
    wanted = {"temperature": 0.0, "beam_size": None, "best_of": None, "without_timestamps": True}
    names = {f.name for f in dataclasses.fields(DecodingOptions)}
    return DecodingOptions(**{k: v for k, v in wanted.items() if k in names})


def configure(compute: BackendWhisper, options: dict[str, int]) -> None:
    for key, value in options.items():
        compute.backend.options[key] = value
    assert {k: compute.backend.options[k] for k in options} == options


@pytest.fixture(scope="module", params=list(CONFIGS), ids=list(CONFIGS))
def sim_model(request, tiny_en_dir) -> Whisper:
    model = Whisper.load(tiny_en_dir, device="MetalSim", threads=2)
    configure(model.compute, CONFIGS[request.param])
    return model


@pytest.fixture(scope="module")
def cpu_transcripts(tiny_en_dir, asset) -> dict[str, str]:
    model = Whisper.load(tiny_en_dir, device="CPU", threads=2)
    return {clip: model.transcribe(asset(clip), greedy_options()).text for clip, _ in CLIPS}


@pytest.mark.parametrize("clip,expected", CLIPS, ids=[c for c, _ in CLIPS])
def test_transcript_equals_the_cpu_devices(sim_model, cpu_transcripts, asset, clip, expected):
    text = sim_model.transcribe(asset(clip), greedy_options()).text
    assert text == cpu_transcripts[clip]
    assert normalize(text) == normalize(expected)


def test_every_node_runs_on_metalsim(sim_model, asset):
    # Decodes itself, so the decoder's graphs exist whatever ran before (alone, or in any order).
    sim_model.transcribe(asset("good_morning.wav"), greedy_options())
    placements = sim_model.compute.placements()
    assert "encoder" in placements and len(placements) >= 2, placements
    for graph, counts in placements.items():
        assert set(counts) == {"MetalSim"}, (graph, counts)


def test_encoder_states_and_first_logits_match_numpy(sim_model, tiny_en, tiny_en_numpy, asset):
    compute = sim_model.compute
    mel = mel_windows(load_audio(asset("jfk.wav")))[0]
    reference = tiny_en_numpy.encode(mel)
    features = compute.encode(mel)
    ours, ref = compute.encoder_output(), reference.encoded
    hp = tiny_en.hparams
    assert ours.shape == ref.shape == (hp.n_audio_ctx, hp.n_audio_state)
    assert np.abs(ours - ref).max() <= hp.n_audio_layer * F16_EPS * np.abs(ref).max()

    prompt = GreedyDecoder(tiny_en).prompt
    logits = compute.decode(features, prompt, 0)
    ref_logits = tiny_en_numpy.decode(reference, prompt, 0)
    assert logits.shape == ref_logits.shape == (hp.n_vocab,)
    bound = (hp.n_audio_layer + hp.n_text_layer) * F16_EPS * np.abs(ref_logits).max()
    assert np.abs(logits - ref_logits).max() <= bound


def test_q8_0_model_transcript_equals_the_cpu_devices(tiny_en_dir, asset):
    # Quantized matrices take MetalSim's q8_0 mul_mat kernels; run-ahead schedule, concurrency on.
    options = greedy_options()
    cpu = Whisper.load(tiny_en_dir, device="CPU", threads=2, quantize="q8_0")
    sim = Whisper.load(tiny_en_dir, device="MetalSim", threads=2, quantize="q8_0")
    configure(sim.compute, {"schedule": 1, "n_cb": 2, "concurrency": 1})
    assert sim.compute.w["encoder.blocks.0.mlp.0.weight"].type == mb.q8_0
    text = sim.transcribe(asset("jfk.wav"), options).text
    assert text == cpu.transcribe(asset("jfk.wav"), options).text
    assert normalize(text) == normalize(JFK_TEXT)
