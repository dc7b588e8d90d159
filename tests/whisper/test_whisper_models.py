"""Model files: the ggml writer/reader round trip, CTranslate2 directories, conversion, errors."""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest

from metal_backend.whisper import (
    GgmlType,
    QuantizedTensor,
    SpecialTokens,
    WhisperError,
    WhisperHParams,
    WhisperModelData,
    load_model_data,
)
from metal_backend.whisper.convert import main as convert_main
from metal_backend.whisper.ct2_format import read_ct2, read_ct2_variables
from metal_backend.whisper.ggml_format import read_ggml, write_ggml
from metal_backend.whisper.model_data import expected_shapes, is_matrix
from whisper_testing import walk_ggml_file


def synthetic_model(d: int = 8, ftype: int = 1, seed: int = 0) -> WhisperModelData:
    hp = WhisperHParams(n_vocab=51864, n_audio_ctx=6, n_audio_state=d, n_audio_head=2, n_audio_layer=2,
                        n_text_ctx=5, n_text_state=d, n_text_head=2, n_text_layer=1, n_mels=4, ftype=ftype)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in expected_shapes(hp).items():
        dtype = np.float16 if len(shape) >= 2 else np.float32
        tensors[name] = rng.standard_normal(shape).astype(dtype)
    special = SpecialTokens.for_hparams(hp)
    names = special.names(hp.n_vocab)
    vocab = [bytes(rng.integers(0, 256, i % 7 + 1, dtype=np.uint8)) for i in range(special.eot)]
    vocab += [names[i] for i in range(special.eot, hp.n_vocab)]
    model = WhisperModelData(hparams=hp, tensors=tensors, vocab=vocab,
                             mel_filters=rng.random((4, 201)).astype(np.float32), source="synthetic")
    model.validate()
    return model


def scan_ggml(path) -> tuple[tuple[int, ...], int, dict[str, tuple[int, tuple[int, ...]]]]:
    """Walks a ggml file independently of the reader: (hparams, n_words, {name: (type, ne)})."""
    hparams, n_words, tensors = walk_ggml_file(path)
    return hparams, n_words, {name: (ttype, ne) for name, (ttype, ne, _) in tensors.items()}


def test_ggml_round_trip(tmp_path):
    model = synthetic_model()
    path = tmp_path / "m.bin"
    write_ggml(model, path)
    back = read_ggml(path)
    assert back.hparams == model.hparams
    assert back.vocab == model.vocab
    np.testing.assert_array_equal(back.mel_filters, model.mel_filters)
    assert set(back.tensors) == set(model.tensors)
    for name, tensor in model.tensors.items():
        got = back.tensors[name]
        assert got.shape == tensor.shape, name
        np.testing.assert_array_equal(got.astype(np.float32), tensor.astype(np.float32), err_msg=name)


def test_ggml_layout_is_what_whisper_cpp_expects(tmp_path):
    model = synthetic_model()
    path = tmp_path / "m.bin"
    write_ggml(model, path)
    hparams, n_words, tensors = scan_ggml(path)
    assert hparams == (51864, 6, 8, 2, 2, 5, 8, 2, 1, 4, 1)
    assert n_words == model.special.eot
    assert tensors["encoder.conv1.bias"] == (0, (1, 8))
    assert tensors["encoder.conv1.weight"] == (1, (3, 4, 8))
    assert tensors["encoder.conv2.weight"] == (1, (3, 8, 8))
    assert tensors["encoder.positional_embedding"] == (0, (8, 6))
    assert tensors["decoder.positional_embedding"] == (0, (8, 5))
    assert tensors["decoder.token_embedding.weight"] == (1, (8, 51864))
    assert tensors["encoder.blocks.0.attn.query.weight"] == (1, (8, 8))
    assert tensors["decoder.blocks.0.mlp.0.weight"] == (1, (8, 32))
    assert tensors["decoder.blocks.0.cross_attn_ln.bias"] == (0, (8,))
    assert not any(name.endswith("key.bias") for name in tensors)
    assert len(tensors) == len(expected_shapes(model.hparams))


def test_ggml_reader_maps_without_copying(tmp_path):
    path = tmp_path / "m.bin"
    write_ggml(synthetic_model(), path)
    back = read_ggml(path)
    w = back.tensors["encoder.blocks.0.mlp.0.weight"]
    assert w.dtype == np.float16 and not w.flags.owndata and not w.flags.writeable
    assert back.tensors["encoder.conv1.bias"].dtype == np.float32


