"""Unsure words settled by a beam pass inside the stretch (Stream confirm_beam_size): when the
greedy hypotheses agree on a word but give it less than commit_probability, the next
transcription decodes with a beam, and the words it agrees on with the hypothesis before are
committed then, not at the end of the stretch. Scripted world of test_stream_joins (fake VAD,
fake model): no network runs."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_stream_joins import SCALE, SR, ScriptedModel, ScriptedVad, expected, world

from metal_backend.whisper import DecodingOptions, Whisper, WhisperError
from metal_backend.whisper.local_agreement import LocalAgreement, TimedWord, word_key
from metal_backend.whisper.streaming import Stream, stream_options
from metal_backend.whisper.transcript import Word


class UnsureFirstWordModel(ScriptedModel):
    """The scripted model, hearing each sentence's first word at probability 0.3 (Whisper is
    often unsure of a sentence's first word: 'The' at 0.22) and, decoding greedily, misspelling
    the `wrong` words ('But when the' for 'The weather report') at 0.55, which a beam hears right.
    Notes the beam each call decoded with."""

    def __init__(self, data, sentences, wrong=()):
        super().__init__(data, sentences)
        self.firsts = {sentence[0][2].strip() for sentence in sentences}
        self.wrong = set(wrong)
        self.beams = []

    def transcribe_window(self, audio, options=None, previous=(), prefix=()):
        result = super().transcribe_window(audio, options, previous, prefix)
        beam = options.beam_size if options is not None else None
        self.beams.append(beam)
        for seg in result.segments:
            for k, w in enumerate(seg.words):
                spoken = w.word.strip()
                if spoken in self.wrong and beam is None:
                    seg.words[k] = Word(w.start, w.end, " wrong" + spoken, 0.55)
                elif spoken in self.firsts:
                    seg.words[k] = Word(w.start, w.end, w.word, 0.3)
        return result


# Three sentences 3 s apart (longer than context_gap_seconds): a stretch each, 4.4-6 s long.
SENTENCES = world([(0.5, 12), (9.0, 15), (18.0, 11)])


def stream(fake, seconds: float = 26.0, **kwargs):
    """Pushes the world in 0.5 s chunks; returns the stream and, per committed word, its
    normalised spelling, the end of the audio pushed when it was committed and the end of its stretch."""
    options = stream_options(None, {"language": "en", "word_timestamps": True})
    s = Stream(fake, options, ScriptedVad(fake.sentences), **kwargs)
    samples = (np.arange(int(seconds * SR)) * SCALE).astype(np.float32)
    when = []
    for i in range(0, samples.size, SR // 2):
        for seg in s.push(samples[i:i + SR // 2]):
            when += [(word_key(w.word), (i + SR // 2) / SR) for w in seg.words]
    when += [(word_key(w.word), seconds) for seg in s.finish() for w in seg.words]
    return s, when


def stretch_end(word: str) -> float:
    for sentence in SENTENCES:
        if word in {word_key(text) for _, _, text in sentence}:
            return sentence[-1][1]
    raise KeyError(word)


def test_held_names_an_agreed_word_held_back_for_its_probability_alone():
    def hyp(*spec):
        return [TimedWord(0.4 * i, 0.4 * i + 0.3, " " + text, p, 0) for i, (text, p) in enumerate(spec)]

    la = LocalAgreement()
    la.insert(hyp(("the", 0.3), ("cat", 0.9)), min_probability=0.5)
    assert la.held is None  # nothing to agree with yet
    assert la.insert(hyp(("the", 0.3), ("cat", 0.9)), min_probability=0.5) == []
    assert la.held is not None and la.held.text == " the"
    # Revised (no agreement): not held for its probability.
    la.insert(hyp(("a", 0.3), ("cat", 0.9)), min_probability=0.5)
    assert la.held is None
    # Held at the edge, not for its probability: None.
    la = LocalAgreement()
    la.insert(hyp(("the", 0.3)), audio_end=0.4, hold=0.3, min_probability=0.5)
    la.insert(hyp(("the", 0.3)), audio_end=0.4, hold=0.3, min_probability=0.5)
    assert la.held is None
    la.insert(hyp(("the", 0.3), ("cat", 0.9)), min_probability=0.5)
    la.flush()
    assert la.held is None


def test_a_beam_pass_commits_the_unsure_words_before_the_stretch_ends(tiny_en):
    fake = UnsureFirstWordModel(tiny_en, SENTENCES)
    s, when = stream(fake)  # confirm_beam_size 5 by default
    committed = [w for w, _ in when]
    assert committed == expected(SENTENCES), committed  # none lost, none doubled, in order
    firsts = [word_key(sentence[0][2]) for sentence in SENTENCES]
    for word, at in when:
        if word in firsts:  # committed by a push well inside its stretch, not by its final pass
            assert at < stretch_end(word) - 1.0, (word, at, when)
    # Beam passes besides the final ones (one per stretch, each after greedy hypotheses).
    assert fake.beams.count(5) > len(SENTENCES), fake.beams
    assert fake.beams[0] is None and fake.beams.count(None) > fake.beams.count(5), fake.beams


def test_without_it_the_unsure_words_wait_for_the_final_pass(tiny_en):
    fake = UnsureFirstWordModel(tiny_en, SENTENCES)
    s, when = stream(fake, confirm_beam_size=None)
    assert [w for w, _ in when] == expected(SENTENCES)
    firsts = [word_key(sentence[0][2]) for sentence in SENTENCES]
    for word, at in when:
        if word in firsts:
            assert at >= stretch_end(word), (word, at)
    assert fake.beams.count(5) == len(SENTENCES), fake.beams  # the final passes only


def test_a_word_the_beam_hears_otherwise_is_not_committed_by_it(tiny_en):
    # Greedy decoding mishears two words of the second sentence the same way each time (at 0.55,
    # under commit_probability 0.6): the beam pass does not agree, so they are never committed
    # as misheard; the final pass (a beam) commits them as spoken.
    wrong = {SENTENCES[1][0][2].strip(), SENTENCES[1][1][2].strip()}
    fake = UnsureFirstWordModel(tiny_en, SENTENCES, wrong=wrong)
    s, when = stream(fake, confirm_beam_size=5, commit_probability=0.6)
    assert [w for w, _ in when] == expected(SENTENCES), when
    # Bounded: one confirming beam pass per committed prefix it was asked for, so no more beam
    # passes than greedy ones.
    assert fake.beams.count(5) < fake.beams.count(None), fake.beams


def test_whisper_stream_passes_confirm_beam_size_on(tiny_en):
    fake = UnsureFirstWordModel(tiny_en, SENTENCES)
    s = Whisper.stream(fake, vad=ScriptedVad(SENTENCES), language="en", confirm_beam_size=3)
    samples = (np.arange(int(26.0 * SR)) * SCALE).astype(np.float32)
    for i in range(0, samples.size, SR // 2):
        s.push(samples[i:i + SR // 2])
    s.finish()
    assert 3 in fake.beams and 5 in fake.beams, fake.beams  # confirming passes, final passes


@pytest.mark.parametrize("beam", [0, -1, 2.5, "5", True, float("nan")])
def test_bad_confirm_beam_size_raises_naming_it(beam):
    with pytest.raises(WhisperError, match=re.escape(f"confirm_beam_size must be a positive integer or None "
                                                     f"(got {beam!r})")):
        Stream(None, DecodingOptions(), None, confirm_beam_size=beam)
