"""Whisper models packed in GGUF files (read side; mb.gguf parses the container).

whisper.cpp has no GGUF form of its own, so this states one that keeps whisper.cpp's names:
  general.architecture   "whisper"
  whisper.<hparam>       u32/i32 for each of whisper.cpp's hyper-parameters: n_vocab n_audio_ctx
                         n_audio_state n_audio_head n_audio_layer n_text_ctx n_text_state
                         n_text_head n_text_layer n_mels (and optionally ftype)
  tokenizer.ggml.tokens  the n_vocab tokens as strings in GPT-2's byte-to-unicode spelling (the one
                         llama.cpp's GGUF files use for byte-level BPE vocabularies, so any byte
                         string is valid UTF-8); fewer than n_vocab means the rest are the special
                         tokens whisper.cpp derives from n_vocab
  whisper.alignment_heads   optional: flat [layer, head, layer, head, ...]
  whisper.suppress_tokens   optional: token ids
  tensors                whisper.cpp's (openai-whisper's) names and shapes, e.g.
                         encoder.blocks.0.attn.query.weight, in f32, f16 or q4_0/q4_1/q5_0/q5_1/q8_0;
                         conv biases 1-D or (d, 1) as whisper.cpp stores them; plus an optional f32
                         mel_filters (n_mels, 201) (else the Slaney bank openai-whisper ships)
Anything missing or misshapen raises WhisperError saying what.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from metal_backend.io import gguf
from metal_backend.io.ggml_types import NUMPY_TYPES, GgmlType, QuantizedTensor

from .errors import WhisperError
from .mel import N_FFT, mel_filters
from .model_data import SpecialTokens, Tensor, WhisperHParams, WhisperModelData, parse_alignment_heads

ARCHITECTURE = "whisper"
HPARAM_KEYS = ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
               "n_text_state", "n_text_head", "n_text_layer", "n_mels")
TOKENS_KEY = "tokenizer.ggml.tokens"
MEL_FILTERS = "mel_filters"


def is_gguf_file(path: str | os.PathLike) -> bool:
    """True when the file starts with the GGUF magic."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == gguf.MAGIC
    except OSError:
        return False


@lru_cache(maxsize=1)
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map of the 256 byte values to printable characters: the printable Latin-1
    bytes stand for themselves, the others for 256 + their rank among them."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    out = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in out:
            out[b] = chr(256 + extra)
            extra += 1
    return out


@lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    return {c: b for b, c in byte_to_unicode().items()}


def token_to_text(token: bytes) -> str:
    """A token's bytes in the byte-to-unicode spelling tokenizer.ggml.tokens holds."""
    table = byte_to_unicode()
    return "".join([table[b] for b in token])


def text_to_token(text: str, source: str, index: int) -> bytes:
    inverse = _unicode_to_byte()
    try:
        return bytes([inverse[c] for c in text])
    except KeyError as e:
        raise WhisperError(f"{source}: token {index} ({text!r}) has the character {e.args[0]!r}, which the "
                           "byte-to-unicode spelling of tokenizer.ggml.tokens does not use") from None


def _int(meta: dict, key: str, source: str) -> int:
    if key not in meta:
        raise WhisperError(f"{source}: GGUF metadata has no {key} (a whisper GGUF file states every "
                           f"hyper-parameter: {', '.join('whisper.' + k for k in HPARAM_KEYS)})")
    value = meta[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise WhisperError(f"{source}: GGUF metadata {key} is {value!r}, not an integer")
    return value


def read_gguf(path: str | os.PathLike) -> WhisperModelData:
    """Loads a Whisper model from a GGUF file laid out as this module states. float tensors are
    views of the file's copy-on-write mapping; quantized ones QuantizedTensor over it."""
    source = str(Path(path))
    try:
        f = gguf.open(path)
    except gguf.GGUFError as e:
        raise WhisperError(str(e)) from None
    meta = f.metadata
    arch = meta.get("general.architecture")
    if arch != ARCHITECTURE:
        raise WhisperError(f"{source}: GGUF general.architecture is {arch!r}, not {ARCHITECTURE!r} "
                           "(not a Whisper model)")
    values = [_int(meta, f"whisper.{k}", source) for k in HPARAM_KEYS]
    ftype = _int(meta, "whisper.ftype", source) if "whisper.ftype" in meta else 1
    hparams = WhisperHParams(*values, ftype=ftype)
    hparams.validate(source)

    tokens = meta.get(TOKENS_KEY)
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise WhisperError(f"{source}: GGUF metadata has no {TOKENS_KEY} string array (the vocabulary)")
    if len(tokens) > hparams.n_vocab:
        raise WhisperError(f"{source}: {TOKENS_KEY} holds {len(tokens)} tokens, more than n_vocab "
                           f"{hparams.n_vocab}")
    vocab = [text_to_token(t, source, i) for i, t in enumerate(tokens)]
    special = SpecialTokens.for_hparams(hparams).names(hparams.n_vocab)
    vocab += [special.get(i, b"[_extra_token_%d]" % i) for i in range(len(vocab), hparams.n_vocab)]

    tensors: dict[str, Tensor] = {}
    filters = None
    for info in f.tensors:
        array = _tensor(f, info, source)
        if info.name == MEL_FILTERS:
            filters = np.asarray(array, np.float32)
            continue
        tensors[info.name] = array
    if filters is None:
        filters = mel_filters(hparams.n_mels, N_FFT)

    heads: tuple[tuple[int, int], ...] = ()
    if "whisper.alignment_heads" in meta:
        flat = meta["whisper.alignment_heads"]
        if not isinstance(flat, list) or len(flat) % 2:
            raise WhisperError(f"{source}: whisper.alignment_heads must be a flat list of layer, head pairs "
                               f"(got {flat!r})")
        heads = parse_alignment_heads([list(flat[i:i + 2]) for i in range(0, len(flat), 2)], hparams, source)
    suppress: tuple[int, ...] = ()
    if "whisper.suppress_tokens" in meta:
        ids = meta["whisper.suppress_tokens"]
        if not isinstance(ids, list) or not all(isinstance(i, int) and 0 <= i < hparams.n_vocab for i in ids):
            raise WhisperError(f"{source}: whisper.suppress_tokens must be token ids below n_vocab "
                               f"{hparams.n_vocab}")
        suppress = tuple(ids)

    model = WhisperModelData(hparams=hparams, tensors=tensors, vocab=vocab, mel_filters=filters, source=source,
                             suppress_tokens=suppress, alignment_heads=heads)
    model.validate()
    return model


def _tensor(f: "gguf.GGUFFile", info: "gguf.TensorInfo", source: str) -> Tensor:
    try:
        ttype = GgmlType(info.type.id)
    except ValueError:
        known = ", ".join(t.name.lower() for t in GgmlType)
        raise WhisperError(f"{source}: tensor {info.name} is {info.type.name}; a Whisper model's tensors "
                           f"must be one of {known}") from None
    raw = np.frombuffer(f.tensor_bytes(info.name), np.uint8)
    shape = tuple(info.shape)
    if ttype.is_quantized:
        rows = int(np.prod(shape[:-1], dtype=np.int64))
        return QuantizedTensor(ttype, shape, raw.reshape(rows, -1))
    array = raw.view(NUMPY_TYPES[ttype]).reshape(shape)
    if info.name.endswith(".bias"):
        array = array.reshape(-1)  # whisper.cpp's conv biases are (d, 1)
    return array
