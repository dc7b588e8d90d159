"""LocalAgreement-2: the commit rule of live transcription (Machacek et al. 2023, Whisper-Streaming).

The audio buffer is transcribed again each time more of it has arrived. Each transcription is a
hypothesis: a list of timed words. A word is committed (final, never revised) once two
consecutive hypotheses agree on it: the longest common prefix of the last two hypotheses, word by
word, is committed. Before comparing, each new hypothesis loses the words that were already
committed: those that start before the last committed word ended (less a 0.1 s tolerance for the
word alignment's jitter), and then a head of up to 5 words that repeats the tail of the committed
text word for word (a committed word whose re-aligned start moved past the tolerance).

A word that ends near the right edge of the newer hypothesis's audio (within `hold` seconds of
`audio_end`, insert's arguments) is not committed even when both agree, nor is anything after it:
Whisper hears a word that runs into the end of its audio as the nearest word it knows, and two
hypotheses a chunk apart can both end on that word; the next one, which hears what follows, often
revises it ('sells' -> 'sell', 'a' -> 'the'). Such a word waits for a hypothesis with more audio
after it.

A word the newer hypothesis gives a probability below `min_probability` (insert's argument) is not
committed either, nor anything after it: at the buffer's edge Whisper fills a word it has only
half heard with a likely one and can repeat that guess a chunk later ('sells fruit' heard as
'sailed through' at probability 0.14 and 0.19 by two hypotheses, then as 'sells fruit' by the
final pass of the sentence); it waits for a hypothesis that hears it with confidence, or for
the final pass. After each insert, `held` names such a word when the hypotheses agreed on it and
only its probability held it back (the stream then settles it with a beam pass).

Words are compared by their normalised spelling (lower case, punctuation dropped), so a comma that
appears once the next word is heard does not hold a word back; the committed word is the newer
hypothesis's, with its timing and punctuation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

_TOLERANCE = 0.1  # seconds a re-aligned committed word may start before the last committed end
_MAX_NGRAM = 5


@dataclass(frozen=True)
class TimedWord:
    """One word of a hypothesis: absolute start and end (seconds), its text (leading space
    included), its probability, and which segment of its hypothesis it belongs to."""

    start: float
    end: float
    text: str
    probability: float
    segment: int

    @property
    def key(self) -> str:
        """The spelling words are compared by."""
        return word_key(self.text)


def word_key(text: str) -> str:
    """Lower case, letters, digits and inner apostrophes only."""
    return re.sub(r"[^\w']", "", text.lower()).strip("'")


class LocalAgreement:
    """The committed/tentative split of a stream of hypotheses (see the module docstring); n: how
    many consecutive hypotheses must agree on a word (2: LocalAgreement-2).

    insert(words) takes a new hypothesis and returns the words it commits; flush() commits what is
    left of the last hypothesis (the final pass of a finished stretch of speech); tentative holds
    the words heard but not committed yet.
    """

    def __init__(self, n: int = 2) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 2:
            raise ValueError(f"LocalAgreement needs n >= 2 hypotheses to agree (got {n!r})")
        self.n = n
        self.committed_end = 0.0
        self._committed_tail: list[str] = []
        self._previous: list[list[TimedWord]] = []  # the uncommitted words of the last n - 1 hypotheses
        self._current: list[TimedWord] = []
        self.held: TimedWord | None = None  # what the last insert held back for its probability alone

    @property
    def tentative(self) -> list[TimedWord]:
        """The uncommitted words of the last hypothesis."""
        return list(self._current)

    def insert(self, words: list[TimedWord], audio_end: float | None = None, hold: float = 0.0,
               fresh: bool = False, min_probability: float = 0.0, unsure: int | None = None) -> list[TimedWord]:
        """Takes a hypothesis (words in order, absolute times) of the audio up to `audio_end`
        (seconds; None: no right-edge hold); returns the words it commits: the agreed prefix up to
        the first word that ends within `hold` of audio_end or that this hypothesis gives a
        probability below min_probability. unsure: a word below min_probability is committed
        anyway once that many consecutive hypotheses (more than n) agree on it (None: never by
        agreement; it waits for a confident hypothesis or the final pass). fresh: the words are
        known to follow the committed ones (the hypothesis was decoded after them as a forced
        prefix and they were taken off), so none is dropped as already committed."""
        new = self._fresh(words) if fresh else self._unseen(words)
        limit = float("inf") if audio_end is None else audio_end - hold
        keep = max(self.n, unsure or 0) - 1  # earlier hypotheses kept for the votes
        agreed: list[TimedWord] = []
        self.held = None
        if len(self._previous) >= self.n - 1:
            for k, word in enumerate(new):
                if word.end > limit:
                    break
                votes = self.n
                if word.probability < min_probability:
                    if unsure is None or len(self._previous) < unsure - 1:
                        if all(len(old) > k and old[k].key == word.key
                               for old in self._previous[len(self._previous) - self.n + 1:]):
                            self.held = word  # agreed and clear of the edge: held for its probability
                        break
                    votes = unsure
                voters = self._previous[len(self._previous) - votes + 1:]
                if any(len(old) <= k or old[k].key != word.key for old in voters):
                    break
                agreed.append(word)
        self._current = new[len(agreed):]
        voters_kept = self._previous[max(0, len(self._previous) - keep + 1):] if keep > 1 else []
        kept = [old[len(agreed):] for old in voters_kept]
        self._previous = kept + [self._current]
        return self._commit(agreed)

    def flush(self, words: list[TimedWord] | None = None, fresh: bool = False) -> list[TimedWord]:
        """Commits every uncommitted word of `words` (a final hypothesis; fresh as for insert),
        or of the last hypothesis when None; the next hypothesis is then compared with nothing."""
        if words is None:
            rest = self._current
        else:
            rest = self._fresh(words) if fresh else self._unseen(words)
        self._previous = []
        self._current = []
        self.held = None
        return self._commit(rest)

    def forget(self) -> None:
        """Drops the last hypothesis (its audio is gone from the buffer), keeping what was committed."""
        self._previous = []
        self._current = []
        self.held = None

    @staticmethod
    def _fresh(words: list[TimedWord]) -> list[TimedWord]:
        return [w for w in words if w.key]

    def _unseen(self, words: list[TimedWord]) -> list[TimedWord]:
        words = [w for w in words if w.key and w.start > self.committed_end - _TOLERANCE]
        tail = self._committed_tail
        if words and tail and abs(words[0].start - self.committed_end) < 1.0:
            for n in range(min(_MAX_NGRAM, len(tail), len(words)), 0, -1):
                if tail[-n:] == [w.key for w in words[:n]]:
                    return words[n:]
        return words

    def _commit(self, words: list[TimedWord]) -> list[TimedWord]:
        """Records words as committed; returns them with starts moved to no earlier than the end
        of the word before (the tolerance admits a re-aligned start slightly before it)."""
        out: list[TimedWord] = []
        end = self.committed_end
        for w in words:
            start = max(w.start, end)
            end = max(w.end, start)
            out.append(replace(w, start=start, end=end))
        if out:
            self.committed_end = end
            self._committed_tail = (self._committed_tail + [w.key for w in out])[-_MAX_NGRAM:]
        return out
