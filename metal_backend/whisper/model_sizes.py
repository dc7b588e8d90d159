"""The released Whisper model sizes: their dimensions and published alignment heads (data only).

Dimensions are openai-whisper's ModelDimensions for its checkpoints, and those of the distilled
models (Hugging Face distil-whisper: the teacher's encoder, a 2-layer decoder). Every size has 1500
audio and 448 text positions. The alignment heads ((decoder layer, head) pairs whose
cross-attention follows the speech) are openai-whisper's _ALIGNMENT_HEADS (base85 gzipped boolean
masks of n_text_layer x n_text_head, decoded here to their pairs); the distilled models have none
published (their CTranslate2 config.json may list some).
"""

from __future__ import annotations

from dataclasses import dataclass

N_AUDIO_CTX = 1500
N_TEXT_CTX = 448
VOCAB_ENGLISH = 51864  # the .en models
VOCAB_MULTILINGUAL = 51865  # 99 languages
VOCAB_V3 = 51866  # large-v3 and its descendants: 100 languages (Cantonese, "yue", added)


@dataclass(frozen=True)
class ModelSize:
    """One released model's dimensions (whisper.cpp's hyper-parameter names) and alignment heads."""

    name: str
    n_vocab: int
    n_state: int
    n_head: int
    n_audio_layer: int
    n_text_layer: int
    n_mels: int
    alignment_heads: tuple[tuple[int, int], ...] = ()

    def matches(self, hp) -> bool:
        """True when WhisperHParams hp has this size's dimensions (layer counts included)."""
        return (hp.n_vocab, hp.n_audio_state, hp.n_text_state, hp.n_audio_head, hp.n_text_head,
                hp.n_audio_layer, hp.n_text_layer, hp.n_mels) == (
                    self.n_vocab, self.n_state, self.n_state, self.n_head, self.n_head,
                    self.n_audio_layer, self.n_text_layer, self.n_mels)


def _size(name, vocab, state, head, audio_layers, text_layers, mels=80, heads=()):
    return ModelSize(name, vocab, state, head, audio_layers, text_layers, mels, tuple(heads))


SIZES: dict[str, ModelSize] = {s.name: s for s in (
    _size("tiny.en", VOCAB_ENGLISH, 384, 6, 4, 4,
          heads=((1, 0), (2, 0), (2, 5), (3, 0), (3, 1), (3, 2), (3, 3), (3, 4))),
    _size("tiny", VOCAB_MULTILINGUAL, 384, 6, 4, 4, heads=((2, 2), (3, 0), (3, 2), (3, 3), (3, 4), (3, 5))),
    _size("base.en", VOCAB_ENGLISH, 512, 8, 6, 6, heads=((3, 3), (4, 7), (5, 1), (5, 5), (5, 7))),
    _size("base", VOCAB_MULTILINGUAL, 512, 8, 6, 6,
          heads=((3, 1), (4, 2), (4, 3), (4, 7), (5, 1), (5, 2), (5, 4), (5, 6))),
    _size("small.en", VOCAB_ENGLISH, 768, 12, 12, 12,
          heads=((6, 6), (7, 0), (7, 3), (7, 8), (8, 2), (8, 5), (8, 7), (9, 0), (9, 4), (9, 8), (9, 10),
                 (10, 0), (10, 1), (10, 2), (10, 3), (10, 6), (10, 11), (11, 2), (11, 4))),
    _size("small", VOCAB_MULTILINGUAL, 768, 12, 12, 12,
          heads=((5, 3), (5, 9), (8, 0), (8, 4), (8, 7), (8, 8), (9, 0), (9, 7), (9, 9), (10, 5))),
    _size("medium.en", VOCAB_ENGLISH, 1024, 16, 24, 24,
          heads=((11, 4), (14, 1), (14, 12), (14, 14), (15, 4), (16, 0), (16, 4), (16, 9), (17, 12), (17, 14),
                 (18, 7), (18, 10), (18, 15), (20, 0), (20, 3), (20, 9), (20, 14), (21, 12))),
    _size("medium", VOCAB_MULTILINGUAL, 1024, 16, 24, 24,
          heads=((13, 15), (15, 4), (15, 15), (16, 1), (20, 0), (23, 4))),
    _size("large-v1", VOCAB_MULTILINGUAL, 1280, 20, 32, 32,
          heads=((9, 19), (11, 2), (11, 4), (11, 17), (22, 7), (22, 11), (22, 17), (23, 2), (23, 15))),
    _size("large-v2", VOCAB_MULTILINGUAL, 1280, 20, 32, 32,
          heads=((10, 12), (13, 17), (16, 11), (16, 12), (16, 13), (17, 15), (17, 16), (18, 4), (18, 11),
                 (18, 19), (19, 11), (21, 2), (21, 3), (22, 3), (22, 9), (22, 12), (23, 5), (23, 7), (23, 13),
                 (25, 5), (26, 1), (26, 12), (27, 15))),
    _size("large-v3", VOCAB_V3, 1280, 20, 32, 32, mels=128,
          heads=((7, 0), (10, 17), (12, 18), (13, 12), (16, 1), (17, 14), (19, 11), (21, 4), (24, 1), (25, 6))),
    _size("large-v3-turbo", VOCAB_V3, 1280, 20, 32, 4, mels=128,
          heads=((2, 4), (2, 11), (3, 3), (3, 6), (3, 11), (3, 14))),
    _size("distil-small.en", VOCAB_ENGLISH, 768, 12, 12, 2),
    _size("distil-medium.en", VOCAB_ENGLISH, 1024, 16, 24, 2),
    _size("distil-large-v2", VOCAB_MULTILINGUAL, 1280, 20, 32, 2),
    _size("distil-large-v3", VOCAB_V3, 1280, 20, 32, 2, mels=128),
)}

# Aliases openai-whisper and faster-whisper accept for the same checkpoints.
ALIASES = {"large": "large-v3", "turbo": "large-v3-turbo", "distil-large-v3.5": "distil-large-v3"}

# large-v1 and large-v2 have the same dimensions; a file of either gets large-v2's heads (the
# later and far more used of the two) unless it lists its own.
_PREFERRED = {"large-v1": "large-v2"}


def model_size(name: str) -> ModelSize:
    """The size called `name` (a SIZES key or an ALIASES key); KeyError lists the known names."""
    key = ALIASES.get(name, name)
    if key not in SIZES:
        raise KeyError(f"unknown Whisper size {name!r}; known: {', '.join([*SIZES, *ALIASES])}")
    return SIZES[key]


def sizes_matching(hp) -> list[ModelSize]:
    """The released sizes whose dimensions hp has (two for a large-v1/large-v2 file, else at most one)."""
    return [s for s in SIZES.values() if s.matches(hp)]


def published_alignment_heads(hp) -> tuple[tuple[int, int], ...]:
    """The published alignment heads of the size hp has the dimensions of, or () when there are none
    (no such released size, or a distilled one)."""
    for size in sizes_matching(hp):
        chosen = SIZES[_PREFERRED.get(size.name, size.name)]
        if chosen.alignment_heads:
            return chosen.alignment_heads
    return ()
