"""The forced decoder prefix of live transcription: the decoder continues after forced tokens
(the rules and the cache see them, the scores count only what it samples), and the stream forces
the committed words of its buffer, takes them off the hypothesis by position and commits every
spoken word once, whatever times the alignment gives the forced ones."""

from __future__ import annotations

import numpy as np
import pytest
from test_stream_joins import SCALE, SR, ScriptedModel, ScriptedVad, expected, world

from metal_backend.whisper import DecodingOptions, WhisperError, WindowDecoder
from metal_backend.whisper.local_agreement import LocalAgreement, TimedWord, word_key
from metal_backend.whisper.streaming import Stream, stream_options
from metal_backend.whisper.tokenizer import Tokenizer
from metal_backend.whisper.transcript import Segment, Transcript, Word
from test_whisper_decoding import EN, NO_TS, TB, ScriptedCompute, TreeCompute, fake_model

EOT = 50256


def _tree(p):
    return {k: {t: float(np.log(v)) for t, v in d.items()} for k, d in p.items()}


def test_greedy_continues_after_a_forced_prefix_fed_in_one_batch():
    # Greedy alone takes 1000; forced to start with 1001 it continues that branch.
    tree = _tree({(): {1000: 0.6, 1001: 0.4}, (1000,): {EOT: 1.0}, (1001,): {1002: 0.9, EOT: 0.1},
                  (1001, 1002): {1003: 0.8, EOT: 0.2}, (1001, 1002, 1003): {EOT: 1.0}})
    decoder = WindowDecoder(fake_model(EN), DecodingOptions(beam_size=None, **NO_TS))
    assert decoder.decode(TreeCompute(EN.n_vocab, tree, 2), "F").tokens == [1000]
    compute = TreeCompute(EN.n_vocab, tree, 2)
    result = decoder.decode(compute, "F", prefix=[1001, 1002])
    assert result.tokens == [1001, 1002, 1003]
    # Only the sampled tokens (1003 and the end) are scored.
    assert result.sum_logprob == pytest.approx(np.log(0.8), abs=1e-4)
    assert result.avg_logprob == pytest.approx(np.log(0.8) / 2, abs=1e-4)
    # <|startoftranscript|>, then <|notimestamps|> and the whole prefix in one call, then 1003.
    assert len(compute.batch_sizes) == 3 and compute.histories == [[50257, 50362, 1001, 1002, 1003]]


def test_beam_search_continues_after_a_forced_prefix():
    # After the forced 1001 greedy takes 1002 (0.6); the beam finds 1003 1000 (0.4 * 0.95).
    tree = _tree({(): {1000: 0.9, 1001: 0.1}, (1001,): {1002: 0.6, 1003: 0.4},
                  (1001, 1002): {EOT: 0.3, 1000: 0.35, 1003: 0.35}, (1001, 1002, 1000): {EOT: 1.0},
                  (1001, 1002, 1003): {EOT: 1.0}, (1001, 1003): {1000: 0.95, EOT: 0.05},
                  (1001, 1003, 1000): {EOT: 1.0}})
    greedy = WindowDecoder(fake_model(EN), DecodingOptions(beam_size=None, **NO_TS))
    assert greedy.decode(TreeCompute(EN.n_vocab, tree, 2), "F", prefix=[1001]).tokens[:2] == [1001, 1002]
    decoder = WindowDecoder(fake_model(EN), DecodingOptions(beam_size=3, **NO_TS))
    result = decoder.decode(TreeCompute(EN.n_vocab, tree, 2), "F", prefix=[1001])
    assert result.tokens == [1001, 1003, 1000]
    assert result.sum_logprob == pytest.approx(np.log(0.4 * 0.95), abs=1e-4)


def test_the_timestamp_rules_see_the_forced_prefix():
    # The prefix ends on a closing timestamp (<|1.20|>): text may not follow, nor an earlier
    # timestamp; the most preferred allowed token is the later timestamp <|1.40|>.
    compute = ScriptedCompute(EN.n_vocab, [[0], [1001, TB + 10, TB + 70], [1002], [EOT]])
    decoder = WindowDecoder(fake_model(EN), DecodingOptions(beam_size=None))
    result = decoder.decode(compute, ("F", 1), prefix=[TB + 50, 1000, TB + 60])
    assert result.tokens[:5] == [TB + 50, 1000, TB + 60, TB + 70, 1002]
    # The prefix went in after <|startoftranscript|>, in one call at offset 1.
    assert compute.calls[1][1:] == ([[TB + 50, 1000, TB + 60]], 1)


