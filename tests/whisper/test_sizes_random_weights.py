"""Each released size's real widths on the backend against the numpy reference (issue 26, item 4).

Random weights (random_whisper.py) at a size's n_state, heads, n_mels (128 for large-v3 and its
descendants) and vocabulary (51866 for large-v3: its logits and special tokens), with layer counts
and positions cut so that each case takes seconds; the decoder keeps the real 2 layers of the
distilled models and 4 of large-v3-turbo. Each model goes through a file format the loader reads
(our ggml .bin writer, the CTranslate2 layout, a q8_0 .bin from the converter) and is loaded back;
the backend's encoder states and logits (the prompt, then single tokens including the vocabulary's
last rows) must match tests/whisper/numpy_whisper.py within test_backend_model's f16 bounds: one
f16 rounding (2^-11) of the largest magnitude per attention layer the value passed through.
"""

from __future__ import annotations

import numpy as np
import pytest
from random_whisper import random_mel, random_model, write_ct2

import metal_backend as mb
from metal_backend.whisper import BackendWhisper, DecodingOptions, QuantizedTensor, load_model_data
from metal_backend.whisper.convert import convert
from metal_backend.whisper.decoding import initial_tokens
from metal_backend.whisper.ggml_format import write_ggml
from numpy_whisper import NumpyWhisper

F16_EPS = 2.0 ** -11

# (size, file format, decoder layers (None: the size's own, at most 2)). In CI (about 35 s of CPU
# time): every width once, the 128 mel bins and 51866 tokens of large-v3 as ggml, q8_0 and (turbo,
# with its 4 decoder layers) CTranslate2; cut to 2 decoder layers large-v3 has the distilled
# models' shapes. The other sizes run with -m slow.
CASES = [
    ("tiny.en", "ggml", None),
    ("base", "ct2", None),
    ("small", "ggml", None),
    ("medium.en", "ct2", None),
    ("large-v3", "ggml", None),
    ("large-v3", "q8_0", None),
    ("large-v3-turbo", "ct2", 4),
]
SLOW_CASES = [
    ("large-v3", "ct2", None),
    ("distil-large-v3", "ggml", None),
    ("tiny", "ct2", None),
    ("base.en", "ggml", None),
    ("small.en", "ct2", None),
    ("medium", "ggml", None),
    ("large-v2", "ct2", None),
    ("distil-small.en", "ggml", None),
    ("distil-medium.en", "ct2", None),
    ("distil-large-v2", "ggml", None),
    ("large-v3-turbo", "q5_0", 4),
]


def _dequantized(model):
    tensors = {name: mb.dequantize(t.data, t.ggml_type.mb_type, t.shape) if isinstance(t, QuantizedTensor) else t
               for name, t in model.tensors.items()}
    return type(model)(hparams=model.hparams, tensors=tensors, vocab=model.vocab, mel_filters=model.mel_filters)


def _load(model, fmt, tmp_path):
    """The model written in fmt and read back by the loader."""
    if fmt == "ct2":
        heads = ((0, 1), (model.hparams.n_text_layer - 1, 2))
        loaded = load_model_data(write_ct2(model, tmp_path / "ct2", alignment_heads=heads))
        assert loaded.alignment_heads == tuple(sorted(heads)) and loaded.suppress_tokens == (1, 2)
        return loaded
    path = tmp_path / "model.bin"
    write_ggml(model, path)
    if fmt == "ggml":
        return load_model_data(path)
    quantized = tmp_path / f"model-{fmt}.bin"
    convert(path, quantized, type=fmt)
    loaded = load_model_data(quantized)
    assert loaded.hparams.ftype == {"q8_0": 2007, "q5_0": 2008}[fmt]
    assert isinstance(loaded.tensors["decoder.token_embedding.weight"], QuantizedTensor)
    return loaded


def _check(size, fmt, n_text_layer, tmp_path):
    model = random_model(size, n_text_layer=n_text_layer)
    hp = model.hparams
    loaded = _load(model, fmt, tmp_path)
    assert loaded.hparams.n_vocab == hp.n_vocab and loaded.hparams.n_mels == hp.n_mels
    assert loaded.vocab == model.vocab
    np.testing.assert_array_equal(loaded.mel_filters, model.mel_filters)
    if fmt in ("ggml", "ct2"):
        for name, tensor in model.tensors.items():
            back = np.asarray(loaded.tensors[name])
            assert back.dtype == tensor.dtype and back.shape == tensor.shape, name
            assert np.array_equal(back.view(np.uint8), tensor.view(np.uint8)), name  # bit for bit
        reference = NumpyWhisper(model)
    else:
        # The quantized file's own weights, dequantized, are what both sides compute with.
        reference = NumpyWhisper(_dequantized(loaded))
    del model

    backend = BackendWhisper(loaded, device="CPU", threads=2)
    mel = random_mel(loaded)
    ref = reference.encode(mel)
    features = backend.encode(mel)
    ours = backend.encoder_output()
    assert ours.shape == ref.encoded.shape == (hp.n_audio_ctx, hp.n_audio_state)
    assert np.abs(ours - ref.encoded).max() <= hp.n_audio_layer * F16_EPS * np.abs(ref.encoded).max()

    bound = (hp.n_audio_layer + hp.n_text_layer) * F16_EPS
    if fmt not in ("ggml", "ct2"):
        # A quantized matrix-vector product rounds its input to q8_0 first, as ggml does: half a step
        # of 1/127 of each 32-value block's largest magnitude, 2^-8, per product a decoded token passes
        # through (6 per decoder layer and the logits). q8_0 large-v3: measured 1.2e-2.
        bound += (6 * hp.n_text_layer + 1) * 2.0 ** -8
    special = loaded.special
    prompt = initial_tokens(loaded, DecodingOptions(language="en"))
    # Then a timestamp and the vocabulary's last token (<|30.00|>).
    feeds = [(prompt, 0)] + [([t], len(prompt) + i)
                             for i, t in enumerate([special.timestamp_begin + 7, hp.n_vocab - 1])]
    for tokens, offset in feeds:
        got = backend.decode(features, tokens, offset)
        want = reference.decode(ref, tokens, offset)
        assert got.shape == want.shape == (hp.n_vocab,)
        assert np.abs(got - want).max() <= bound * np.abs(want).max(), f"{size} {fmt}: tokens {tokens}"


@pytest.mark.parametrize("size,fmt,n_text_layer", CASES)
def test_size_matches_numpy(size, fmt, n_text_layer, tmp_path):
    _check(size, fmt, n_text_layer, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("size,fmt,n_text_layer", SLOW_CASES)
def test_more_sizes_match_numpy(size, fmt, n_text_layer, tmp_path):
    _check(size, fmt, n_text_layer, tmp_path)
