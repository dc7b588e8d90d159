"""Helpers shared by the Whisper tests: expected transcripts, text normalisation, optional dependencies."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "generated"

JFK_TEXT = ("And so my fellow Americans, ask not what your country can do for you, "
            "ask what you can do for your country.")
DOOR_TEXT = "Please open the door and turn on the light."
MORNING_TEXT = "Good morning. How are you today?"


def normalize(text: str) -> str:
    """Lower case, punctuation dropped (apostrophes kept), single spaces."""
    text = re.sub(r"[^\w\s']", " ", text.lower())
    return " ".join(text.split())


def require(available: bool, what: str) -> None:
    """Skips (developer machine) or fails (CI) when an optional dependency is missing."""
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI is missing {what}", pytrace=False)
    pytest.skip(f"missing {what}")


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level Levenshtein distance over the reference's word count, on normalised text."""
    ref, hyp = normalize(reference).split(), normalize(hypothesis).split()
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h))
        previous = current
    return previous[-1] / max(len(ref), 1)
