"""Reader for CTranslate2 Whisper model directories (as faster-whisper uses them).

A directory holds model.bin, config.json and vocabulary.txt (or
vocabulary.json, or only a Hugging Face tokenizer.json). model.bin, binary
versions 4 to 6, all little-endian; a string is u16 (length + 1), UTF-8 bytes, NUL:
  u32 binary version, string spec name ("WhisperSpec"), u32 spec revision
  u32 variable count, then per variable:
      string name, u8 rank, u32[rank] dims (numpy order), u8 dtype id
      (0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16), u32 byte count, data
  u32 alias count, then per alias: string alias, string target name

Whisper's weights are mapped onto whisper.cpp's names: the fused
self-attention QKV (3d, d) and cross-attention KV (2d, d) matrices are split
(row slices of the mapping, no copy), key biases (zero in every converted
model, and cancelled by softmax anyway) are dropped, and the output
projection is the token embedding. int8/int16 weights, stored with a
`<name>_scale` variable, are dequantized to float32 as weight / scale.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from metal_backend.io import ByteCursor, map_file

from .errors import WhisperError
from .mel import mel_filters
from .model_data import SpecialTokens, Tensor, WhisperHParams, WhisperModelData, parse_alignment_heads
from .tokenizer import token_text_to_bytes

_SUPPORTED_BINARY_VERSIONS = (4, 5, 6)
_SPEC_NAME = "WhisperSpec"
_FLOAT32, _INT8, _INT16, _INT32, _FLOAT16, _BFLOAT16 = range(6)
_DTYPES = {
    _FLOAT32: np.dtype("<f4"), _INT8: np.dtype("i1"), _INT16: np.dtype("<i2"),
    _INT32: np.dtype("<i4"), _FLOAT16: np.dtype("<f2"), _BFLOAT16: np.dtype("<u2"),
}
_MAX_RANK = 8


def is_ct2_dir(path: str | os.PathLike) -> bool:
    """True when path is a directory holding a CTranslate2 model.bin."""
    path = Path(path)
    return path.is_dir() and (path / "model.bin").is_file()


def read_ct2_variables(path: str | os.PathLike) -> tuple[str, int, dict[str, np.ndarray]]:
    """Parses a CTranslate2 model.bin: (spec name, spec revision, variables by name).

    Arrays are zero-copy views of the memory-mapped file (bfloat16 comes back
    as float32); aliases resolve to their target's array.
    """
    path = Path(path)
    name = str(path)
    cur = ByteCursor(map_file(path, WhisperError), name, WhisperError)

    def string(what: str) -> str:
        (length,) = cur.ints("H", what)
        text = cur.take(length, what).tobytes()
        if length == 0 or text[-1] != 0:
            raise WhisperError(f"{name}: corrupt model file ({what} is not NUL-terminated at byte {cur.pos})")
        return text[:-1].decode("utf-8", errors="replace")

    (version,) = cur.ints("I", "the binary version")
    if version not in _SUPPORTED_BINARY_VERSIONS:
        raise WhisperError(f"{name}: not a supported CTranslate2 model (binary version {version}, "
                           f"supported {_SUPPORTED_BINARY_VERSIONS[0]}..{_SUPPORTED_BINARY_VERSIONS[-1]})")
    spec = string("the spec name")
    (revision,) = cur.ints("I", "the spec revision")
    (count,) = cur.ints("I", "the variable count")
    variables: dict[str, np.ndarray] = {}
    for _ in range(count):
        vname = string("a variable name")
        (rank,) = cur.ints("B", f"the rank of {vname}")
        if rank > _MAX_RANK:
            raise WhisperError(f"{name}: variable {vname} has rank {rank}")
        dims = cur.ints(f"{rank}I", f"the dimensions of {vname}")
        dtype_id, nbytes = cur.ints("BI", f"the type of {vname}")
        if dtype_id not in _DTYPES:
            raise WhisperError(f"{name}: variable {vname} has unknown dtype id {dtype_id}")
        dtype = _DTYPES[dtype_id]
        n_elements = int(np.prod(dims, dtype=np.int64))
        if nbytes != n_elements * dtype.itemsize:
            raise WhisperError(f"{name}: variable {vname} holds {nbytes} bytes, "
                               f"{dims} of {dtype} needs {n_elements * dtype.itemsize}")
        array = cur.take(nbytes, f"the data of {vname}").view(dtype).reshape(dims)
        if dtype_id == _BFLOAT16:
            array = (array.astype(np.uint32) << 16).view(np.float32)
        variables[vname] = array
    (n_aliases,) = cur.ints("I", "the alias count")
    for _ in range(n_aliases):
        alias = string("an alias")
        target = string("an alias target")
        if target not in variables:
            raise WhisperError(f"{name}: alias {alias} points at unknown variable {target}")
        variables[alias] = variables[target]
    return spec, revision, variables


def read_ct2(path: str | os.PathLike) -> WhisperModelData:
    """Loads a CTranslate2 Whisper model directory into whisper.cpp's tensor names."""
    directory = Path(path)
    if not directory.exists():
        raise WhisperError(f"{directory}: model directory not found")
    if not directory.is_dir():
        raise WhisperError(f"{directory}: expected a CTranslate2 model directory")
    bin_path = directory / "model.bin"
    if not bin_path.is_file():
        raise WhisperError(f"{directory}: no model.bin in this directory (not a CTranslate2 model)")
    spec, _revision, variables = read_ct2_variables(bin_path)
    if spec != _SPEC_NAME:
        raise WhisperError(f"{bin_path}: CTranslate2 model is a {spec}, not a {_SPEC_NAME}")
    source = str(bin_path)
    tensors = _WeightMapper(variables, source).map()

    n_vocab, d = tensors["decoder.token_embedding.weight"].shape
    n_audio_head = _scalar(variables, "encoder/num_heads", source)
    n_text_head = _scalar(variables, "decoder/num_heads", source)
    hparams = WhisperHParams(
        n_vocab=n_vocab,
        n_audio_ctx=tensors["encoder.positional_embedding"].shape[0],
        n_audio_state=tensors["encoder.conv1.weight"].shape[0],
        n_audio_head=n_audio_head,
        n_audio_layer=_count_layers(variables, "encoder"),
        n_text_ctx=tensors["decoder.positional_embedding"].shape[0],
        n_text_state=d,
        n_text_head=n_text_head,
        n_text_layer=_count_layers(variables, "decoder"),
        n_mels=tensors["encoder.conv1.weight"].shape[1],
        ftype=1,
    )
    hparams.validate(source)
    config = _read_config(directory)
    model = WhisperModelData(
        hparams=hparams,
        tensors=tensors,
        vocab=_read_vocabulary(directory, hparams),
        mel_filters=mel_filters(hparams.n_mels),
        source=source,
        suppress_tokens=tuple(int(t) for t in config.get("suppress_ids", ())),
        alignment_heads=(parse_alignment_heads(config["alignment_heads"], hparams, source)
                         if "alignment_heads" in config else ()),
    )
    model.validate()
    return model


