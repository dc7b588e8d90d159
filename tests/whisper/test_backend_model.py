"""Whisper on metal_backend (BackendWhisper graphs, the Whisper class) against the numpy reference
and real speech, on the best real device (mb.device()).

Accuracy bounds. The backend and tests/whisper/numpy_whisper.py use the same stored weights (f16
matrices are upcast exactly by both), so what differs is rounding: f32 sums in another order
(relative ~1e-6, negligible) and the values the backend keeps in f16 on purpose, as whisper.cpp
does, each rounded with relative error at most 2^-11 (~4.9e-4): the encoder's keys and values
(flash attention), the decoder's self-attention cache and the cross-attention keys and values.
One such rounding per attention layer perturbs that layer's output by at most ~2^-11 of its
magnitude, and LayerNorms keep magnitudes comparable from layer to layer, so we allow 2^-11 of the
reference's largest magnitude per attention layer the value passed through:
  encoder states:      n_audio_layer * 2^-11 * max|ref|
                       (tiny.en on jfk.wav: 0.024; measured 3e-3 with flash attention's f16 keys and
                       values, 1.3e-5 with the all-f32 mul_mat attention)
  first-step logits:  (n_audio_layer + n_text_layer) * 2^-11 * max|ref|   (0.08; measured 8e-3 / 5e-3)
"""

from __future__ import annotations

import importlib.util
import wave

import numpy as np
import pytest

import metal_backend as mb
from metal_backend.whisper import (
    BackendWhisper,
    GgmlType,
    GreedyDecoder,
    QuantizedTensor,
    Whisper,
    WhisperError,
    load_audio,
    load_model_data,
    mel_windows,
)
from metal_backend.whisper.convert import convert
from metal_backend.whisper.ggml_format import write_ggml
from whisper_testing import DOOR_TEXT, JFK_TEXT, MORNING_TEXT, normalize, require

CLIPS = [("jfk.wav", JFK_TEXT), ("door_light.wav", DOOR_TEXT), ("good_morning.wav", MORNING_TEXT)]
F16_EPS = 2.0 ** -11


@pytest.fixture(scope="module")
def jfk_mel(asset) -> np.ndarray:
    return mel_windows(load_audio(asset("jfk.wav")))[0]


@pytest.fixture(scope="module")
def jfk_reference(tiny_en_numpy, jfk_mel):
    return tiny_en_numpy.encode(jfk_mel)


@pytest.fixture(scope="module", params=["flash", "matmul"])
def tiny_en_backend(request, tiny_en) -> BackendWhisper:
    return BackendWhisper(tiny_en, device=mb.device(), threads=2, encoder_attention=request.param)


@pytest.fixture(scope="module")
def tiny_en_model(tiny_en_dir) -> Whisper:
    return Whisper.load(tiny_en_dir, device=mb.device(), threads=2)


@pytest.fixture(scope="module")
def tiny_en_ggml(tmp_path_factory, tiny_en_dir):
    path = tmp_path_factory.mktemp("ggml") / "ggml-tiny.en.bin"
    convert(str(tiny_en_dir), str(path))
    return path


def test_encoder_matches_numpy(tiny_en, tiny_en_backend, jfk_mel, jfk_reference):
    tiny_en_backend.encode(jfk_mel)
    ours = tiny_en_backend.encoder_output()
    ref = jfk_reference.encoded
    assert ours.shape == ref.shape == (1500, 384)
    bound = tiny_en.hparams.n_audio_layer * F16_EPS * np.abs(ref).max()
    assert np.abs(ours - ref).max() <= bound


def test_first_step_logits_match_numpy(tiny_en, tiny_en_backend, tiny_en_numpy, jfk_mel, jfk_reference):
    prompt = GreedyDecoder(tiny_en).prompt
    features = tiny_en_backend.encode(jfk_mel)
    ours = tiny_en_backend.decode(features, prompt, 0)
    ref = tiny_en_numpy.decode(jfk_reference, prompt, 0)
    assert ours.shape == ref.shape == (tiny_en.hparams.n_vocab,)
    hp = tiny_en.hparams
    bound = (hp.n_audio_layer + hp.n_text_layer) * F16_EPS * np.abs(ref).max()
    assert np.abs(ours - ref).max() <= bound