def test_ggml_quantized_round_trip(tmp_path):
    model = synthetic_model(d=32, ftype=2008)
    rng = np.random.default_rng(5)
    for name in list(model.tensors):
        if is_matrix(name):
            shape = model.tensors[name].shape
            data = rng.integers(0, 256, (shape[0], GgmlType.Q5_0.row_bytes(shape[1])), dtype=np.uint8)
            model.tensors[name] = QuantizedTensor(GgmlType.Q5_0, shape, data)
    path = tmp_path / "q.bin"
    write_ggml(model, path)
    _, _, layout = scan_ggml(path)
    assert layout["decoder.token_embedding.weight"][0] == 6
    assert layout["encoder.conv1.weight"][0] == 1
    back = read_ggml(path)
    assert back.hparams.ftype == 2008
    for name, tensor in model.tensors.items():
        if isinstance(tensor, QuantizedTensor):
            got = back.tensors[name]
            assert isinstance(got, QuantizedTensor) and got.ggml_type == GgmlType.Q5_0 and got.shape == tensor.shape
            np.testing.assert_array_equal(got.data, tensor.data)


def test_writer_refuses_float_matrices_in_quantized_file(tmp_path):
    with pytest.raises(WhisperError, match="must be quantized to Q5_0"):
        write_ggml(synthetic_model(d=32, ftype=2008), tmp_path / "q.bin")
    assert not list(tmp_path.iterdir())


def test_quantize_hook(tmp_path):
    path = tmp_path / "m.bin"
    write_ggml(synthetic_model(d=32), path)
    seen = []

    def hook(name, array):
        seen.append(name)
        rows = np.zeros((array.shape[0], GgmlType.Q8_0.row_bytes(array.shape[1])), np.uint8)
        return QuantizedTensor(GgmlType.Q8_0, array.shape, rows)

    model = load_model_data(path, quantize=hook)
    assert model.hparams.ftype == 2007
    assert "decoder.token_embedding.weight" in seen and "encoder.conv1.weight" not in seen
    assert all(is_matrix(n) for n in seen)
    assert isinstance(model.tensors["encoder.blocks.1.attn.out.weight"], QuantizedTensor)


def test_ct2_tiny_en(tiny_en_dir, tiny_en):
    hp = tiny_en.hparams
    assert hp == WhisperHParams(51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1)
    assert not hp.is_multilingual
    sp = tiny_en.special
    assert (sp.eot, sp.sot, sp.transcribe, sp.no_timestamps, sp.timestamp_begin) == (50256, 50257, 50358, 50362, 50363)
    assert tiny_en.vocab[220] == b" " and tiny_en.vocab[198] == b"\n"
    assert tiny_en.vocab[50256] == b"<|endoftext|>" and tiny_en.vocab[50362] == b"<|notimestamps|>"
    assert 220 not in tiny_en.suppress_tokens and len(tiny_en.suppress_tokens) > 50
    for name, shape in expected_shapes(hp).items():
        t = tiny_en.tensors[name]
        assert t.shape == shape and t.dtype == np.float16, name
    _, _, variables = read_ct2_variables(tiny_en_dir / "model.bin")
    fused = variables["decoder/layer_2/self_attention/linear_0/weight"]
    np.testing.assert_array_equal(tiny_en.tensors["decoder.blocks.2.attn.key.weight"], fused[384:768])
    kv = variables["decoder/layer_1/attention/linear_1/bias"]
    np.testing.assert_array_equal(tiny_en.tensors["decoder.blocks.1.cross_attn.value.bias"], kv[384:])
    assert not np.any(kv[:384])
    assert not tiny_en.tensors["encoder.blocks.0.attn.value.weight"].flags.owndata


def test_ct2_base_multilingual(base):
    hp = base.hparams
    assert hp == WhisperHParams(51865, 1500, 512, 8, 6, 448, 512, 8, 6, 80, 1)
    sp = base.special
    assert (sp.eot, sp.sot, sp.language("en"), sp.transcribe, sp.no_timestamps) == (50257, 50258, 50259, 50359, 50363)
    assert base.vocab[sp.language("de")] == b"<|de|>"


