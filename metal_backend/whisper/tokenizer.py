"""Token ids to text, and the byte-level alphabet of GPT-2 style vocabularies.

whisper.cpp model files store each token's raw bytes. CTranslate2 and Hugging
Face vocabularies store GPT-2's printable stand-ins instead: every byte value
is mapped to one visible character (printable Latin-1 characters map to
themselves, the others to U+0100 upward in byte order), so a token file never
holds a space or a control character.
"""

from __future__ import annotations

import re
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


# GPT-2's pre-tokenizer: contractions, words with their leading space, numbers, runs of other
# symbols, whitespace. Python's re has no \p{L} / \p{N}: [^\W\d_] is a letter, \d a digit.
_PIECES = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


class Tokenizer:
    """Turns Whisper token ids into text and text into token ids.

    Decoding joins the tokens' bytes. Encoding (for initial prompts) is byte-level BPE: Whisper's
    vocabularies are tiktoken encodings, whose merge rank of a token is its id, so the text
    tokens' bytes alone define the merges: within each pre-tokenized piece, the adjacent pair
    whose concatenation has the lowest id is merged until no pair is a token.
    """

    def __init__(self, vocab: list[bytes], special: SpecialTokens):
        self.vocab = vocab
        self.special = special
        self._ranks: dict[bytes, int] | None = None

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

    def encode(self, text: str) -> list[int]:
        """Text token ids of text (no special tokens)."""
        if not isinstance(text, str):
            raise WhisperError(f"can only encode text (got {type(text).__name__})")
        if self._ranks is None:
            self._ranks = {}
            for i, token in enumerate(self.vocab[:self.special.eot]):
                self._ranks.setdefault(token, i)
        ids: list[int] = []
        for piece in _PIECES.findall(text):
            ids += self._merge(piece.encode("utf-8"))
        return ids

    def _merge(self, piece: bytes) -> list[int]:
        ranks = self._ranks
        whole = ranks.get(piece)
        if whole is not None:
            return [whole]
        parts = [piece[i:i + 1] for i in range(len(piece))]
        while len(parts) > 1:
            best, at = None, -1
            for i in range(len(parts) - 1):
                rank = ranks.get(parts[i] + parts[i + 1])
                if rank is not None and (best is None or rank < best):
                    best, at = rank, i
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        try:
            return [ranks[p] for p in parts]
        except KeyError as exc:
            raise WhisperError(f"byte {exc.args[0]!r} has no token in this vocabulary") from None

    def decode_with_special(self, tokens: list[int]) -> str:
        """Text of all tokens, special ones spelled out (for debugging output)."""
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")
