"""BackendWhisper's graphs over memory that comes and goes: an encoder graph built before its first
compute has its nodes swept into the next buffer made for new tensors (mb.alloc_ctx_tensors);
when that buffer is freed, the scheduler places them again (the workaround that dropped such a
graph is gone)."""

from __future__ import annotations

import numpy as np

import metal_backend as mb
from metal_backend.whisper import BackendWhisper, load_audio, mel_windows

F16_EPS = 2.0 ** -11


def test_encoder_built_early_survives_its_swept_buffer_being_freed(tiny_en, tiny_en_numpy, asset):
    mel = mel_windows(load_audio(asset("jfk.wav")))[0]
    ref = tiny_en_numpy.encode(mel).encoded
    bound = tiny_en.hparams.n_audio_layer * F16_EPS * np.abs(ref).max()
    backend = BackendWhisper(tiny_en, device=mb.device(), threads=2)
    backend.placements()  # builds the one-window encoder graph without computing it
    backend.encode_batch(np.stack([mel]))  # a buffer for one window: sweeps the encoder's nodes
    swept = backend._windows.buffer
    assert backend.encoder_out.is_allocated() and backend.encoder_out.buffer is swept
    backend.encode_batch(np.stack([mel, mel]))  # a buffer for two: the first one is freed
    assert swept.is_freed
    backend.encode(mel)  # the encoder graph, its nodes over freed memory: placed again
    ours = backend.encoder_output()
    assert ours.shape == ref.shape and np.abs(ours - ref).max() <= bound
