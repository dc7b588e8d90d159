"""The in-memory form of a Whisper model that every loader produces.

Tensor names and numpy-order shapes follow whisper.cpp (which keeps
openai-whisper's PyTorch names): e.g. encoder.blocks.0.attn.query.weight is
(n_state, n_state). Biases, including the conv biases, are 1-D. Key
projections have no bias (a key bias shifts every score of a query by the
same amount, which softmax cancels).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from metal_backend.io.ggml_types import QuantizedTensor

from .errors import WhisperError
from .mel import N_FFT
from .model_sizes import N_AUDIO_CTX, N_TEXT_CTX, model_size, published_alignment_heads

Tensor = Union[np.ndarray, QuantizedTensor]

# Language codes in token order; the first n_languages of them are in a model.
LANGUAGES = (
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it",
    "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur",
    "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn",
    "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si",
    "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo",
    "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha",
    "ba", "jw", "su", "yue",
)

# Vocabulary sizes: 50257 (English) or 50258 (multilingual) text tokens, the
# special tokens, and 1501 timestamp tokens (0.00 .. 30.00 s).
_N_TIMESTAMPS = 1501
_N_VOCAB_WITHOUT_LANGUAGES = 51765

# Upper bounds on the hyper-parameters, far above every released Whisper (large-v3: 32 layers of
# state 1280 with 20 heads, 1500 audio and 448 text positions, 128 mel bins) yet low enough that a
# corrupt header is refused at once instead of after building millions of tensor descriptions.
_MAX_HPARAMS = {
    "n_audio_ctx": 1 << 16, "n_audio_state": 1 << 14, "n_audio_head": 1 << 10, "n_audio_layer": 1 << 10,
    "n_text_ctx": 1 << 16, "n_text_state": 1 << 14, "n_text_head": 1 << 10, "n_text_layer": 1 << 10,
    "n_mels": 1 << 10,
}

@dataclass(frozen=True)
class WhisperHParams:
    """Hyper-parameters, in the order whisper.cpp stores them."""

    n_vocab: int
    n_audio_ctx: int
    n_audio_state: int
    n_audio_head: int
    n_audio_layer: int
    n_text_ctx: int
    n_text_state: int
    n_text_head: int
    n_text_layer: int
    n_mels: int
    ftype: int = 1

    @classmethod
    def for_size(cls, name: str, ftype: int = 1) -> "WhisperHParams":
        """The hyper-parameters of a released size ("tiny.en" ... "large-v3-turbo", "distil-large-v3":
        model_sizes.SIZES and ALIASES); WhisperError lists the known names for another."""
        try:
            s = model_size(name)
        except KeyError as exc:
            raise WhisperError(exc.args[0]) from None
        return cls(s.n_vocab, N_AUDIO_CTX, s.n_state, s.n_head, s.n_audio_layer, N_TEXT_CTX, s.n_state,
                   s.n_head, s.n_text_layer, s.n_mels, ftype)

    @property
    def is_multilingual(self) -> bool:
        """Multilingual vocabularies have one more text token (and at least 51865 ids)."""
        return self.n_vocab >= 51865

    @property
    def n_languages(self) -> int:
        """Number of language tokens in the vocabulary."""
        return self.n_vocab - _N_VOCAB_WITHOUT_LANGUAGES - int(self.is_multilingual)

    def validate(self, source: str) -> None:
        """Raises WhisperError when the values cannot describe a Whisper model."""
        for name, value in vars(self).items():
            if name != "ftype" and value <= 0:
                raise WhisperError(f"{source}: hyper-parameter {name} is {value}, must be positive")
            if value > _MAX_HPARAMS.get(name, value):
                raise WhisperError(f"{source}: hyper-parameter {name} is {value}, more than any Whisper model "
                                   f"(at most {_MAX_HPARAMS[name]} accepted)")
        if self.n_audio_state % self.n_audio_head or self.n_text_state % self.n_text_head:
            raise WhisperError(f"{source}: state size is not a multiple of the head count "
                               f"({self.n_audio_state}/{self.n_audio_head}, {self.n_text_state}/{self.n_text_head})")
        if self.n_audio_state != self.n_text_state:
            raise WhisperError(f"{source}: audio and text state sizes differ "
                               f"({self.n_audio_state} vs {self.n_text_state})")
        if not 0 < self.n_languages <= len(LANGUAGES):
            raise WhisperError(f"{source}: vocabulary size {self.n_vocab} is not a Whisper vocabulary")


@dataclass(frozen=True)
class SpecialTokens:
    """Ids of Whisper's special tokens, all derived from the vocabulary size."""

    eot: int
    sot: int
    languages: tuple[str, ...]
    translate: int
    transcribe: int
    start_of_lm: int
    start_of_prev: int
    no_speech: int
    no_timestamps: int
    timestamp_begin: int

    @classmethod
    def for_hparams(cls, hparams: WhisperHParams) -> "SpecialTokens":
        """The special token ids of a model with these hyper-parameters."""
        eot = 50256 + int(hparams.is_multilingual)
        sot = eot + 1
        after_languages = sot + 1 + hparams.n_languages
        return cls(
            eot=eot,
            sot=sot,
            languages=LANGUAGES[:hparams.n_languages],
            translate=after_languages,
            transcribe=after_languages + 1,
            start_of_lm=after_languages + 2,
            start_of_prev=after_languages + 3,
            no_speech=after_languages + 4,
            no_timestamps=after_languages + 5,
            timestamp_begin=after_languages + 6,
        )

    def language(self, code: str) -> int:
        """Token id of a language code such as "en"."""
        try:
            return self.sot + 1 + self.languages.index(code)
        except ValueError:
            raise WhisperError(f"unknown language {code!r} for this model") from None

    def names(self, n_vocab: int) -> dict[int, bytes]:
        """openai-whisper's spelling of every special and timestamp token, by id."""
        named = {
            self.eot: "<|endoftext|>",
            self.sot: "<|startoftranscript|>",
            self.translate: "<|translate|>",
            self.transcribe: "<|transcribe|>",
            self.start_of_lm: "<|startoflm|>",
            self.start_of_prev: "<|startofprev|>",
            self.no_speech: "<|nocaptions|>",
            self.no_timestamps: "<|notimestamps|>",
        }
        for i, code in enumerate(self.languages):
            named[self.sot + 1 + i] = f"<|{code}|>"
        for i in range(n_vocab - self.timestamp_begin):
            named[self.timestamp_begin + i] = f"<|{i * 0.02:.2f}|>"
        return {k: v.encode() for k, v in named.items()}


