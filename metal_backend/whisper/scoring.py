"""Scoring transcripts against a reference: text normalisation, word error rate, segment-start error.

Used by the tests and the benchmarks, so every engine is scored by the same rules:

- normalize(): lower case, punctuation dropped (apostrophes inside words kept), the number
  words zero to twenty written as digits (engines differ in writing "nine" or "9"), single
  spaces.
- word_errors(): the Levenshtein alignment of the two word sequences, counting substitutions,
  deletions (reference words missing) and insertions (extra words); the word error rate is their
  sum over the reference length.
- start_errors(): for each reference sentence start, the distance to the nearest segment start.
- longest_repeat(): the most times one word n-gram repeats back to back (decoding loops).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

_NUMBERS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}


def normalize(text: str) -> str:
    """Lower case, punctuation dropped (apostrophes inside words kept), number words 0-20 as digits."""
    text = re.sub(r"[^\w\s']", " ", text.lower())
    text = re.sub(r"(?<!\w)'|'(?!\w)", " ", text)
    return " ".join(_NUMBERS.get(w, w) for w in text.split())


@dataclass(frozen=True)
class WordErrors:
    """Edit counts of a hypothesis against a reference of `reference_words` words."""

    substitutions: int
    deletions: int
    insertions: int
    reference_words: int

    @property
    def errors(self) -> int:
        """Substitutions + deletions + insertions."""
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        """errors / reference words (0.0 for an empty reference and hypothesis)."""
        if self.reference_words == 0:
            return 0.0 if self.errors == 0 else float("inf")
        return self.errors / self.reference_words


def word_errors(reference: str, hypothesis: str) -> WordErrors:
    """The minimum-edit alignment of the normalised word sequences (see module docstring)."""
    ref = normalize(reference).split()
    hyp = normalize(hypothesis).split()
    # Each cell holds (edits, substitutions, deletions, insertions); ties prefer fewer edits, then
    # substitutions, so the counts are deterministic.
    prev = [(j, 0, 0, j) for j in range(len(hyp) + 1)]
    for i in range(1, len(ref) + 1):
        cur = [(i, 0, i, 0)]
        for j in range(1, len(hyp) + 1):
            sub = prev[j - 1]
            if ref[i - 1] == hyp[j - 1]:
                best = sub
            else:
                best = (sub[0] + 1, sub[1] + 1, sub[2], sub[3])
            d = prev[j]
            best = min(best, (d[0] + 1, d[1], d[2] + 1, d[3]))
            ins = cur[j - 1]
            best = min(best, (ins[0] + 1, ins[1], ins[2], ins[3] + 1))
            cur.append(best)
        prev = cur
    _, s, d, n = prev[-1]
    return WordErrors(substitutions=s, deletions=d, insertions=n, reference_words=len(ref))


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate of hypothesis against reference, after normalize()."""
    return word_errors(reference, hypothesis).wer


def start_errors(reference_starts: Sequence[float], segment_starts: Iterable[float]) -> list[float]:
    """For each reference start, |reference - nearest segment start| in seconds (inf with no segments)."""
    starts = sorted(float(s) for s in segment_starts)
    if not starts:
        return [float("inf")] * len(reference_starts)
    return [min(abs(r - s) for s in starts) for r in reference_starts]


def longest_repeat(text: str, max_n: int = 4) -> int:
    """The most consecutive repetitions of one word n-gram (n <= max_n) in the normalised text.

    1 for text without any immediate repetition; "strong strong strong" gives 3.
    """
    words = normalize(text).split()
    best = 1 if words else 0
    for n in range(1, max_n + 1):
        for start in range(n):
            run = 1
            for i in range(start + n, len(words) - n + 1, n):
                if words[i:i + n] == words[i - n:i]:
                    run += 1
                    best = max(best, run)
                else:
                    run = 1
    return best