def test_kv_cache_steps_match_numpy(tiny_en, tiny_en_backend, tiny_en_numpy, jfk_mel, jfk_reference):
    # 40 positions: single-token steps cross from the 32-position cache graph to the 64 one.
    hp = tiny_en.hparams
    prompt = GreedyDecoder(tiny_en).prompt
    text = [int(t) for t in np.random.default_rng(0).integers(0, 50000, 40 - len(prompt))]
    feeds = [(prompt, 0)] + [([t], len(prompt) + i) for i, t in enumerate(text)]
    features = tiny_en_backend.encode(jfk_mel)
    bound = (hp.n_audio_layer + hp.n_text_layer) * F16_EPS
    for feed, offset in feeds:
        ours = tiny_en_backend.decode(features, feed, offset)
        ref = tiny_en_numpy.decode(jfk_reference, feed, offset)
        assert np.abs(ours - ref).max() <= bound * np.abs(ref).max(), f"offset {offset}"
    # The whole sequence fed at once, over the cache the steps filled.
    whole = tiny_en_backend.decode(features, prompt + text, 0)
    assert np.abs(whole - ours).max() <= bound * np.abs(ours).max()


def test_greedy_tokens_match_numpy_and_graphs_are_reused(tiny_en, tiny_en_backend, tiny_en_numpy, jfk_mel,
                                                         jfk_reference):
    decoder = GreedyDecoder(tiny_en)
    encoder_graph = tiny_en_backend.encoder_graph
    tokens = decoder.decode(tiny_en_backend, tiny_en_backend.encode(jfk_mel))
    assert tokens == decoder.decode(tiny_en_numpy, jfk_reference)
    # The prompt graph, then single-token graphs by cache length (one sequence each) (positions used, rounded up to 32);
    # keys are (windows, sequences, tokens, cache length, padded), windows 0 for the one-window decoder and
    # padded False where every sequence's prompt has the same length.
    built = dict(tiny_en_backend.decoder_graphs)
    n_prompt = len(decoder.prompt)
    ends = range(n_prompt + 1, n_prompt + len(tokens) + 1)
    assert {(0, 1, n_prompt, 32, False)} | {(0, 1, 1, 32 * -(-end // 32), False) for end in ends} <= set(built)
    # A second window runs on the same graphs.
    assert decoder.decode(tiny_en_backend, tiny_en_backend.encode(jfk_mel)) == tokens
    assert tiny_en_backend.encoder_graph is encoder_graph
    assert tiny_en_backend.decoder_graphs == built


def test_scheduler_places_every_node_on_the_device(tiny_en, tiny_en_backend, jfk_mel):
    features = tiny_en_backend.encode(jfk_mel)
    tiny_en_backend.decode(features, GreedyDecoder(tiny_en).prompt, 0)
    placements = tiny_en_backend.placements()
    assert "encoder" in placements and len(placements) >= 2
    for graph, counts in placements.items():
        assert set(counts) == {tiny_en_backend.backend.name}, graph


def test_encoder_nodes_are_named_after_model_parts(tiny_en_backend):
    """Profiles and graph dumps name each computing node after the weight or block it belongs to."""
    computing = [n for n in tiny_en_backend.encoder_graph.nodes
                 if n.op in ("MUL_MAT", "FLASH_ATTN_EXT", "SOFT_MAX", "NORM", "GELU_ERF", "IM2COL")]
    assert computing
    unnamed = [(n.op, n.shape) for n in computing if not n.name]
    assert not unnamed, unnamed
    names = {n.name for n in computing}
    assert {"encoder.conv1", "encoder.blocks.0.attn.qkv", "encoder.blocks.3.mlp.2"} <= names
    assert any(name.startswith("encoder.blocks.0.attn.") and name.endswith(("flash", "kq")) for name in names)


def test_cpu_workers_stay_awake_between_decoder_steps(tiny_en_backend):
    from metal_backend.whisper.backend_compute import DECODER_SPIN_US

    cpu = [b for b in tiny_en_backend.backends if "spin_us" in b.options]
    assert cpu, "no CPU backend among the model's backends"
    assert all(b.options["spin_us"] == DECODER_SPIN_US for b in cpu)


def test_decode_checks_its_arguments(tiny_en, tiny_en_backend, jfk_mel):
    features = tiny_en_backend.encode(jfk_mel)
    prompt = GreedyDecoder(tiny_en).prompt
    with pytest.raises(WhisperError, match="at least one token"):
        tiny_en_backend.decode(features, [], 0)
    tiny_en_backend.decode(features, prompt, 0)
    with pytest.raises(WhisperError, match="does not continue"):
        tiny_en_backend.decode(features, [400], len(prompt) + 1)
    with pytest.raises(WhisperError, match="token ids"):
        tiny_en_backend.decode(features, [tiny_en.hparams.n_vocab], len(prompt))
    with pytest.raises(WhisperError, match="text context"):
        tiny_en_backend.decode(features, [400] * (tiny_en.hparams.n_text_ctx + 1), 0)
    newer = tiny_en_backend.encode(jfk_mel)
    with pytest.raises(WhisperError, match="latest encode"):
        tiny_en_backend.decode(features, prompt, 0)
    tiny_en_backend.decode(newer, prompt, 0)
    with pytest.raises(WhisperError, match="mel has shape"):
        tiny_en_backend.encode(jfk_mel[:, :100])


@pytest.mark.parametrize("clip,expected", CLIPS, ids=[c for c, _ in CLIPS])
def test_tiny_en_transcripts(tiny_en_model, asset, clip, expected):
    result = tiny_en_model.transcribe(asset(clip))
    assert normalize(result.text) == normalize(expected)
    timings = result.timings
    assert timings["tokens"] > 0
    for key in ("load", "mel", "encode", "decode", "decode_per_token", "total"):
        assert timings[key] >= 0.0, key


@pytest.mark.parametrize("clip,expected", CLIPS, ids=[c for c, _ in CLIPS])
def test_converted_ggml_transcripts(tiny_en_ggml, asset, clip, expected):
    model = Whisper.load(tiny_en_ggml, threads=2)
    assert normalize(model.transcribe(asset(clip)).text) == normalize(expected)


def test_long_audio_in_windows(tiny_en_model, asset):
    # Two windows: the second encode replaces the first window's cross-attention keys and values.
    audio = np.concatenate([load_audio(asset("jfk.wav")), np.zeros(16000 * 25, np.float32),
                            load_audio(asset("door_light.wav"))])
    result = tiny_en_model.transcribe(audio)
    assert normalize(result.text) == normalize(f"{JFK_TEXT} {DOOR_TEXT}")
    # door_light is spoken from 36.0 to 39.1 s, in the second window (30 s on: the first ended on
    # a single timestamp, nothing said after it).
    starts = [s.start for s in result.segments]
    assert starts == sorted(starts) and 30.0 <= starts[-1] <= 36.5 and 38.0 <= result.segments[-1].end <= 41.0


def test_base_multilingual(base_dir, asset):
    model = Whisper.load(base_dir, threads=2)
    assert model.data.hparams.n_audio_layer == 6
    assert normalize(model.transcribe(asset("jfk.wav")).text) == normalize(JFK_TEXT)


def test_quantize_on_load_q8_0(tiny_en_dir, asset):
    model = Whisper.load(tiny_en_dir, threads=2, quantize="q8_0")
    embedding = model.compute.w["decoder.token_embedding.weight"]
    assert embedding.type == mb.q8_0
    assert model.compute.w["encoder.blocks.0.mlp.0.weight"].type == mb.q8_0
    assert normalize(model.transcribe(asset("jfk.wav")).text) == normalize(JFK_TEXT)


def test_compute_type_int8(tiny_en_dir, asset):
    # faster-whisper's spelling: q8_0 matrices and 8-bit activations in every product with them,
    # the encoder's many-token products included.
    model = Whisper.load(tiny_en_dir, threads=2, compute_type="int8")
    assert model.compute.w["encoder.blocks.0.mlp.0.weight"].type == mb.q8_0
    assert model.compute.int8_activations
    linear = [n for n in model.compute.encoder_graph.nodes if n.name == "encoder.blocks.0.mlp.0"]
    assert linear and linear[0].op_params[1] == 1
    # The vocabulary projection at every row count (1 row: greedy; 5: beam search) ...
    for rows in (1, 5):
        assert model.compute._build_decoder(rows, 1, 1).logits.op_params[1] == 1, rows
    # ... but the cross-attention keys keep f32 activations (8-bit ones lost words on the passage x5).
    key = [n for n in model.compute.encoder_graph.nodes if n.name == "decoder.blocks.0.cross_attn.key"]
    assert key and key[0].src[0].type == mb.q8_0 and key[0].op_params[1] == 0
    assert normalize(model.transcribe(asset("jfk.wav")).text) == normalize(JFK_TEXT)


def test_compute_type_int8_encoder_attention_types(tiny_en_dir):
    # The int8 compute type's encoder attention reads bf16 copies of the keys and values where the CPU
    # multiplies bf16 pairs (prop bf16_dot), f32 views of the qkv product (no copy) elsewhere; the
    # float32 compute type always reads the f32 views.
    bf16_dot = mb.device("CPU").props.extra["bf16_dot"]
    assert bf16_dot in ("avx512bf16", "f32")
    for compute_type in ("int8", "float32"):
        model = Whisper.load(tiny_en_dir, threads=2, compute_type=compute_type)
        flash = [n for n in model.compute.encoder_graph.nodes if n.op == "FLASH_ATTN_EXT"]
        assert len(flash) == model.compute.hp.n_audio_layer
        want = mb.bf16 if compute_type == "int8" and bf16_dot == "avx512bf16" else mb.f32
        assert all(n.src[1].type == want and n.src[2].type == want for n in flash), (compute_type, bf16_dot)


@pytest.mark.parametrize("qtype", ["q5_0", "q4_0"])
def test_quantize_on_load_lower_bits_runs(tiny_en_dir, asset, qtype):
    # Fewer bits may change words; the graph must still run and produce text.
    model = Whisper.load(tiny_en_dir, threads=2, quantize=qtype)
    assert model.compute.w["decoder.blocks.0.attn.qkv.weight"].type == getattr(mb, qtype)
    assert "country" in normalize(model.transcribe(asset("jfk.wav")).text)


def test_quantized_ggml_file_runs(tiny_en_ggml, tmp_path, asset):
    # A q8_0 file, as whisper.cpp's quantize tool writes one, runs on its stored blocks.
    def to_q8_0(name, array):
        data = np.frombuffer(mb.quantize(np.asarray(array, np.float32), mb.q8_0), np.uint8)
        return QuantizedTensor(GgmlType.Q8_0, tuple(array.shape), data.reshape(array.shape[0], -1))

    path = tmp_path / "ggml-tiny.en-q8_0.bin"
    write_ggml(load_model_data(tiny_en_ggml, quantize=to_q8_0), str(path))
    model = Whisper.load(path, threads=2)
    assert model.data.hparams.ftype == 2007
    assert model.compute.w["encoder.blocks.0.attn.out.weight"].type == mb.q8_0
    assert normalize(model.transcribe(asset("jfk.wav")).text) == normalize(JFK_TEXT)


# ---------------------------------------------------------------- errors


def test_missing_model(tmp_path):
    path = tmp_path / "nope.bin"
    with pytest.raises(WhisperError, match="nope.bin: model not found"):
        Whisper.load(path)


def test_corrupt_model(tmp_path, tiny_en_ggml):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00" * 100)
    with pytest.raises(WhisperError, match="junk.bin: not a whisper.cpp ggml model"):
        Whisper.load(junk)
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes(tiny_en_ggml.read_bytes()[:30_000_000])
    with pytest.raises(WhisperError, match="truncated.bin: truncated model file"):
        Whisper.load(truncated)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(WhisperError, match="empty: directory has no model.bin"):
        Whisper.load(empty_dir)


def test_bad_load_arguments(tiny_en_dir):
    with pytest.raises(WhisperError, match="unknown device 'NoSuchDevice'"):
        Whisper.load(tiny_en_dir, device="NoSuchDevice")
    with pytest.raises(WhisperError, match="cannot quantize to 'f16'"):
        Whisper.load(tiny_en_dir, quantize="f16")
    with pytest.raises(WhisperError, match="threads must be positive"):
        Whisper.load(tiny_en_dir, threads=0)
    with pytest.raises(WhisperError, match="unknown compute_type 'int4'"):
        Whisper.load(tiny_en_dir, compute_type="int4")


def test_unreadable_audio(tiny_en_model, tmp_path):
    missing = tmp_path / "missing.wav"
    with pytest.raises(WhisperError, match="missing.wav: audio file not found"):
        tiny_en_model.transcribe(missing)
    text = tmp_path / "notes.wav"
    text.write_text("not audio")
    with pytest.raises(WhisperError, match="notes.wav: not a WAV file"):
        tiny_en_model.transcribe(text)


def test_empty_audio(tiny_en_model, tmp_path):
    path = tmp_path / "empty.wav"
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(16000)
        f.writeframes(b"")
    with pytest.raises(WhisperError, match="empty.wav: WAV file contains no audio samples"):
        tiny_en_model.transcribe(path)
    with pytest.raises(WhisperError, match="audio is empty"):
        tiny_en_model.transcribe(np.zeros(0, np.float32))


# ---------------------------------------------------------------- whisper.cpp


def test_converted_file_runs_in_whisper_cpp(tiny_en_ggml, tiny_en_model, asset):
    require(importlib.util.find_spec("pywhispercpp") is not None, "pywhispercpp (pip install pywhispercpp)")
    from pywhispercpp.model import Model

    audio = load_audio(asset("jfk.wav"))
    theirs = Model(str(tiny_en_ggml), n_threads=2, print_progress=False, print_realtime=False)
    their_text = " ".join(segment.text.strip() for segment in theirs.transcribe(audio))
    ours = tiny_en_model.transcribe(audio).text
    assert normalize(their_text) == normalize(ours) == normalize(JFK_TEXT)
