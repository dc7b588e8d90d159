"""Token decoding and GPT-2's byte-level alphabet."""

from __future__ import annotations

import pytest

from metal_backend.whisper import SpecialTokens, Tokenizer, WhisperError, WhisperHParams
from metal_backend.whisper.tokenizer import byte_decoder, byte_encoder, token_bytes_to_text, token_text_to_bytes

EN = WhisperHParams(51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80)


def test_byte_alphabet_is_a_bijection_of_printable_characters():
    enc = byte_encoder()
    assert sorted(enc) == list(range(256))
    assert len(set(enc.values())) == 256
    assert all(c.isprintable() and not c.isspace() for c in enc.values())
    assert enc[ord("a")] == "a" and enc[ord(" ")] == "\u0120" and enc[ord("\n")] == "\u010a"
    assert byte_decoder()["\u0120"] == 32


def test_token_text_round_trip():
    raw = "héllo wörld ✓\n".encode()
    assert token_text_to_bytes(token_bytes_to_text(raw)) == raw
    assert token_text_to_bytes("\u0120the") == b" the"
    with pytest.raises(WhisperError, match="outside the byte-level alphabet"):
        token_text_to_bytes("a b")


def make_tokenizer(vocab_text: dict[int, bytes]) -> Tokenizer:
    special = SpecialTokens.for_hparams(EN)
    names = special.names(EN.n_vocab)
    vocab = [vocab_text.get(i, b"?") for i in range(special.eot)] + [names[i] for i in range(special.eot, EN.n_vocab)]
    return Tokenizer(vocab, special)


def test_decode_drops_special_tokens_and_joins_split_characters():
    # "é" is two bytes; byte-level BPE may split it over two tokens.
    tok = make_tokenizer({10: b" caf", 11: b"\xc3", 12: b"\xa9", 13: b"!"})
    ids = [50257, 50362, 10, 11, 12, 13, 50256]
    assert tok.decode(ids) == " café!"
    assert tok.decode_with_special(ids).startswith("<|startoftranscript|><|notimestamps|> caf")
    assert tok.decode([11]) == "\ufffd"


def test_special_tokens_english_and_multilingual():
    en = SpecialTokens.for_hparams(EN)
    assert (en.eot, en.sot, en.translate, en.transcribe, en.start_of_lm, en.start_of_prev, en.no_speech,
            en.no_timestamps, en.timestamp_begin) == (50256, 50257, 50357, 50358, 50359, 50360, 50361, 50362, 50363)
    multi = SpecialTokens.for_hparams(WhisperHParams(51865, 1500, 512, 8, 6, 448, 512, 8, 6, 80))
    assert (multi.eot, multi.sot, multi.language("en"), multi.transcribe, multi.no_timestamps,
            multi.timestamp_begin) == (50257, 50258, 50259, 50359, 50363, 50364)
    v3 = SpecialTokens.for_hparams(WhisperHParams(51866, 1500, 1280, 20, 32, 448, 1280, 20, 32, 128))
    assert v3.language("yue") == 50358 and v3.no_timestamps == 50364
    assert en.names(EN.n_vocab)[51863] == b"<|30.00|>"
    with pytest.raises(WhisperError, match="unknown language 'xx'"):
        multi.language("xx")


def test_out_of_range_token():
    with pytest.raises(WhisperError, match="token id 99999 is outside the vocabulary"):
        make_tokenizer({}).decode([99999])


@pytest.mark.parametrize("which", ["tiny_en", "base"])
def test_encode_is_bpe_by_id_rank(request, which):
    model = request.getfixturevalue(which)
    tokenizer = Tokenizer(model.vocab, model.special)
    # GPT-2's ids: " hello" 23748, " world" 995 (the multilingual vocabulary has its own).
    if which == "tiny_en":
        assert tokenizer.encode(" hello world") == [23748, 995]
    for text in [" And so my fellow Americans, ask not.", " Señor, ¿qué tal? 1234 it's  spaced\n", " 日本語 ✓",
                 "_under_score__ x"]:
        ids = tokenizer.encode(text)
        assert tokenizer.decode(ids) == text
        assert all(0 <= t < model.special.eot for t in ids)
    # Common words are single tokens, not spelled out byte by byte.
    assert len(tokenizer.encode(" the country")) == 2
    with pytest.raises(WhisperError, match="can only encode text"):
        tokenizer.encode(b"bytes")
