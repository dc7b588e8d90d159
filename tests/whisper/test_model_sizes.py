"""Every released Whisper size: dimensions, vocabularies and special tokens (large-v3's 51866 with
Cantonese), 128 mel bins, alignment-head presets (issue 26, item 4).

The references are independent of our tables: openai-whisper's _ALIGNMENT_HEADS strings (base85 of
gzipped boolean masks, copied here as data and decoded by the test), its mel_filters.npz values
(tests/assets/mel/openai_mel_filters.json) and the special-token ids openai-whisper's tokenizer gives
large-v3 (tiktoken "multilingual" with num_languages=100).
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from metal_backend.whisper import (
    DecodingOptions,
    SpecialTokens,
    WhisperError,
    WhisperHParams,
    WhisperModelData,
    mel_filters,
)
from metal_backend.whisper.decoding import initial_tokens, resolve_language
from metal_backend.whisper.model_data import LANGUAGES, default_alignment_heads, expected_shapes
from metal_backend.whisper.model_sizes import ALIASES, SIZES, model_size, sizes_matching

MEL_REFERENCE = Path(__file__).resolve().parents[1] / "assets" / "mel" / "openai_mel_filters.json"

# openai-whisper 20250625, whisper/__init__.py.
OPENAI_ALIGNMENT_HEADS = {
    "tiny.en": b"ABzY8J1N>@0{>%R00Bk>$p{7v037`oCl~+#00",
    "tiny": b"ABzY8bu8Lr0{>%RKn9Fp%m@SkK7Kt=7ytkO",
    "base.en": b"ABzY8;40c<0{>%RzzG;p*o+Vo09|#PsxSZm00",
    "base": b"ABzY8KQ!870{>%RzyTQH3`Q^yNP!>##QT-<FaQ7m",
    "small.en": b"ABzY8>?_)10{>%RpeA61k&I|OI3I$65C{;;pbCHh0B{qLQ;+}v00",
    "small": b"ABzY8DmU6=0{>%Rpa?J`kvJ6qF(V^F86#Xh7JUGMK}P<N0000",
    "medium.en": b"ABzY8usPae0{>%R7<zz_OvQ{)4kMa0BMw6u5rT}kRKX;$NfYBv00*Hl@qhsU00",
    "medium": b"ABzY8B0Jh+0{>%R7}kK1fFL7w6%<-Pf*t^=N)Qr&0RR9",
    "large-v1": b"ABzY8r9j$a0{>%R7#4sLmoOs{s)o3~84-RPdcFk!JR<kSfC2yj",
    "large-v2": b"ABzY8zd+h!0{>%R7=D0pU<_bnWW*tkYAhobTNnu$jnkEkXqp)j;w1Tzk)UH3X%SZd&fFZ2fC2yj",
    "large-v3": b"ABzY8gWO1E0{>%R7(9S+Kn!D~%ngiGaR?*L!iJG9p-nab0JQ=-{D1-g00",
    "large": b"ABzY8gWO1E0{>%R7(9S+Kn!D~%ngiGaR?*L!iJG9p-nab0JQ=-{D1-g00",
    "large-v3-turbo": b"ABzY8j^C+e0{>%RARaKHP%t(lGR*)0g!tONPyhe`",
    "turbo": b"ABzY8j^C+e0{>%RARaKHP%t(lGR*)0g!tONPyhe`",
}

# openai-whisper's ModelDimensions of each checkpoint (n_vocab, n_audio_state, n_audio_head,
# n_audio_layer, n_text_layer, n_mels) and the distil-whisper configs (d_model, heads, layers).
DIMENSIONS = {
    "tiny.en": (51864, 384, 6, 4, 4, 80), "tiny": (51865, 384, 6, 4, 4, 80),
    "base.en": (51864, 512, 8, 6, 6, 80), "base": (51865, 512, 8, 6, 6, 80),
    "small.en": (51864, 768, 12, 12, 12, 80), "small": (51865, 768, 12, 12, 12, 80),
    "medium.en": (51864, 1024, 16, 24, 24, 80), "medium": (51865, 1024, 16, 24, 24, 80),
    "large-v1": (51865, 1280, 20, 32, 32, 80), "large-v2": (51865, 1280, 20, 32, 32, 80),
    "large-v3": (51866, 1280, 20, 32, 32, 128), "large-v3-turbo": (51866, 1280, 20, 32, 4, 128),
    "distil-small.en": (51864, 768, 12, 12, 2, 80), "distil-medium.en": (51864, 1024, 16, 24, 2, 80),
    "distil-large-v2": (51865, 1280, 20, 32, 2, 80), "distil-large-v3": (51866, 1280, 20, 32, 2, 128),
}


def decode_heads(blob: bytes, n_layers: int, n_heads: int) -> tuple[tuple[int, int], ...]:
    mask = np.frombuffer(gzip.decompress(base64.b85decode(blob)), dtype=bool).reshape(n_layers, n_heads)
    return tuple((int(layer), int(head)) for layer, head in np.argwhere(mask))


def test_every_size_is_listed_with_its_dimensions():
    assert set(SIZES) == set(DIMENSIONS)
    for name, (n_vocab, d, heads, audio_layers, text_layers, n_mels) in DIMENSIONS.items():
        hp = WhisperHParams.for_size(name)
        assert hp == WhisperHParams(n_vocab, 1500, d, heads, audio_layers, 448, d, heads, text_layers, n_mels, 1)
        hp.validate(name)
        assert sizes_matching(hp) == [SIZES[n] for n in DIMENSIONS if DIMENSIONS[n] == DIMENSIONS[name]]
        # 4 + 2 tensors per encoder conv and post-norm, 5 decoder embeddings and norms, 15 per encoder
        # block and 24 per decoder block.
        assert len(expected_shapes(hp)) == 11 + 15 * audio_layers + 24 * text_layers
    assert WhisperHParams.for_size("large") == WhisperHParams.for_size("large-v3")
    assert WhisperHParams.for_size("turbo") == WhisperHParams.for_size("large-v3-turbo")
    assert set(ALIASES.values()) <= set(SIZES)


def test_unknown_size_names_the_known_ones():
    with pytest.raises(WhisperError, match=r"unknown Whisper size 'huge'; known: tiny.en, tiny, .*turbo"):
        WhisperHParams.for_size("huge")
    with pytest.raises(KeyError, match="unknown Whisper size 'large-v4'"):
        model_size("large-v4")


@pytest.mark.parametrize("name", list(OPENAI_ALIGNMENT_HEADS))
def test_alignment_heads_are_openai_whispers(name):
    size = model_size(name)
    expected = decode_heads(OPENAI_ALIGNMENT_HEADS[name], size.n_text_layer, size.n_head)
    assert size.alignment_heads == expected
    hp = WhisperHParams.for_size(name)
    if name == "large-v1":
        # Same dimensions as large-v2: a file that lists no heads gets large-v2's.
        expected = decode_heads(OPENAI_ALIGNMENT_HEADS["large-v2"], 32, 20)
    assert default_alignment_heads(hp) == expected


@pytest.mark.parametrize("name", ["distil-small.en", "distil-medium.en", "distil-large-v2", "distil-large-v3"])
def test_distilled_models_fall_back_to_the_last_half_of_the_decoder(name):
    hp = WhisperHParams.for_size(name)
    assert hp.n_text_layer == 2
    assert default_alignment_heads(hp) == tuple((1, h) for h in range(hp.n_text_head))


def test_large_v3_vocabulary_and_special_tokens():
    hp = WhisperHParams.for_size("large-v3")
    sp = SpecialTokens.for_hparams(hp)
    assert hp.n_vocab == 51866 and hp.is_multilingual and hp.n_languages == 100
    # openai-whisper's get_tokenizer(multilingual=True, num_languages=100) ids.
    assert (sp.eot, sp.sot, sp.translate, sp.transcribe, sp.start_of_lm, sp.start_of_prev, sp.no_speech,
            sp.no_timestamps, sp.timestamp_begin) == (50257, 50258, 50359, 50360, 50361, 50362, 50363, 50364, 50365)
    assert sp.languages == LANGUAGES and LANGUAGES[-1] == "yue"
    assert sp.language("en") == 50259 and sp.language("yue") == 50358
    names = sp.names(hp.n_vocab)
    assert names[50358] == b"<|yue|>" and names[50365] == b"<|0.00|>" and names[51865] == b"<|30.00|>"
    # The 99-language vocabularies have no Cantonese, and their ids sit one lower from translate on.
    v2 = SpecialTokens.for_hparams(WhisperHParams.for_size("large-v2"))
    assert "yue" not in v2.languages and (v2.translate, v2.timestamp_begin) == (50358, 50364)
    with pytest.raises(WhisperError, match="unknown language 'yue' for this model"):
        v2.language("yue")
    en = SpecialTokens.for_hparams(WhisperHParams.for_size("distil-medium.en"))
    assert (en.eot, en.sot, en.no_timestamps, en.timestamp_begin) == (50256, 50257, 50362, 50363)


def test_cantonese_prompt_on_a_large_v3_vocabulary():
    def model(size: str) -> WhisperModelData:  # the prompt needs the dimensions only
        hp = WhisperHParams.for_size(size)
        return WhisperModelData(hparams=hp, tensors={}, vocab=[], mel_filters=np.zeros((hp.n_mels, 201)))

    v3 = DecodingOptions(language="yue", without_timestamps=True)
    assert initial_tokens(model("large-v3"), v3) == [50258, 50358, 50360, 50364]
    translate = DecodingOptions(language="yue", task="translate")
    assert initial_tokens(model("large-v3-turbo"), translate) == [50258, 50358, 50359]
    assert initial_tokens(model("distil-large-v3"), DecodingOptions(language="en")) == [50258, 50259, 50360]
    assert resolve_language(model("large-v3"), "yue") == "yue"
    with pytest.raises(WhisperError, match="unknown language 'yue' for this model"):
        resolve_language(model("large-v2"), "yue")


def _openai_filters(n_mels: int) -> np.ndarray:
    ref = json.loads(MEL_REFERENCE.read_text())[f"mel_{n_mels}"]
    out = np.zeros(ref["shape"], np.float32)
    for row, (first, values) in enumerate(ref["rows"]):
        out[row, first:first + len(values)] = values
    return out


@pytest.mark.parametrize("n_mels", [80, 128])
def test_mel_filters_equal_openai_whispers_npz(n_mels):
    ours, theirs = mel_filters(n_mels), _openai_filters(n_mels)
    assert ours.shape == theirs.shape == (n_mels, 201)
    # The same triangles (the same bins non-zero); values within one float32 rounding (librosa sums
    # in another order): measured 1.19e-7 relative, 3.7e-9 absolute for 128.
    assert np.array_equal(ours > 0, theirs > 0)
    np.testing.assert_allclose(ours, theirs, rtol=2.5e-7, atol=0)