def test_bad_prefixes_raise():
    decoder = WindowDecoder(fake_model(EN), DecodingOptions(beam_size=None, **NO_TS))
    compute = ScriptedCompute(EN.n_vocab, [[0], [EOT]])
    for bad in ([EOT], [1000, 50257], [-1], [EN.n_vocab]):
        with pytest.raises(WhisperError, match=f"prefix token {bad[-1]} is not a text or timestamp token"):
            decoder.decode(compute, ("F", 1), prefix=bad)
    with pytest.raises(WhisperError, match="prefix of 450 leave no room in the text context of 448"):
        decoder.decode(compute, ("F", 1), prefix=[1000] * 450)


class PrefixModel(ScriptedModel):
    """Honours a forced prefix as Whisper does: the prefix's words come first, then the words it
    hears after the last of them. The forced words come back aligned `shift` seconds late (so a
    filter by time alone would take them for new words); `glue` calls glue a token onto the last
    forced word ('w7' heard as 'w7s', which then is no forced word). The first word after them
    comes back starting `lead` seconds early, over the end of the last forced one (a filter by time
    would take it for a committed word and lose it)."""

    def __init__(self, data, sentences, shift=0.35, glue=(), lead=0.25):
        super().__init__(data, sentences)
        self.tokenizer = Tokenizer(data.vocab, data.special)
        self.shift = shift
        self.lead = lead
        self.glue = set(glue)
        self.prefixes = []  # (prefix tokens, committed keys when the call was made)
        self.stream = None
        self.glued = 0

    def transcribe_window(self, audio, options=None, previous=(), prefix=()):
        heard = super().transcribe_window(audio, options, previous)
        if not prefix:
            return heard
        self.prefixes.append((list(prefix), [word_key(w.word) for s in self.stream.segments for w in s.words]))
        text = self.tokenizer.decode([t for t in prefix if t < self.data.special.eot])
        forced = [" " + w for w in text.split()]
        last = int(word_key(forced[-1])[1:])
        if len(self.calls) in self.glue:
            forced[-1] += "s"
            self.glued += 1
        words = [Word(min(0.1 + 0.4 * k + self.shift, audio.size / SR), min(0.4 + 0.4 * k + self.shift,
                      audio.size / SR), w, 0.9) for k, w in enumerate(forced)]
        after = []
        for seg in heard.segments:
            after += [w for w in seg.words if word_key(w.word).startswith("w") and word_key(w.word)[1:].isdigit()
                      and int(word_key(w.word)[1:]) > last or word_key(w.word).endswith("x")
                      and word_key(w.word)[1:-1].isdigit() and int(word_key(w.word)[1:-1]) > last]
        if after:
            after[0] = Word(max(after[0].start - self.lead, 0.0), after[0].end, after[0].word, after[0].probability)
        words += after
        segment = Segment(id=0, seek=0, start=0.0, end=words[-1].end, text="".join(w.word for w in words),
                          tokens=[], temperature=0.0, avg_logprob=-0.1, compression_ratio=1.0, no_speech_prob=0.01,
                          words=words)
        return Transcript(text=segment.text.strip(), segments=[segment])


