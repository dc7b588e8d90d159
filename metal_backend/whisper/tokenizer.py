"""Token ids to text, and the byte-level alphabet of GPT-2 style vocabularies.

whisper.cpp model files store each token's raw bytes. CTranslate2 and Hugging
Face vocabularies store GPT-2's printable stand-ins instead: every byte value
is mapped to one visible character (printable Latin-1 characters map to
themselves, the others to U+0100 upward in byte order), so a token file never
holds a space or a control character.
"""

from __future__ import annotations

from functools import lru_cache

from .errors import WhisperError
from .model_data import SpecialTokens


@lru_cache(maxsize=1)
def byte_encoder() -> dict[int, str]:
    """GPT-2's byte -> printable character map."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1),
                 *range(ord("\xae"), ord("\xff") + 1)]
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


@lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """GPT-2's printable character -> byte map."""
    return {c: b for b, c in byte_encoder().items()}


def token_text_to_bytes(text: str) -> bytes:
    """Raw bytes of a token written in GPT-2's printable alphabet."""
    decoder = byte_decoder()
    try:
        return bytes(decoder[c] for c in text)
    except KeyError as exc:
        raise WhisperError(f"token {text!r} has character {exc.args[0]!r} outside the byte-level alphabet") from None


def token_bytes_to_text(token: bytes) -> str:
    """GPT-2's printable spelling of a token's raw bytes."""
    encoder = byte_encoder()
    return "".join(encoder[b] for b in token)


class Tokenizer:
    """Turns Whisper token ids back into text.

    Only decoding is needed for transcription: the prompts are made of special
    tokens whose ids follow from the vocabulary size.
    """

    def __init__(self, vocab: list[bytes], special: SpecialTokens):
        self.vocab = vocab
        self.special = special

    def is_special(self, token: int) -> bool:
        """True for end-of-text and everything after it (control, language and timestamp tokens)."""
        return token >= self.special.eot

    def token_bytes(self, token: int) -> bytes:
        """The stored bytes of one token."""
        if not 0 <= token < len(self.vocab):
            raise WhisperError(f"token id {token} is outside the vocabulary (0..{len(self.vocab) - 1})")
        return self.vocab[token]

    def decode_bytes(self, tokens: list[int]) -> bytes:
        """Concatenated bytes of the text tokens; special tokens are dropped."""
        pieces = [self.token_bytes(t) for t in tokens]
        return b"".join(p for t, p in zip(tokens, pieces) if not self.is_special(t))

    def decode(self, tokens: list[int]) -> str:
        """Text of the text tokens. A multi-byte character split across tokens is
        joined first; invalid UTF-8 becomes U+FFFD."""
        return self.decode_bytes(tokens).decode("utf-8", errors="replace")

    def decode_with_special(self, tokens: list[int]) -> str:
        """Text of all tokens, special ones spelled out (for debugging output)."""
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")
