"""Token ids to text, and the byte-level alphabet of GPT-2 style vocabularies.

whisper.cpp model files store each token's raw bytes. CTranslate2 and Hugging
Face vocabularies store GPT-2's printable stand-ins instead: every byte value
is mapped to one visible character (printable Latin-1 characters map to
themselves, the others to U+0100 upward in byte order), so a token file never
holds a space or a control character.
"""

from __future__ import annotations

import heapq
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
        """BPE of one piece in O(n log n): the same merges, in the same order, as repeatedly
        merging the lowest-ranked adjacent pair (leftmost on ties), which is quadratic in a long
        unbroken word. The parts form a linked list; a heap holds (rank, start, end of the right
        part) of each adjacent pair; entries whose parts have merged since are skipped."""
        ranks = self._ranks
        whole = ranks.get(piece)
        if whole is not None:
            return [whole]
        n = len(piece)
        # A part is piece[start:end[start]]; nxt/prv link the starts of live parts.
        end = list(range(1, n + 1))
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        heap: list[tuple[int, int, int]] = []
        for i in range(n - 1):
            rank = ranks.get(piece[i:i + 2])
            if rank is not None:
                heap.append((rank, i, i + 2))
        heapq.heapify(heap)
        while heap:
            _, i, stop = heapq.heappop(heap)
            if end[i] == 0:
                continue  # part i was merged into its left neighbour
            j = nxt[i]
            if j >= n or end[j] != stop:
                continue  # a part of this pair has merged with another since
            end[i], end[j] = stop, 0
            nxt[i] = nxt[j]
            if nxt[i] < n:
                prv[nxt[i]] = i
                rank = ranks.get(piece[i:end[nxt[i]]])
                if rank is not None:
                    heapq.heappush(heap, (rank, i, end[nxt[i]]))
            if prv[i] >= 0:
                rank = ranks.get(piece[prv[i]:stop])
                if rank is not None:
                    heapq.heappush(heap, (rank, prv[i], stop))
        parts = []
        i = 0
        while i < n:
            parts.append(piece[i:end[i]])
            i = nxt[i]
        try:
            return [ranks[p] for p in parts]
        except KeyError as exc:
            raise WhisperError(f"byte {exc.args[0]!r} has no token in this vocabulary") from None

    def decode_with_special(self, tokens: list[int]) -> str:
        """Text of all tokens, special ones spelled out (for debugging output)."""
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")
