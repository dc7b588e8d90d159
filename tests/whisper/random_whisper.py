"""Random-weight Whisper models at a released size's real widths, and a CTranslate2 writer for them.

random_model keeps what a size's arithmetic depends on (n_state, heads, n_mels, vocabulary: the
special tokens and the logits' width) and cuts what only repeats it (layer counts, audio and text
positions) so a real-width large-v3 runs in seconds. Weights are scaled as trained ones are (about
1/sqrt(fan_in)), so activations stay in the range real models see and the f16 bounds of
test_backend_model apply. It is cached: the same arguments give the same object, which tests must
not modify.

write_ct2 writes the model as a CTranslate2 directory (model.bin binary version 6, config.json,
vocabulary.txt) the way ctranslate2's Whisper converter lays it out: fused self-attention QKV
(3d, d) with a zero key bias, cross-attention Q and fused KV (2d, d), the token embedding also the
output projection (an alias), num_heads scalars.
"""

from __future__ import annotations

import functools
import json
import struct
from dataclasses import replace
from pathlib import Path

import numpy as np

from metal_backend.whisper import SpecialTokens, WhisperHParams, WhisperModelData, mel_filters
from metal_backend.whisper.model_data import expected_shapes


@functools.lru_cache(maxsize=2)
def random_model(size: str, n_audio_layer: int = 1, n_text_layer: int | None = None, n_audio_ctx: int = 32,
                 n_text_ctx: int = 16, seed: int = 0) -> WhisperModelData:
    """A model of `size`'s widths with random weights (matrices and convs float16, the rest
    float32); n_text_layer None keeps the size's own count (2 for distil, 4 for turbo) up to 2."""
    real = WhisperHParams.for_size(size)
    hp = replace(real, n_audio_layer=n_audio_layer, n_audio_ctx=n_audio_ctx, n_text_ctx=n_text_ctx,
                 n_text_layer=min(real.n_text_layer, 2) if n_text_layer is None else n_text_layer)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in expected_shapes(hp).items():
        if name.endswith("ln.weight") or name.endswith("ln_post.weight") or "_ln.weight" in name:
            t = 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
        elif len(shape) == 1:
            t = 0.02 * rng.standard_normal(shape, dtype=np.float32)
        elif "positional_embedding" in name:
            t = 0.5 * rng.standard_normal(shape, dtype=np.float32)
        else:
            tensors[name] = _random_f16(rng, shape, int(np.prod(shape[1:])))
            continue
        tensors[name] = t
    special = SpecialTokens.for_hparams(hp)
    names = special.names(hp.n_vocab)
    vocab = [b"t%d" % i for i in range(special.eot)] + [names[i] for i in range(special.eot, hp.n_vocab)]
    model = WhisperModelData(hparams=hp, tensors=tensors, vocab=vocab, mel_filters=mel_filters(hp.n_mels),
                             source=f"random {size}")
    model.validate()
    return model