def default_alignment_heads(hp: WhisperHParams) -> tuple[tuple[int, int], ...]:
    """The alignment heads of a model whose file does not list them: the published ones of the
    released size it has the dimensions of (model_sizes; large-v2's for a large-v1/v2 file),
    otherwise every head of the last half of the decoder layers (what openai-whisper uses before a
    size's heads are known, and for the distilled models)."""
    known = published_alignment_heads(hp)
    if known:
        return known
    return tuple((layer, head) for layer in range(hp.n_text_layer // 2, hp.n_text_layer)
                 for head in range(hp.n_text_head))


def parse_alignment_heads(value: object, hp: WhisperHParams, source: str) -> tuple[tuple[int, int], ...]:
    """Checked (layer, head) pairs from a config's alignment_heads list; WhisperError names the
    source and the bad entry when one is not a pair of in-range integers."""
    if not isinstance(value, (list, tuple)) or not value:
        raise WhisperError(f"{source}: alignment_heads must be a non-empty list of [layer, head] pairs "
                           f"(got {value!r})")
    heads = []
    for pair in value:
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in pair)):
            raise WhisperError(f"{source}: alignment head {pair!r} is not a [layer, head] pair of integers")
        layer, head = pair
        if not (0 <= layer < hp.n_text_layer and 0 <= head < hp.n_text_head):
            raise WhisperError(f"{source}: alignment head [{layer}, {head}] is outside the decoder's "
                               f"{hp.n_text_layer} layers x {hp.n_text_head} heads")
        heads.append((layer, head))
    return tuple(sorted(set(heads)))


def expected_shapes(hp: WhisperHParams) -> dict[str, tuple[int, ...]]:
    """Every tensor of a Whisper model with its numpy-order shape, in whisper.cpp's names."""
    d, dt = hp.n_audio_state, hp.n_text_state
    shapes: dict[str, tuple[int, ...]] = {
        "encoder.positional_embedding": (hp.n_audio_ctx, d),
        "encoder.conv1.weight": (d, hp.n_mels, 3),
        "encoder.conv1.bias": (d,),
        "encoder.conv2.weight": (d, d, 3),
        "encoder.conv2.bias": (d,),
        "encoder.ln_post.weight": (d,),
        "encoder.ln_post.bias": (d,),
        "decoder.positional_embedding": (hp.n_text_ctx, dt),
        "decoder.token_embedding.weight": (hp.n_vocab, dt),
        "decoder.ln.weight": (dt,),
        "decoder.ln.bias": (dt,),
    }
    for i in range(hp.n_audio_layer):
        shapes.update(_block_shapes(f"encoder.blocks.{i}", d, cross=False))
    for i in range(hp.n_text_layer):
        shapes.update(_block_shapes(f"decoder.blocks.{i}", dt, cross=True))
    return shapes


