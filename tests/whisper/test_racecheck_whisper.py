"""Whisper tiny.en's encoder on MetalSim under racecheck (backend option racecheck=1): every kernel the
encoder dispatches runs its racecheck build, so a threadgroup-memory race, a read of threadgroup memory
that no thread wrote, two threadgroups writing the same device bytes, or (the graph over two command
buffers with concurrent dispatch) two dispatches between barriers where one writes what the other
touches would raise mb.DeviceError. None may, and the encoder states must still match the numpy model
within the bound of tests/whisper/test_metalsim_whisper.py."""

from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb
from metal_backend.whisper import Whisper, load_audio, mel_windows

SIM = [d for d in mb.devices() if d.name == "MetalSim"]
pytestmark = pytest.mark.skipif(not SIM, reason="MetalSim not built")

F16_EPS = 2.0 ** -11


def test_encoder_is_race_free_and_matches_numpy(tiny_en_dir, tiny_en, tiny_en_numpy, asset):
    model = Whisper.load(tiny_en_dir, device="MetalSim", threads=2)
    options = {"racecheck": 1, "n_cb": 2, "concurrency": 1}
    for key, value in options.items():
        model.compute.backend.options[key] = value
    assert {k: model.compute.backend.options[k] for k in options} == options
    mel = mel_windows(load_audio(asset("jfk.wav")))[0]
    model.compute.encode(mel)
    ours, ref = model.compute.encoder_output(), tiny_en_numpy.encode(mel).encoded
    hp = tiny_en.hparams
    assert ours.shape == ref.shape == (hp.n_audio_ctx, hp.n_audio_state)
    assert np.abs(ours - ref).max() <= hp.n_audio_layer * F16_EPS * np.abs(ref).max()