def _random_f16(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    """float16 of random sign and a magnitude uniform in [2^e, 2^(e+1)), 2^e about 1/(1.5 sqrt(fan_in))
    (standard deviation about 1/sqrt(fan_in)), made from random bits: a large-v3 token embedding is 66 M
    values, which normal floats take seconds to draw."""
    exponent = int(np.floor(np.log2(1.0 / (1.53 * np.sqrt(fan_in))))) + 15  # f16 biased exponent
    bits = rng.integers(0, 1 << 16, shape, dtype=np.uint16)
    bits &= np.uint16(0x83FF)  # keep the sign and mantissa bits
    bits |= np.uint16(exponent << 10)
    return bits.view(np.float16)


def random_mel(model: WhisperModelData, seed: int = 1) -> np.ndarray:
    """A (n_mels, 2 * n_audio_ctx) input in the range of Whisper's normalised log-mel."""
    hp = model.hparams
    return np.random.default_rng(seed).uniform(-1.0, 1.0, (hp.n_mels, 2 * hp.n_audio_ctx)).astype(np.float32)


# ---------------------------------------------------------------- CTranslate2 writer

_DTYPE_IDS = {np.dtype("float32"): 0, np.dtype("int8"): 1, np.dtype("int32"): 3, np.dtype("float16"): 4}


def _string(text: str) -> bytes:
    data = text.encode() + b"\0"
    return struct.pack("<H", len(data)) + data


def ct2_variables(model: WhisperModelData) -> dict[str, np.ndarray]:
    """The model's weights under CTranslate2's Whisper variable names."""
    t, hp = model.tensors, model.hparams
    out: dict[str, np.ndarray] = {}

    def norm(ct2: str, ggml: str) -> None:
        out[f"{ct2}/gamma"], out[f"{ct2}/beta"] = t[f"{ggml}.weight"], t[f"{ggml}.bias"]

    def linear(ct2: str, ggml: str) -> None:
        out[f"{ct2}/weight"], out[f"{ct2}/bias"] = t[f"{ggml}.weight"], t[f"{ggml}.bias"]

    def fused(ct2: str, ggml: str, parts: tuple[str, ...]) -> None:
        out[f"{ct2}/weight"] = np.concatenate([t[f"{ggml}.{p}.weight"] for p in parts])
        zero = np.zeros(hp.n_text_state, np.float32)
        out[f"{ct2}/bias"] = np.concatenate([zero if p == "key" else t[f"{ggml}.{p}.bias"] for p in parts])

    def block(ct2: str, ggml: str, cross: bool) -> None:
        norm(f"{ct2}/self_attention/layer_norm", f"{ggml}.attn_ln")
        fused(f"{ct2}/self_attention/linear_0", f"{ggml}.attn", ("query", "key", "value"))
        linear(f"{ct2}/self_attention/linear_1", f"{ggml}.attn.out")
        if cross:
            norm(f"{ct2}/attention/layer_norm", f"{ggml}.cross_attn_ln")
            linear(f"{ct2}/attention/linear_0", f"{ggml}.cross_attn.query")
            fused(f"{ct2}/attention/linear_1", f"{ggml}.cross_attn", ("key", "value"))
            linear(f"{ct2}/attention/linear_2", f"{ggml}.cross_attn.out")
        norm(f"{ct2}/ffn/layer_norm", f"{ggml}.mlp_ln")
        linear(f"{ct2}/ffn/linear_0", f"{ggml}.mlp.0")
        linear(f"{ct2}/ffn/linear_1", f"{ggml}.mlp.2")

    out["encoder/num_heads"] = np.array(hp.n_audio_head, np.int32)
    linear("encoder/conv1", "encoder.conv1")
    linear("encoder/conv2", "encoder.conv2")
    out["encoder/position_encodings/encodings"] = t["encoder.positional_embedding"]
    for i in range(hp.n_audio_layer):
        block(f"encoder/layer_{i}", f"encoder.blocks.{i}", cross=False)
    norm("encoder/layer_norm", "encoder.ln_post")
    out["decoder/num_heads"] = np.array(hp.n_text_head, np.int32)
    out["decoder/embeddings/weight"] = t["decoder.token_embedding.weight"]
    out["decoder/position_encodings/encodings"] = t["decoder.positional_embedding"]
    for i in range(hp.n_text_layer):
        block(f"decoder/layer_{i}", f"decoder.blocks.{i}", cross=True)
    norm("decoder/layer_norm", "decoder.ln")
    return out


def write_ct2(model: WhisperModelData, directory: Path, alignment_heads=None) -> Path:
    """Writes model as a CTranslate2 Whisper directory; alignment_heads, when given, go in config.json."""
    directory.mkdir(parents=True, exist_ok=True)
    variables = ct2_variables(model)
    with open(directory / "model.bin", "wb") as f:
        f.write(struct.pack("<I", 6) + _string("WhisperSpec") + struct.pack("<I", 3))
        f.write(struct.pack("<I", len(variables)))
        for name, array in variables.items():
            array = np.ascontiguousarray(array)
            f.write(_string(name) + struct.pack("<B", array.ndim) + struct.pack(f"<{array.ndim}I", *array.shape))
            f.write(struct.pack("<BI", _DTYPE_IDS[array.dtype], array.nbytes))
            f.write(memoryview(array).cast("B"))
        f.write(struct.pack("<I", 1) + _string("decoder/projection/weight") + _string("decoder/embeddings/weight"))
    config = {"suppress_ids": [1, 2]}
    if alignment_heads is not None:
        config["alignment_heads"] = [list(p) for p in alignment_heads]
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "vocabulary.txt").write_text("".join(v.decode() + "\n" for v in model.vocab), encoding="utf-8")
    return directory
