"""Several sequences decoded as one batch on the backend (beam search's need), against the numpy
reference decoding each sequence on its own; reorders of the cache rows happen on the device.

Bounds as in test_backend_model.py: (n_audio_layer + n_text_layer) * 2^-11 of the reference's
largest logit (the backend keeps keys and values in f16)."""

from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb
from metal_backend.whisper import BackendWhisper, WhisperError, load_audio, mel_windows

F16_EPS = 2.0 ** -11


@pytest.fixture(scope="module")
def mel(asset) -> np.ndarray:
    return mel_windows(load_audio(asset("jfk.wav")))[0]


@pytest.fixture(scope="module")
def reference(tiny_en_numpy, mel):
    return tiny_en_numpy.encode(mel)


def _close(ours: np.ndarray, ref: np.ndarray, hp, what: str) -> None:
    assert ours.shape == ref.shape, what
    bound = (hp.n_audio_layer + hp.n_text_layer) * F16_EPS * np.abs(ref).max()
    err = np.abs(ours - ref).max()
    assert err <= bound, f"{what}: max error {err} > {bound}"


def _random_tokens(rng, rows: int, n: int) -> list[list[int]]:
    return [[int(t) for t in rng.integers(0, 50000, n)] for _ in range(rows)]


def test_batch_steps_and_reorders_match_numpy(tiny_en, tiny_en_numpy, mel, reference):
    hp = tiny_en.hparams
    # Capacity 2: the first reorder to 4 sequences grows the cache (a device copy of the rows).
    backend = BackendWhisper(tiny_en, device=mb.device(), threads=2, max_sequences=2)
    first_cache = backend.cache_buffer
    features = backend.encode(mel)
    rng = np.random.default_rng(1)
    prompt = [50257, 50362]
    # One prompt, then grown to 3 sequences.
    _close(backend.decode_batch(features, [prompt], 0), tiny_en_numpy.decode_batch(reference, [prompt], 0),
           hp, "prompt")
    for ref_or_ours in (backend, tiny_en_numpy):
        ref_or_ours.reorder([0, 0, 0])
    offset = len(prompt)
    # Different tokens per sequence, one and then several at a time; 40 positions cross from the
    # 32-position cache graphs to the 64 ones.
    feeds = [1, 1, 3, 1, 30, 1, 1]
    orders = {1: [2, 0, 1], 3: [1, 1, 0, 2], 5: [3, 0], 6: [1, 1, 0, 0, 1]}
    for step, n in enumerate(feeds):
        rows = _random_tokens(rng, backend._n_active, n)
        ours = backend.decode_batch(features, rows, offset)
        ref = tiny_en_numpy.decode_batch(reference, rows, offset)
        offset += n
        _close(ours, ref, hp, f"step {step} (offset {offset})")
        # Rows of one batch differ from each other, so a wrong row would show.
        assert not np.allclose(ours[0], ours[1])
        if step in orders:
            backend.reorder(orders[step])
            tiny_en_numpy.reorder(orders[step])
    assert backend.n_sequences >= 5
    # Growing keeps one cache buffer, sized for the current capacity; the outgrown one was freed.
    assert first_cache.is_freed and not backend.cache_buffer.is_freed
    cache_bytes = 2 * hp.n_text_layer * backend.n_sequences * hp.n_text_ctx * hp.n_text_state * 2
    assert cache_bytes <= backend.cache_buffer.size < 2 * cache_bytes
    placements = backend.placements()
    assert any(name.startswith("reorder") for name in placements)
    for name, counts in placements.items():
        assert set(counts) == {backend.backend.name}, name


