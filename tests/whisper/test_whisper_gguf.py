"""Whisper models in GGUF files (metal_backend/whisper/gguf_format.py): files written by gguf-py's
GGUFWriter from our loaded weights load back to the same model (tensors, vocabulary, filters, heads),
a real tiny.en packed this way transcribes exactly as its source does, and files that are not
Whisper models say what is missing."""

from __future__ import annotations

import numpy as np
import pytest
from test_whisper_models import synthetic_model

from metal_backend.whisper import QuantizedTensor, Whisper, WhisperError, load_model_data
from metal_backend.whisper.gguf_format import HPARAM_KEYS, MEL_FILTERS, TOKENS_KEY, read_gguf, token_to_text
from whisper_testing import JFK_TEXT, normalize

gguf = pytest.importorskip("gguf")


def write_whisper_gguf(model, path, *, filters=True, heads=True, skip=(), drop_keys=(), arch="whisper", n_tokens=None):
    """model (WhisperModelData) as a GGUF file by gguf-py's writer, in gguf_format.py's layout."""
    w = gguf.GGUFWriter(str(path), arch)
    hp = model.hparams
    for key in HPARAM_KEYS + ("ftype",):
        if key not in drop_keys:
            w.add_uint32(f"whisper.{key}", getattr(hp, key))
    # Every token, the special ones as the source spells them (a shorter list gets whisper.cpp's names).
    if TOKENS_KEY not in drop_keys:
        w.add_array(TOKENS_KEY, [token_to_text(t) for t in model.vocab[:n_tokens or len(model.vocab)]])
    if heads and model.alignment_heads:
        w.add_array("whisper.alignment_heads", [x for pair in model.alignment_heads for x in pair])
    if model.suppress_tokens:
        w.add_array("whisper.suppress_tokens", list(model.suppress_tokens))
    for name, t in model.tensors.items():
        if name in skip:
            continue
        if isinstance(t, QuantizedTensor):
            w.add_tensor(name, np.ascontiguousarray(t.data), raw_dtype=gguf.GGMLQuantizationType[t.ggml_type.name])
        else:
            w.add_tensor(name, np.ascontiguousarray(t))
    if filters:
        w.add_tensor(MEL_FILTERS, np.ascontiguousarray(model.mel_filters, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def assert_same_model(got, want):
    assert got.hparams == want.hparams
    assert got.vocab == want.vocab
    np.testing.assert_array_equal(got.mel_filters, want.mel_filters)
    assert got.alignment_heads == want.alignment_heads and got.suppress_tokens == want.suppress_tokens
    assert set(got.tensors) == set(want.tensors)
    for name, t in want.tensors.items():
        g = got.tensors[name]
        if isinstance(t, QuantizedTensor):
            assert isinstance(g, QuantizedTensor) and g.ggml_type == t.ggml_type and g.shape == t.shape, name
            np.testing.assert_array_equal(g.data, t.data, err_msg=name)
        else:
            assert g.dtype == t.dtype and g.shape == t.shape, name
            np.testing.assert_array_equal(g, t, err_msg=name)


def test_round_trip_of_a_synthetic_model(tmp_path):
    model = synthetic_model(d=32)
    model.vocab[:256] = [bytes([b]) for b in range(256)]  # every byte value alone, then all in one token
    model.vocab[256] = bytes(range(256))
    model.vocab[257] = b""
    path = write_whisper_gguf(model, tmp_path / "m.gguf")
    back = load_model_data(path)
    assert_same_model(back, model)
    assert back.source == str(path)


def test_quantized_matrices_and_defaults(tmp_path):
    import metal_backend as mb
    from metal_backend.io.ggml_types import GgmlType

    model = synthetic_model(d=64)
    for name in [n for n in model.tensors if n.endswith("mlp.0.weight")]:
        x = model.tensors[name].astype(np.float32)
        raw = np.frombuffer(mb.quantize(x, mb.q8_0), np.uint8).reshape(x.shape[0], -1)
        model.tensors[name] = QuantizedTensor(GgmlType.Q8_0, x.shape, raw)
    model.alignment_heads = ((0, 1),)
    back = read_gguf(write_whisper_gguf(model, tmp_path / "q.gguf"))
    assert_same_model(back, model)
    # Only the text tokens stored: the special ones are whisper.cpp's names, derived from n_vocab.
    eot = model.special.eot
    short = read_gguf(write_whisper_gguf(model, tmp_path / "s.gguf", n_tokens=eot))
    assert short.vocab[:eot] == model.vocab[:eot]
    assert short.vocab[eot:] == [model.special.names(model.hparams.n_vocab)[i] for i in range(eot, len(model.vocab))]
    # Without the optional filters: the Slaney bank (what openai-whisper ships) for n_mels.
    from metal_backend.whisper import mel_filters
    no_filters = read_gguf(write_whisper_gguf(model, tmp_path / "nf.gguf", filters=False))
    np.testing.assert_array_equal(no_filters.mel_filters, mel_filters(model.hparams.n_mels))


def test_not_whisper_architecture(tmp_path):
    # (No vocabulary in these files: the checks before it fail first, and 50k tokens take time to write.)
    path = write_whisper_gguf(synthetic_model(d=32), tmp_path / "llama.gguf", arch="llama", drop_keys=(TOKENS_KEY,))
    with pytest.raises(WhisperError, match=r"llama.gguf: GGUF general.architecture is 'llama', not 'whisper'"):
        load_model_data(path)


def test_missing_hparam_names_it(tmp_path):
    path = write_whisper_gguf(synthetic_model(d=32), tmp_path / "m.gguf", drop_keys=("n_text_head", TOKENS_KEY))
    with pytest.raises(WhisperError, match=r"no whisper.n_text_head"):
        load_model_data(path)


def test_missing_vocabulary(tmp_path):
    path = write_whisper_gguf(synthetic_model(d=32), tmp_path / "m.gguf", drop_keys=(TOKENS_KEY,))
    with pytest.raises(WhisperError, match=r"no tokenizer.ggml.tokens"):
        load_model_data(path)


def test_missing_tensor_is_named(tmp_path):
    path = write_whisper_gguf(synthetic_model(d=32), tmp_path / "m.gguf", skip=("decoder.ln.bias",))
    with pytest.raises(WhisperError, match=r"missing tensors decoder.ln.bias"):
        load_model_data(path)


def test_unsupported_tensor_type_is_named(tmp_path):
    import metal_backend as mb

    model = synthetic_model(d=256)
    name = "decoder.blocks.0.mlp.0.weight"
    x = model.tensors[name].astype(np.float32)
    raw = np.frombuffer(mb.quantize(x, mb.q4_K), np.uint8).reshape(x.shape[0], -1)
    path = tmp_path / "k.gguf"
    w = gguf.GGUFWriter(str(path), "whisper")
    for key in HPARAM_KEYS:
        w.add_uint32(f"whisper.{key}", getattr(model.hparams, key))
    w.add_array(TOKENS_KEY, [token_to_text(t) for t in model.vocab[:model.special.eot]])
    w.add_tensor(name, raw, raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(WhisperError, match=rf"tensor {name} is q4_K; a Whisper model's tensors must be one of"):
        load_model_data(path)


def test_bad_gguf_file_is_a_whisper_error(tmp_path):
    path = tmp_path / "bad.gguf"
    path.write_bytes(b"GGUF" + bytes(10))
    with pytest.raises(WhisperError, match=r"bad.gguf: unsupported version 0"):
        load_model_data(path)


def test_tiny_en_from_gguf_transcribes_as_its_source(tiny_en_dir, tiny_en, asset, tmp_path):
    path = write_whisper_gguf(tiny_en, tmp_path / "tiny.en.gguf")
    assert_same_model(read_gguf(path), tiny_en)
    source = Whisper.load(tiny_en_dir, device="CPU")
    packed = Whisper.load(path, device="CPU")
    want = source.transcribe(asset("jfk.wav"))
    got = packed.transcribe(asset("jfk.wav"))
    assert normalize(want.text) == normalize(JFK_TEXT)
    assert got.text == want.text
    assert [(s.start, s.end, s.text, s.tokens) for s in got.segments] == \
        [(s.start, s.end, s.text, s.tokens) for s in want.segments]
