"""BPE encoding of long unbroken words (issue 24, item 3).

Encoding merged the lowest-ranked adjacent pair by rescanning every pair after each merge: quadratic
in the length of one pre-tokenized piece (an initial_prompt of 30k characters without spaces took
73 s). It is now a heap over a linked list of parts. Checked here: the tokens equal those of the
plain quadratic algorithm (the reference, written out below) on real vocabularies and on a small one
built to have many ties; the number of rank lookups grows linearly with the word (the class, not
one length); and a 200k-character prompt encodes in a child process within a time limit.
"""
from __future__ import annotations

import random

import pytest

from isolated import run_isolated
from metal_backend.whisper import SpecialTokens, Tokenizer, WhisperHParams

EN = WhisperHParams(51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80)


def reference_merge(ranks: dict[bytes, int], piece: bytes) -> list[int]:
    """The quadratic definition: merge the lowest-ranked adjacent pair, leftmost first, until none is a token."""
    if piece in ranks:
        return [ranks[piece]]
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
    return [ranks[p] for p in parts]


def reference_encode(tokenizer: Tokenizer, text: str) -> list[int]:
    from metal_backend.whisper.tokenizer import _PIECES
    tokenizer.encode("")  # builds the ranks
    ids: list[int] = []
    for piece in _PIECES.findall(text):
        ids += reference_merge(tokenizer._ranks, piece.encode("utf-8"))
    return ids


class CountingRanks(dict):
    lookups = 0

    def get(self, key, default=None):
        CountingRanks.lookups += 1
        return super().get(key, default)


def tiny_vocab_tokenizer() -> Tokenizer:
    """Every byte, and a few merges chosen so that equal ranks compete (ab, ba, aa, bb...) and
    longer tokens build on shorter ones."""
    special = SpecialTokens.for_hparams(EN)
    names = special.names(EN.n_vocab)
    merges = [b"aa", b"ab", b"ba", b"bb", b"aab", b"abab", b"baba", b"aaaa", b"abba", b"bbb", b"aabab", b"ababab"]
    vocab = [bytes([i]) for i in range(256)] + merges
    vocab += [b"\xff\xfe" + i.to_bytes(3, "big") for i in range(len(vocab), special.eot)]  # unreachable fillers
    return Tokenizer(vocab + [names[i] for i in range(special.eot, EN.n_vocab)], special)


def test_equal_to_the_quadratic_definition_on_a_vocabulary_full_of_ties():
    tok = tiny_vocab_tokenizer()
    rng = random.Random(24)
    for _ in range(400):
        word = "".join(rng.choice("ab") for _ in range(rng.randrange(1, 60)))
        assert tok.encode(word) == reference_encode(tok, word), word
    assert tok.encode("abab") == [256 + 5]


@pytest.mark.parametrize("which", ["tiny_en", "base"])
def test_equal_to_the_quadratic_definition_on_real_vocabularies(request, which):
    model = request.getfixturevalue(which)
    tok = Tokenizer(model.vocab, model.special)
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyzéñü日本語✓0123456789_-.,'"
    texts = ["supercalifragilisticexpialidocious" * 20, "x" * 500, "ab" * 300, "日本語" * 100,
             " And so my fellow Americans, ask not what your country can do for you."]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 400))) for _ in range(60)]
    for text in texts:
        ids = tok.encode(text)
        assert ids == reference_encode(tok, text)
        assert tok.decode(ids) == text


def test_rank_lookups_grow_linearly_with_one_long_word(tiny_en):
    """The class: the work for one unbroken word is proportional to its length (at most one
    lookup per initial pair and two per merge), at every length, where the quadratic algorithm
    made a lookup per remaining pair per merge."""
    tok = Tokenizer(tiny_en.vocab, tiny_en.special)
    tok.encode("")
    tok._ranks = CountingRanks(tok._ranks)
    rng = random.Random(3)
    for n in (1_000, 4_000, 16_000, 64_000):
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
        CountingRanks.lookups = 0
        ids = tok.encode(word)
        assert tok.decode(ids) == word
        assert CountingRanks.lookups <= 3 * n, (n, CountingRanks.lookups)


def test_a_very_long_unbroken_prompt_encodes_without_hanging():
    out = run_isolated("""
        import random
        from metal_backend.whisper import SpecialTokens, Tokenizer, WhisperHParams
        hp = WhisperHParams(51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80)
        special = SpecialTokens.for_hparams(hp)
        names = special.names(hp.n_vocab)
        # Every byte and every pair of letters is a token: a 200k-byte word merges ~100k times.
        letters = [bytes([c]) for c in range(97, 123)]
        vocab = [bytes([i]) for i in range(256)] + [a + b for a in letters for b in letters]
        vocab += [a + b + c + d for a in letters[:6] for b in letters[:6] for c in letters[:6] for d in letters[:6]]
        vocab += [b"\\xff\\xfe" + i.to_bytes(3, "big") for i in range(len(vocab), special.eot)]
        tok = Tokenizer(vocab + [names[i] for i in range(special.eot, hp.n_vocab)], special)
        rng = random.Random(0)
        word = "".join(rng.choice("abcdef") for _ in range(200_000))
        ids = tok.encode(word)
        assert tok.decode(ids) == word
        print(len(ids) < 200_000 // 2)
    """, timeout=60)
    assert out.strip() == "True"
