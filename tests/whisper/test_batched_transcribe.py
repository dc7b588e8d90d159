"""Batched long-form: several windows encoded as one graph and decoded as one batch.

- encode_batch + decode_batch over windows against the numpy reference run window by window
  (bounds as test_backend_batch.py: f16 keys and values);
- BatchDecoder over 3 windows with prompts of three lengths gives each window the tokens
  WindowDecoder gives it alone with its prompt (greedy and beam 5);
- transcribe(batch_size=N) on the passage against our sequential transcription's WER.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import metal_backend as mb
from metal_backend.whisper import BackendWhisper, DecodingOptions, Whisper, WhisperError, load_audio, mel_windows
from metal_backend.whisper.batch_decoding import BatchDecoder
from metal_backend.whisper.decoding import WindowDecoder
from metal_backend.whisper.tokenizer import Tokenizer
from whisper_testing import word_error_rate

F16_EPS = 2.0 ** -11


@pytest.fixture(scope="module")
def passage(asset):
    path = asset("passage.wav")
    info = json.loads(path.with_suffix(".json").read_text())
    return load_audio(path), " ".join(s["text"] for s in info["sentences"])


@pytest.fixture(scope="module")
def backend(tiny_en):
    return BackendWhisper(tiny_en, device=mb.device("CPU"), threads=2)


def test_batched_encode_and_decode_match_numpy(tiny_en, tiny_en_numpy, backend, asset):
    mels = np.stack([mel_windows(load_audio(asset(n)))[0] for n in ("jfk.wav", "door_light.wav")])
    hp = tiny_en.hparams
    features = backend.encode_batch(mels)
    prompt = [50257, 50362]
    rows = [prompt, prompt, prompt, prompt]  # 2 sequences per window
    ours = [backend.decode_batch(features, rows, 0)]
    backend.reorder([1, 0, 3, 2])
    steps = [[[440], [262]] * 2, [[1110], [3290]] * 2]
    for step in steps:
        ours.append(backend.decode_batch(features, step, len(prompt) + len(ours) - 1))
    for w in range(2):
        reference = tiny_en_numpy.encode(mels[w])
        ref = [tiny_en_numpy.decode_batch(reference, rows[2 * w:2 * w + 2], 0)]
        for i, step in enumerate(steps):
            ref.append(tiny_en_numpy.decode_batch(reference, step[2 * w:2 * w + 2], len(prompt) + i))
        for got, want in zip(ours, ref):
            bound = (hp.n_audio_layer + hp.n_text_layer) * F16_EPS * np.abs(want).max()
            assert np.abs(got[2 * w:2 * w + 2] - want).max() <= bound
    # The two windows differ, so a sequence attending to the wrong window would show.
    assert not np.allclose(ours[0][0], ours[0][2], atol=1e-2)


@pytest.mark.parametrize("beam_size", [None, 5])
def test_batch_decoder_equals_window_decoder(tiny_en, backend, passage, beam_size):
    mels = np.stack(mel_windows(passage[0])[:3])
    options = DecodingOptions(beam_size=beam_size, temperature=0.0)
    # Prompts of three lengths (none, the sentence before the window, the two before it): the
    # shorter ones are left-padded in the batch, and each window must still decode as it does
    # alone with its own prompt.
    tokenizer = Tokenizer(tiny_en.vocab, tiny_en.special)
    prompts = [[], tokenizer.encode(" We walked along the river until the sun went down behind the hills."),
               tokenizer.encode(" The old bridge was closed for repairs during the whole summer. She found her keys "
                                "under a pile of newspapers on the kitchen table.")]
    assert len({len(p) for p in prompts}) == 3
    alone = []
    for mel, prompt in zip(mels, prompts):
        alone.append(WindowDecoder(tiny_en, options).decode(backend, backend.encode(mel), previous=prompt).tokens)
    backend.decoder_graphs.clear()
    together = BatchDecoder(tiny_en, options).decode_windows(backend, backend.encode_batch(mels), 3,
                                                             previous_windows=prompts)
    assert [r.tokens for r in together] == alone
    # The padded path ran: a graph with one mask per sequence.
    assert any(key[-1] for key in backend.decoder_graphs)
    assert all(len(t) > 5 for t in alone) and len(alone[0]) > 50
    # The windows end at different steps; the finished ones left the batch (keep_windows), so
    # graphs over fewer windows ran, and the windows decoded on were the right ones.
    lengths = sorted(len(t) for t in alone)
    assert lengths[0] < lengths[-1]
    assert {key[0] for key in backend.decoder_graphs} >= {3, 2 if lengths[1] < lengths[2] else 1}


def test_windows_selected_and_kept_from_a_batch(backend, passage):
    mels = np.stack(mel_windows(passage[0])[:3])
    prompt = [50257, 50363]
    alone = []
    for mel in mels:
        alone.append(backend.decode_batch(backend.encode(mel), [prompt], 0)[0])
    features = backend.encode_batch(mels)
    for w in (2, 0):
        # select_window: window w as encode() would leave it, exactly (the same f16 keys and values).
        assert np.array_equal(backend.decode_batch(backend.select_window(features, w), [prompt], 0)[0], alone[w])
    features = backend.encode_batch(mels)
    backend.decode_batch(features, [prompt] * 3, 0)
    # Windows 1 and 2 decode on, moved to the front; window 0 is gone: the step equals the same
    # step of a batch encoded from those two windows alone.
    kept = backend.keep_windows(features, [1, 2], [1, 2])
    step = backend.decode_batch(kept, [[440], [440]], len(prompt))
    # Every window is still there for the word-timestamp pass, wherever keep_windows put it.
    for w in (0, 2, 1):
        assert np.array_equal(backend.decode_batch(backend.select_window(features, w), [prompt], 0)[0], alone[w])
    pair = backend.encode_batch(mels[1:])
    backend.decode_batch(pair, [prompt] * 2, 0)
    assert np.array_equal(step, backend.decode_batch(pair, [[440], [440]], len(prompt)))
    with pytest.raises(WhisperError, match="ascending distinct window indices below 3"):
        backend.keep_windows(backend.encode_batch(mels), [2, 1], [0, 1])
    with pytest.raises(WhisperError, match="outside the batch of 3 windows"):
        backend.select_window(backend.encode_batch(mels), 3)
    with pytest.raises(WhisperError, match="not from the latest encode_batch"):
        backend.select_window(features, 0)  # a later encode_batch replaced its windows


def test_batch_errors(backend, asset):
    mel = mel_windows(load_audio(asset("jfk.wav")))[0]
    with pytest.raises(WhisperError, match="mels has shape"):
        backend.encode_batch(mel)
    with pytest.raises(WhisperError, match="mels has shape"):
        backend.encode_batch(np.zeros((0, *mel.shape), np.float32))
    features = backend.encode_batch(np.stack([mel, mel]))
    with pytest.raises(WhisperError, match="3 sequences over 2 windows"):
        backend.decode_batch(features, [[50257]] * 3, 0)
    backend.encode(mel)
    with pytest.raises(WhisperError, match="not from the latest"):
        backend.decode_batch(features, [[50257]] * 2, 0)


@pytest.fixture(scope="module")
def model(tiny_en_dir) -> Whisper:
    return Whisper.load(tiny_en_dir, device="CPU", threads=2)


# Measured on this passage (tiny.en, 65 s): see the bounds' comment in the report of issue 19.
@pytest.mark.parametrize("beam_size, bound", [(None, 0.035), (5, 0.015)])
def test_batched_close_to_sequential(model, passage, beam_size, bound):
    samples, reference = passage
    sequential = word_error_rate(reference, model.transcribe(samples, beam_size=beam_size).text)
    progress = []
    batched = model.transcribe(samples, beam_size=beam_size, batch_size=4,
                               progress=lambda done, total: progress.append((done, total)))
    assert word_error_rate(reference, batched.text) <= sequential + bound, (sequential, batched.text)
    assert progress and progress[-1][0] == pytest.approx(progress[-1][1])
    starts = [s.start for s in batched.segments]
    assert starts == sorted(starts) and batched.segments[-1].end <= samples.size / 16000
    assert [s.id for s in batched.segments] == list(range(len(batched.segments)))
    if beam_size is None:
        # One region (batch 1) is one loop conditioned on its own text all along.
        single = model.transcribe(samples, beam_size=None, batch_size=1)
        assert word_error_rate(reference, single.text) <= sequential + bound, (sequential, single.text)


def test_batched_word_timestamps_and_no_vad(model, passage):
    samples, reference = passage
    result = model.transcribe(samples, beam_size=None, batch_size=4, word_timestamps=True)
    words = [w for s in result.segments for w in s.words]
    assert word_error_rate(reference, "".join(w.word for w in words)) <= 0.1
    assert all(a.start <= b.start for a, b in zip(words, words[1:]))
    # Without the VAD the audio is cut every 30 s.
    assert word_error_rate(reference, model.transcribe(samples, beam_size=None, batch_size=4,
                                                       vad_filter=False).text) <= 0.2


@pytest.mark.parametrize("vad_filter", [True, False])
def test_batched_encodes_each_chunk_once(model, passage, monkeypatch, vad_filter):
    # As faster-whisper's pipeline: every chunk is one encoder window, encoded once (no window of
    # its own for an unfinished end); batches hold one chunk of each region.
    from metal_backend.whisper import batched

    samples, reference = passage
    chunks, windows = [], []
    pack = batched.pack_chunks
    monkeypatch.setattr(batched, "pack_chunks", lambda speech: chunks.extend(pack(speech)) or list(chunks))
    encode_batch = model.compute.encode_batch
    monkeypatch.setattr(model.compute, "encode_batch", lambda mels: windows.append(len(mels)) or encode_batch(mels))
    result = model.transcribe(samples, beam_size=None, batch_size=2, vad_filter=vad_filter)
    assert sum(windows) == len(chunks) == result.timings["windows"]
    assert windows == [2] * (len(chunks) // 2) + [1] * (len(chunks) % 2)
    if not vad_filter:
        assert len(chunks) == -(-samples.size // (30 * 16000))  # cut every 30 s
    assert word_error_rate(reference, result.text) <= 0.2