def test_reorder_skips_shared_slots_bit_for_bit(tiny_en, mel):
    """Rows descended from one prompt hold its slots alike, so reorder copies a row over another of
    the same origin from the slots filled when they forked only; the logits equal, bit for bit, those
    of a backend that copies every slot (its shared-slot record answering 0 for every origin), through
    reorders within an origin, across origins (two prompts: windows of a batch) and a cache growth."""
    backend = BackendWhisper(tiny_en, device=mb.device(), threads=2, max_sequences=2)
    control = BackendWhisper(tiny_en, device=mb.device(), threads=2, max_sequences=2)
    rng = np.random.default_rng(3)
    prompts = [[50257, 50362] + _random_tokens(rng, 1, 40)[0], [50257, 50362] + _random_tokens(rng, 1, 40)[0]]
    feats = [b.encode(mel) for b in (backend, control)]
    for b, f in zip((backend, control), feats):
        b.decode_batch(f, prompts, 0)
    offset = len(prompts[0])

    class CopyAll(dict):
        def get(self, key, default=None):
            return 0

    control._shared = CopyAll()
    orders = [[0, 0, 1, 1], [1, 0, 3, 2], [0, 0, 2, 2], [2, 3, 0, 1], [1, 1, 1, 0, 2, 3], [5, 4, 3, 2, 1, 0]]
    for step, order in enumerate(orders):
        for b in (backend, control):
            b.reorder(order)
        rows = _random_tokens(rng, len(order), 1 + step % 2)
        ours, full = (b.decode_batch(f, rows, offset) for b, f in zip((backend, control), feats))
        offset += len(rows[0])
        assert np.array_equal(ours, full), f"step {step}"
    assert backend._shared == {0: len(prompts[0]), 1: len(prompts[0])}


def test_left_padded_prompts_decode_as_each_alone(tiny_en, tiny_en_numpy, mel, reference):
    """decode_batch's skip: prompts of 2, 5 and 9 tokens left-padded to 9 give each sequence's own
    logits (the numpy reference decodes each unpadded prompt alone), through further steps and a
    reorder that carries the padding along."""
    hp = tiny_en.hparams
    backend = BackendWhisper(tiny_en, device=mb.device(), threads=2)
    features = backend.encode(mel)
    rng = np.random.default_rng(3)
    prompts = [[50361] + [int(t) for t in rng.integers(0, 50000, k)] + [50257] for k in (0, 3, 7)]
    width = max(len(p) for p in prompts)
    skip = [width - len(p) for p in prompts]
    padded = [p[:1] * k + p for p, k in zip(prompts, skip)]
    ours = backend.decode_batch(features, padded, 0, skip=skip)
    for s, prompt in enumerate(prompts):
        _close(ours[s], tiny_en_numpy.decode_batch(reference, [prompt], 0)[0], hp, f"prompt {s}")
    # The numpy model strips the same padding; both continue from the padded width.
    tiny_en_numpy.decode_batch(reference, padded, 0, skip=skip)
    offset = width
    for step, order in enumerate([None, [2, 0, 2], None]):
        if order is not None:
            backend.reorder(order)
            tiny_en_numpy.reorder(order)
        rows = _random_tokens(rng, backend._n_active, 1)
        _close(backend.decode_batch(features, rows, offset), tiny_en_numpy.decode_batch(reference, rows, offset),
               hp, f"step {step}")
        offset += 1
    with pytest.raises(WhisperError, match="skip is for new sequences"):
        backend.decode_batch(features, _random_tokens(rng, 3, 1), offset, skip=[0, 0, 0])
    with pytest.raises(WhisperError, match=r"one count in 0\.\.8 per sequence for 3 sequences"):
        backend.decode_batch(features, padded, 0, skip=[0, 9, 0])
    with pytest.raises(WhisperError, match="one count"):
        backend.decode_batch(features, padded, 0, skip=[0, 0])
    with pytest.raises(WhisperError, match="must be integers"):
        backend.decode_batch(features, padded, 0, skip=["a", 0, 0])


def test_batch_errors(tiny_en, mel):
    backend = BackendWhisper(tiny_en, device=mb.device(), threads=2)
    features = backend.encode(mel)
    with pytest.raises(WhisperError, match="reorder needs cached sequences"):
        backend.reorder([0])
    with pytest.raises(WhisperError, match="at least one sequence"):
        backend.decode_batch(features, [], 0)
    with pytest.raises(WhisperError, match="same number of tokens"):
        backend.decode_batch(features, [[50257, 50362], [50257]], 0)
    backend.decode_batch(features, [[50257, 50362], [50257, 50362]], 0)
    with pytest.raises(WhisperError, match="does not continue the 2 cached"):
        backend.decode_batch(features, [[400]], 2)
    with pytest.raises(WhisperError, match="reorder index 2 is outside the 2 cached"):
        backend.reorder([0, 2])
    with pytest.raises(WhisperError, match="at least one sequence"):
        backend.reorder([])
    with pytest.raises(WhisperError, match="sequence indices"):
        backend.reorder(["a"])
    with pytest.raises(WhisperError, match="max_sequences"):
        BackendWhisper(tiny_en, device=mb.device(), max_sequences=0)
