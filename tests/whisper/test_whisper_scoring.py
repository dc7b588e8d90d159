"""The scoring used by the tests and benchmarks: normalisation, WER counts, start errors, loops."""

from __future__ import annotations

import math

import pytest

from metal_backend.whisper.scoring import longest_repeat, normalize, start_errors, wer, word_errors


def test_normalize():
    assert normalize("It's NINE o'clock -- 'quoted', twenty!") == "it's 9 o'clock quoted 20"


@pytest.mark.parametrize("ref,hyp,counts", [
    ("a b c d", "a b c d", (0, 0, 0)),
    ("a b c d", "a x c d", (1, 0, 0)),
    ("a b c d", "a c d", (0, 1, 0)),
    ("a b c d", "a b b c d", (0, 0, 1)),
    ("a b c d", "", (0, 4, 0)),
    ("", "a", (0, 0, 1)),
    ("the cat sat on the mat", "cat sat on on the hat", (1, 1, 1)),
])
def test_word_errors(ref, hyp, counts):
    e = word_errors(ref, hyp)
    assert (e.substitutions, e.deletions, e.insertions) == counts
    assert e.reference_words == len(ref.split())


def test_wer_values():
    assert wer("One two three four.", "one 2 three four") == 0.0
    assert wer("a b c d", "a x c") == 0.5
    assert wer("", "") == 0.0 and math.isinf(wer("", "a"))


def test_start_errors():
    assert start_errors([0.6, 6.4, 11.2], [0.0, 6.5, 20.0]) == pytest.approx([0.6, 0.1, 4.7])
    assert start_errors([1.0], []) == [math.inf]


def test_longest_repeat():
    assert longest_repeat("") == 0
    assert longest_repeat("a b c") == 1
    assert longest_repeat("very strong strong strong wind") == 3
    assert longest_repeat("go home go home go home now", max_n=2) == 3
    assert longest_repeat("x a b c a b c a b c a b c") == 4