def _scalar(variables: dict[str, np.ndarray], key: str, source: str) -> int:
    if key not in variables or variables[key].size != 1:
        raise WhisperError(f"{source}: missing scalar {key}")
    return int(variables[key].reshape(()))


def _count_layers(variables: dict[str, np.ndarray], stack: str) -> int:
    n = 0
    while any(k.startswith(f"{stack}/layer_{n}/") for k in variables):
        n += 1
    return n


class _WeightMapper:
    """Builds whisper.cpp-named tensors out of CTranslate2 variables."""

    def __init__(self, variables: dict[str, np.ndarray], source: str):
        self.v = variables
        self.source = source
        self.out: dict[str, Tensor] = {}

    def get(self, key: str) -> np.ndarray:
        if key not in self.v:
            raise WhisperError(f"{self.source}: CTranslate2 Whisper model lacks variable {key}")
        array = self.v[key]
        scale_key = key + "_scale"
        if array.dtype.kind == "i" and scale_key in self.v:
            # CTranslate2 quantizes per output row: q = round(w * scale).
            scale = np.asarray(self.v[scale_key], dtype=np.float32)
            scale = scale.reshape((-1,) + (1,) * (array.ndim - 1)) if scale.size > 1 else scale.reshape(())
            array = array.astype(np.float32) / scale
        elif array.dtype.kind != "f":
            raise WhisperError(f"{self.source}: variable {key} is {array.dtype} without a scale")
        return array

    def linear(self, ct2: str, ggml: str, bias: bool = True) -> None:
        self.out[f"{ggml}.weight"] = self.get(f"{ct2}/weight")
        if bias:
            self.out[f"{ggml}.bias"] = self.get(f"{ct2}/bias")

    def norm(self, ct2: str, ggml: str) -> None:
        self.out[f"{ggml}.weight"] = self.get(f"{ct2}/gamma")
        self.out[f"{ggml}.bias"] = self.get(f"{ct2}/beta")

    def split(self, ct2: str, ggml_prefix: str, parts: tuple[str, ...]) -> None:
        weight = self.get(f"{ct2}/weight")
        bias = self.get(f"{ct2}/bias")
        d = weight.shape[1]
        if weight.shape[0] != d * len(parts):
            raise WhisperError(f"{self.source}: fused projection {ct2} is {weight.shape}, "
                               f"expected ({d * len(parts)}, {d})")
        for i, part in enumerate(parts):
            self.out[f"{ggml_prefix}.{part}.weight"] = weight[i * d:(i + 1) * d]
            if part != "key":
                self.out[f"{ggml_prefix}.{part}.bias"] = bias[i * d:(i + 1) * d]

    def block(self, ct2: str, ggml: str, cross: bool) -> None:
        self.norm(f"{ct2}/self_attention/layer_norm", f"{ggml}.attn_ln")
        self.split(f"{ct2}/self_attention/linear_0", f"{ggml}.attn", ("query", "key", "value"))
        self.linear(f"{ct2}/self_attention/linear_1", f"{ggml}.attn.out")
        if cross:
            self.norm(f"{ct2}/attention/layer_norm", f"{ggml}.cross_attn_ln")
            self.linear(f"{ct2}/attention/linear_0", f"{ggml}.cross_attn.query")
            self.split(f"{ct2}/attention/linear_1", f"{ggml}.cross_attn", ("key", "value"))
            self.linear(f"{ct2}/attention/linear_2", f"{ggml}.cross_attn.out")
        self.norm(f"{ct2}/ffn/layer_norm", f"{ggml}.mlp_ln")
        self.linear(f"{ct2}/ffn/linear_0", f"{ggml}.mlp.0")
        self.linear(f"{ct2}/ffn/linear_1", f"{ggml}.mlp.2")

    def map(self) -> dict[str, Tensor]:
        self.linear("encoder/conv1", "encoder.conv1")
        self.linear("encoder/conv2", "encoder.conv2")
        self.out["encoder.positional_embedding"] = self.get("encoder/position_encodings/encodings")
        for i in range(_count_layers(self.v, "encoder")):
            self.block(f"encoder/layer_{i}", f"encoder.blocks.{i}", cross=False)
        self.norm("encoder/layer_norm", "encoder.ln_post")

        embedding = self.get("decoder/embeddings/weight")
        projection = self.v.get("decoder/projection/weight")
        # whisper.cpp has no separate output projection: it must be the embedding.
        if projection is not None and projection is not self.v["decoder/embeddings/weight"] \
                and not np.array_equal(projection, self.v["decoder/embeddings/weight"]):
            raise WhisperError(f"{self.source}: decoder projection differs from the token embedding")
        self.out["decoder.token_embedding.weight"] = embedding
        self.out["decoder.positional_embedding"] = self.get("decoder/position_encodings/encodings")
        for i in range(_count_layers(self.v, "decoder")):
            self.block(f"decoder/layer_{i}", f"decoder.blocks.{i}", cross=True)
        self.norm("decoder/layer_norm", "decoder.ln")
        return self.out