def _run(model, sentences, seconds, **kwargs):
    samples = (np.arange(int(seconds * SR)) * SCALE).astype(np.float32)
    s = Stream(model, stream_options(None, {"language": "en", "word_timestamps": True}), ScriptedVad(sentences),
               **kwargs)
    model.stream = s
    for i in range(0, samples.size, SR // 2):
        s.push(samples[i:i + SR // 2])
    s.finish()
    return [word_key(w.word) for seg in s.segments for w in seg.words]


@pytest.mark.parametrize("glue", [(), (4, 9)])
def test_the_stream_forces_its_committed_words_and_commits_every_word_once(tiny_en, glue):
    # Two stretches joined by a short pause (left context) and a long one, sentences long enough
    # that the buffer holds committed words for several hypotheses.
    sentences = world([(0.5, 12), (6.0, 10), (10.6, 9), (17.0, 8)])
    model = PrefixModel(tiny_en, sentences, glue=glue)
    committed = _run(model, sentences, 22.0, forced_prefix=True)
    assert committed == expected(sentences), committed
    assert len(model.prefixes) >= 10 and model.glued == len(glue)
    tb = tiny_en.special.timestamp_begin
    tokenizer = Tokenizer(tiny_en.vocab, tiny_en.special)
    for prefix, before in model.prefixes:
        # The prefix is the latest committed words, verbatim, as timestamped segments.
        keys = [word_key(w) for w in tokenizer.decode([t for t in prefix if t < tb]).split()]
        assert keys and before[-len(keys):] == keys, (keys, before)
        stamps = [t for t in prefix if t >= tb]
        assert prefix[0] >= tb and stamps == sorted(stamps)


def test_without_the_forced_prefix_nothing_is_forced(tiny_en):
    sentences = world([(0.5, 12), (6.0, 10)])
    model = PrefixModel(tiny_en, sentences)
    assert _run(model, sentences, 11.0) == expected(sentences)  # the default
    assert model.prefixes == []


def _words(*spec):
    return [TimedWord(start, start + 0.3, " " + text, 0.9, 0) for text, start in spec]


def test_agreement_of_three_hypotheses_waits_for_the_third():
    la = LocalAgreement(3)
    assert la.insert(_words(("the", 0.0), ("cat", 0.4))) == []
    assert la.insert(_words(("the", 0.0), ("cat", 0.4), ("sat", 0.8))) == []  # two agree: not enough
    # The third agrees on "the" only; "cap" breaks the run, so nothing after it either.
    assert [w.text for w in la.insert(_words(("the", 0.0), ("cap", 0.4), ("sat", 0.8)))] == [" the"]
    # The last three (after "the") are "cat sat", "cap sat", "cat sat on": they disagree on the first word.
    assert la.insert(_words(("cat", 0.4), ("sat", 0.8), ("on", 1.2))) == []
    assert [w.text for w in la.insert(_words(("cat", 0.4), ("sat", 0.8), ("on", 1.2)))] == []
    assert [w.text for w in la.insert(_words(("cat", 0.4), ("sat", 0.8), ("on", 1.2), ("it", 1.6)))] == \
        [" cat", " sat", " on"]
    assert [w.text for w in la.flush()] == [" it"]


@pytest.mark.parametrize("n", [1, 6, 2.0, True])
def test_bad_agreement_counts_raise(n):
    with pytest.raises(WhisperError, match="agreement must be an integer in 2..5"):
        Stream(None, DecodingOptions(), None, agreement=n)
    if n in (1, 2.0):
        with pytest.raises(ValueError, match="n >= 2"):
            LocalAgreement(n if n == 1 else 2.0)


def test_whisper_stream_passes_forced_prefix_on(tiny_en):
    from metal_backend.whisper import Whisper
    sentences = world([(0.5, 12)])
    model = PrefixModel(tiny_en, sentences)
    s = Whisper.stream(model, vad=ScriptedVad(sentences), language="en", word_timestamps=True, forced_prefix=True)
    model.stream = s
    samples = (np.arange(int(6.0 * SR)) * SCALE).astype(np.float32)
    for i in range(0, samples.size, SR // 2):
        s.push(samples[i:i + SR // 2])
    s.finish()
    assert model.prefixes and [word_key(w.word) for seg in s.segments for w in seg.words] == expected(sentences)


def test_whisper_stream_passes_agreement_and_commit_probability_on(tiny_en):
    from metal_backend.whisper import Whisper
    from metal_backend.whisper.streaming import COMMIT_PROBABILITY
    sentences = world([(0.5, 4)])
    s = Whisper.stream(PrefixModel(tiny_en, sentences), vad=ScriptedVad(sentences), agreement=3,
                       commit_probability=0.25)
    assert s._agreement.n == 3 and s._commit_probability == 0.25
    s = Whisper.stream(PrefixModel(tiny_en, sentences), vad=ScriptedVad(sentences))
    assert s._agreement.n == 2 and s._commit_probability == COMMIT_PROBABILITY