def _block_shapes(prefix: str, d: int, cross: bool) -> dict[str, tuple[int, ...]]:
    shapes = {
        f"{prefix}.mlp_ln.weight": (d,),
        f"{prefix}.mlp_ln.bias": (d,),
        f"{prefix}.mlp.0.weight": (4 * d, d),
        f"{prefix}.mlp.0.bias": (4 * d,),
        f"{prefix}.mlp.2.weight": (d, 4 * d),
        f"{prefix}.mlp.2.bias": (d,),
    }
    for attn in ("attn", "cross_attn") if cross else ("attn",):
        shapes.update({
            f"{prefix}.{attn}_ln.weight": (d,),
            f"{prefix}.{attn}_ln.bias": (d,),
            f"{prefix}.{attn}.query.weight": (d, d),
            f"{prefix}.{attn}.query.bias": (d,),
            f"{prefix}.{attn}.key.weight": (d, d),
            f"{prefix}.{attn}.value.weight": (d, d),
            f"{prefix}.{attn}.value.bias": (d,),
            f"{prefix}.{attn}.out.weight": (d, d),
            f"{prefix}.{attn}.out.bias": (d,),
        })
    return shapes


def is_matrix(name: str) -> bool:
    """True for the linear-layer weights and the token embedding: what ggml quantizes."""
    return name.endswith(".weight") and (
        ".attn." in name or ".cross_attn." in name or ".mlp." in name
        or name == "decoder.token_embedding.weight")


@dataclass
class WhisperModelData:
    """A loaded Whisper model, independent of the file format it came from.

    tensors hold each tensor in its stored dtype (float16 stays float16, and
    is often a zero-copy view of a memory-mapped file); quantized tensors are
    QuantizedTensor. vocab[i] is the byte string of token i for every id below
    n_vocab (special tokens spelled as openai-whisper spells them).
    suppress_tokens are the "non-speech" token ids a CTranslate2 config lists
    (empty when the file does not say). alignment_heads are the (decoder layer,
    head) pairs a CTranslate2 config lists for word timestamps (empty when the
    file does not say: word_alignment_heads then gives the per-size defaults).
    """

    hparams: WhisperHParams
    tensors: dict[str, Tensor]
    vocab: list[bytes]
    mel_filters: np.ndarray
    source: str = ""
    suppress_tokens: tuple[int, ...] = field(default_factory=tuple)
    alignment_heads: tuple[tuple[int, int], ...] = field(default_factory=tuple)

    @property
    def special(self) -> SpecialTokens:
        """The model's special token ids."""
        return SpecialTokens.for_hparams(self.hparams)

    @functools.cached_property
    def blank_token_ids(self) -> tuple[int, ...]:
        """The ids below end-of-text whose text is one space (what suppress_blank masks at a
        segment's first step). Scanning the vocabulary costs tens of milliseconds, so it runs once
        per model, not once per transcription (the vocabulary is not expected to change after load)."""
        eot = self.special.eot
        return tuple(i for i, token in enumerate(self.vocab[:eot]) if token == b" ")

    @property
    def word_alignment_heads(self) -> tuple[tuple[int, int], ...]:
        """The (decoder layer, head) pairs word timestamps use: the file's list, else the defaults."""
        return self.alignment_heads or default_alignment_heads(self.hparams)

    def tensor_shape(self, name: str) -> tuple[int, ...]:
        """Logical numpy-order shape of a tensor, quantized or not."""
        t = self.tensors[name]
        return tuple(t.shape)

    def validate(self) -> None:
        """Raises WhisperError naming the source when a tensor is missing, unknown or misshapen."""
        self.hparams.validate(self.source)
        expected = expected_shapes(self.hparams)
        missing = sorted(set(expected) - set(self.tensors))
        if missing:
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise WhisperError(f"{self.source}: model is missing tensors {', '.join(missing[:3])}{more}")
        unknown = sorted(set(self.tensors) - set(expected))
        if unknown:
            raise WhisperError(f"{self.source}: model has unknown tensor {unknown[0]}")
        for name, shape in expected.items():
            if self.tensor_shape(name) != shape:
                raise WhisperError(f"{self.source}: tensor {name} has shape "
                                   f"{self.tensor_shape(name)}, expected {shape}")
        if len(self.vocab) != self.hparams.n_vocab:
            raise WhisperError(f"{self.source}: vocabulary has {len(self.vocab)} tokens, "
                               f"expected {self.hparams.n_vocab}")
        filters_shape = (self.hparams.n_mels, N_FFT // 2 + 1)
        if self.mel_filters.shape != filters_shape:
            raise WhisperError(f"{self.source}: mel filters have shape {self.mel_filters.shape}, "
                               f"expected {filters_shape}")