def _read_config(directory: Path) -> dict:
    path = directory / "config.json"
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WhisperError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise WhisperError(f"{path}: expected a JSON object")
    return config


def _read_vocabulary(directory: Path, hparams: WhisperHParams) -> list[bytes]:
    txt, js, tok = directory / "vocabulary.txt", directory / "vocabulary.json", directory / "tokenizer.json"
    if txt.is_file():
        # One token per line; GPT-2's alphabet has no newline characters.
        tokens = txt.read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        source = txt
    elif js.is_file():
        try:
            tokens = json.loads(js.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise WhisperError(f"{js}: not valid JSON ({exc})") from None
        source = js
    elif tok.is_file():
        tokens = _tokens_from_tokenizer_json(tok, hparams.n_vocab)
        source = tok
    else:
        raise WhisperError(f"{directory}: no vocabulary.txt, vocabulary.json or tokenizer.json")

    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise WhisperError(f"{source}: expected a list of token strings")
    if len(tokens) > hparams.n_vocab:
        raise WhisperError(f"{source}: {len(tokens)} tokens, more than the model's {hparams.n_vocab}")
    eot = SpecialTokens.for_hparams(hparams).eot
    # Only special tokens may be missing (their names follow from their ids): an empty or truncated
    # file would otherwise load, and every text token past its end would read "[_extra_token_N]".
    if len(tokens) <= eot:
        raise WhisperError(f"{source}: {len(tokens)} tokens, fewer than the model's {eot} text tokens and "
                           f"<|endoftext|> (the model has {hparams.n_vocab}); the file is empty, truncated or "
                           "not this model's")
    special = SpecialTokens.for_hparams(hparams).names(hparams.n_vocab)
    vocab = []
    for i, text in enumerate(tokens):
        if i >= eot:
            vocab.append(text.encode("utf-8"))
            continue
        try:
            vocab.append(token_text_to_bytes(text))
        except WhisperError as exc:
            raise WhisperError(f"{source}: line {i + 1}: {exc}") from None
    # Models converted with a short vocabulary get openai-whisper's names for the rest.
    vocab += [special.get(i, b"[_extra_token_%d]" % i) for i in range(len(vocab), hparams.n_vocab)]
    if vocab[eot] != special[eot]:
        raise WhisperError(f"{source}: token {eot} is {vocab[eot]!r}, expected {special[eot]!r}; "
                           "the vocabulary does not match the model")
    return vocab


def _tokens_from_tokenizer_json(path: Path, n_vocab: int) -> list[str]:
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
        by_id = {int(i): t for t, i in spec["model"]["vocab"].items()}
        by_id.update({int(a["id"]): a["content"] for a in spec.get("added_tokens", ())})
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise WhisperError(f"{path}: not a Hugging Face tokenizer file ({exc})") from None
    n = min(n_vocab, max(by_id) + 1) if by_id else 0  # an empty one is refused with the sizes
    missing = [i for i in range(n) if i not in by_id]
    if missing:
        raise WhisperError(f"{path}: token id {missing[0]} is missing")
    return [by_id[i] for i in range(n)]