def test_convert_ct2_to_ggml(tiny_en_dir, tiny_en, tmp_path, capsys):
    out = tmp_path / "tiny.en.bin"
    assert convert_main([str(tiny_en_dir), str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    back = read_ggml(out)
    assert back.hparams == tiny_en.hparams
    assert back.vocab[:50256] == tiny_en.vocab[:50256]
    for name, tensor in tiny_en.tensors.items():
        np.testing.assert_array_equal(back.tensors[name].astype(np.float32), tensor.astype(np.float32), err_msg=name)
    np.testing.assert_array_equal(back.mel_filters, tiny_en.mel_filters)


def test_convert_reports_errors(tmp_path, capsys):
    assert convert_main([str(tmp_path / "missing"), str(tmp_path / "out.bin")]) == 1
    assert "model not found" in capsys.readouterr().err
    assert not (tmp_path / "out.bin").exists()


def test_missing_model(tmp_path):
    with pytest.raises(WhisperError, match="nothing.bin: model not found"):
        load_model_data(tmp_path / "nothing.bin")


def test_empty_model_file(tmp_path):
    path = tmp_path / "empty.bin"
    path.write_bytes(b"")
    with pytest.raises(WhisperError, match="empty.bin: model file is empty"):
        read_ggml(path)


def test_corrupt_model_file(tmp_path):
    path = tmp_path / "junk.bin"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(WhisperError, match="junk.bin: not a whisper.cpp ggml model file"):
        load_model_data(path)
    with pytest.raises(WhisperError, match="junk.bin: not a whisper.cpp ggml model \\(magic"):
        read_ggml(path)


def test_truncated_ggml(tmp_path):
    path = tmp_path / "m.bin"
    write_ggml(synthetic_model(), path)
    data = path.read_bytes()
    for cut in (30, 2000, len(data) // 2, len(data) - 3):
        path.write_bytes(data[:cut])
        with pytest.raises(WhisperError, match="m.bin: truncated model file"):
            read_ggml(path)


def test_ggml_with_wrong_tensor_shape(tmp_path):
    model = synthetic_model()
    path = tmp_path / "m.bin"
    write_ggml(model, path)
    data = bytearray(path.read_bytes())
    name = b"decoder.ln.weight"
    at = data.index(name)
    # The dims precede the name; claim 7 elements instead of 8 and drop one float.
    struct.pack_into("<i", data, at - 4, 7)
    del data[at + len(name):at + len(name) + 4]
    path.write_bytes(bytes(data))
    with pytest.raises(WhisperError, match="tensor decoder.ln.weight has shape \\(7,\\), expected \\(8,\\)"):
        read_ggml(path)


def test_ct2_directory_errors(tmp_path, tiny_en_dir):
    with pytest.raises(WhisperError, match="no model.bin"):
        read_ct2(tmp_path)
    with pytest.raises(WhisperError, match="directory has no model.bin"):
        load_model_data(tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "vocabulary.txt"):
        shutil.copyfile(tiny_en_dir / name, broken / name)
    with open(tiny_en_dir / "model.bin", "rb") as f:
        (broken / "model.bin").write_bytes(f.read(1 << 20))
    with pytest.raises(WhisperError, match="model.bin: truncated model file"):
        load_model_data(broken)
    (broken / "model.bin").write_bytes(b"\x63\x00\x00\x00" + bytes(64))
    with pytest.raises(WhisperError, match="not a supported CTranslate2 model \\(binary version 99"):
        load_model_data(broken)


def write_ct2_bin(path, variables: dict[str, np.ndarray], aliases: dict[str, str]) -> None:
    """CTranslate2 binary version 6, written from the format description."""
    ids = {np.dtype("float32"): 0, np.dtype("int8"): 1, np.dtype("int16"): 2, np.dtype("int32"): 3,
           np.dtype("float16"): 4}

    def string(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<H", len(raw) + 1) + raw + b"\0"

    with open(path, "wb") as f:
        f.write(struct.pack("<I", 6) + string("WhisperSpec") + struct.pack("<II", 3, len(variables)))
        for name, value in variables.items():
            if isinstance(value, tuple):  # ("bf16", uint16 bits)
                dtype_id, value = 5, value[1]
            else:
                dtype_id = ids[value.dtype]
            f.write(string(name) + struct.pack("<B", value.ndim) + struct.pack(f"<{value.ndim}I", *value.shape))
            f.write(struct.pack("<BI", dtype_id, value.nbytes) + np.ascontiguousarray(value).tobytes())
        f.write(struct.pack("<I", len(aliases)))
        for alias, target in aliases.items():
            f.write(string(alias) + string(target))


def test_ct2_int8_and_bfloat16_weights(tiny_en_dir, tiny_en, tmp_path):
    _, _, variables = read_ct2_variables(tiny_en_dir / "model.bin")
    variables = {k: v for k, v in variables.items() if k != "decoder/projection/weight"}
    key = "encoder/layer_1/ffn/linear_0/weight"
    w = variables[key].astype(np.float32)
    scale = (127.0 / np.abs(w).max(axis=1)).astype(np.float32)
    variables[key] = np.round(w * scale[:, None]).astype(np.int8)
    variables[key + "_scale"] = scale
    bf_key = "decoder/layer_0/ffn/layer_norm/gamma"
    bf_bits = (variables[bf_key].astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    variables[bf_key] = ("bf16", bf_bits)
    out = tmp_path / "ct2"
    out.mkdir()
    write_ct2_bin(out / "model.bin", variables, {"decoder/projection/weight": "decoder/embeddings/weight"})
    shutil.copyfile(tiny_en_dir / "vocabulary.txt", out / "vocabulary.txt")
    model = load_model_data(out)
    got = model.tensors["encoder.blocks.1.mlp.0.weight"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, w, rtol=0, atol=0.5 / scale.min())
    np.testing.assert_allclose(model.tensors["decoder.blocks.0.mlp_ln.weight"],
                               tiny_en.tensors["decoder.blocks.0.mlp_ln.weight"].astype(np.float32), rtol=2 ** -7)
    assert model.suppress_tokens == ()


def test_ct2_vocabulary_from_tokenizer_json(tiny_en_dir, tiny_en, tmp_path):
    (tmp_path / "model.bin").symlink_to(tiny_en_dir / "model.bin")
    shutil.copyfile(tiny_en_dir / "tokenizer.json", tmp_path / "tokenizer.json")
    assert load_model_data(tmp_path).vocab == tiny_en.vocab


def _with_hparam(path, index, value):
    data = bytearray(path.read_bytes())
    struct.pack_into("<i", data, 4 + 4 * index, value)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("ftype", [12345, -1, 4, 3002, 2010])
def test_ggml_unknown_ftype_is_refused(tmp_path, ftype):
    path = tmp_path / "m.bin"
    write_ggml(synthetic_model(), path)
    _with_hparam(path, 10, ftype)
    with pytest.raises(WhisperError, match=f"m.bin: unsupported whisper.cpp ftype {ftype}"):
        read_ggml(path)
    with pytest.raises(WhisperError, match=f"unsupported whisper.cpp ftype {ftype}"):
        load_model_data(path)


@pytest.mark.parametrize("index, name, value", [(4, "n_audio_layer", 1_000_000), (8, "n_text_layer", 1 << 30),
                                                (1, "n_audio_ctx", 10**9), (9, "n_mels", 100_000)])
def test_ggml_absurd_hparams_refused_before_tensors(tmp_path, index, name, value):
    path = tmp_path / "m.bin"
    write_ggml(synthetic_model(), path)
    _with_hparam(path, index, value)
    with pytest.raises(WhisperError, match=f"hyper-parameter {name} is {value}, more than any Whisper model"):
        read_ggml(path)


def test_ggml_hparams_needing_more_data_than_the_file(tmp_path, monkeypatch):
    path = tmp_path / "m.bin"
    write_ggml(synthetic_model(), path)
    _with_hparam(path, 4, 1000)  # plausible count, but the file holds 2 layers
    import metal_backend.whisper.ggml_format as ggml_format

    def no_tensor_reads(*args, **kwargs):
        raise AssertionError("tensors were read before the header was checked")

    monkeypatch.setattr(ggml_format, "_read_tensor", no_tensor_reads)
    with pytest.raises(WhisperError, match=r"m.bin: truncated model file, or a corrupt header: .*n_audio_layer 1000.* "
                                           r"need at least \d+ bytes of tensor data, but only \d+ bytes"):
        read_ggml(path)
