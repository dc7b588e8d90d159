"""Live transcription (metal_backend.whisper.streaming): the commit rule, the speech gate, and
streams of real audio through tiny.en and the Silero VAD."""

from __future__ import annotations

import json
import threading
import tracemalloc

import numpy as np
import pytest

import metal_backend as mb
from metal_backend.vad import SileroVad
from metal_backend.whisper import DecodingOptions, Whisper, WhisperError, load_audio
from metal_backend.whisper.local_agreement import LocalAgreement, TimedWord
from metal_backend.whisper.speech_gate import WINDOW, SpeechGate, VadParameters
from metal_backend.whisper.streaming import StreamFinishedError
from whisper_testing import word_error_rate

SR = 16000


def words(*spec) -> list[TimedWord]:
    """TimedWords from (text, start) pairs, each 0.3 s long, one segment."""
    return [TimedWord(start, start + 0.3, " " + text, 0.9, 0) for text, start in spec]


# ----------------------------------------------------------------- LocalAgreement (pure logic)

def test_agreement_commits_the_common_prefix_of_two_hypotheses():
    la = LocalAgreement()
    assert la.insert(words(("the", 0.0), ("cat", 0.4))) == []
    assert [w.text for w in la.tentative] == [" the", " cat"]
    committed = la.insert(words(("the", 0.0), ("cat", 0.4), ("sat", 0.8)))
    assert [w.text for w in committed] == [" the", " cat"]
    assert [w.text for w in la.tentative] == [" sat"]
    # A revised word is not committed; the agreed one after the revision is not either.
    assert la.insert(words(("the", 0.0), ("cat", 0.4), ("sang", 0.8), ("on", 1.2))) == []
    assert [w.text for w in la.insert(words(("sang", 0.8), ("on", 1.2)))] == [" sang", " on"]


def test_agreement_ignores_case_and_punctuation_and_never_commits_twice():
    la = LocalAgreement()
    la.insert(words(("Hello", 0.0), ("world", 0.4)))
    committed = la.insert(words(("hello,", 0.0), ("world.", 0.4)))
    assert [w.text for w in committed] == [" hello,", " world."]  # the newer spelling
    # Re-transcriptions of the committed words (times jittered past the tolerance) are dropped
    # by the n-gram check, so the next words commit exactly once.
    la.insert(words(("hello", 0.45), ("world", 0.75), ("again", 1.1)))
    committed = la.insert(words(("hello", 0.5), ("world", 0.8), ("again", 1.1)))
    assert [w.text for w in committed] == [" again"]
    assert [w.text for w in la.flush(words(("world", 0.7), ("again", 1.1), ("friend", 1.5)))] == [" friend"]
    assert la.tentative == []


def test_agreement_holds_agreed_words_that_end_near_the_audio_end():
    la = LocalAgreement()
    la.insert(words(("the", 0.0), ("cat", 0.4), ("sat", 0.8)), audio_end=1.2, hold=0.3)
    # Both agree on all three words, but "sat" ends at 1.1, within 0.3 s of this hypothesis's end
    # (1.3): it and whatever follows wait.
    committed = la.insert(words(("the", 0.0), ("cat", 0.4), ("sat", 0.8)), audio_end=1.3, hold=0.3)
    assert [w.text for w in committed] == [" the", " cat"]
    assert [w.text for w in la.tentative] == [" sat"]
    # The next hypothesis hears it revised: nothing more is committed; one after that agrees.
    assert la.insert(words(("sang", 0.8), ("on", 1.2)), audio_end=1.8, hold=0.3) == []
    assert [w.text for w in la.insert(words(("sang", 0.8), ("on", 1.2)), audio_end=2.3, hold=0.3)] == [" sang",
                                                                                                       " on"]


def test_agreement_holds_agreed_words_heard_with_low_probability():
    def guessed(*spec, p=0.9):
        return [TimedWord(start, start + 0.3, " " + text, p if text == guess else 0.9, 0) for text, start in spec]

    guess = "sailed"
    la = LocalAgreement()
    la.insert(guessed(("the", 0.0), ("corner", 0.4), ("sailed", 0.8), ("through", 1.2), p=0.14), min_probability=0.5)
    # Both agree on four words, but this one hears "sailed" at 0.19: it and what follows wait.
    committed = la.insert(guessed(("the", 0.0), ("corner", 0.4), ("sailed", 0.8), ("through", 1.2), p=0.19),
                          min_probability=0.5)
    assert [w.text for w in committed] == [" the", " corner"]
    assert [w.text for w in la.tentative] == [" sailed", " through"]
    # The final pass commits what it hears, whatever its probability.
    assert [w.text for w in la.flush(guessed(("sells", 0.8), ("fruit", 1.2)))] == [" sells", " fruit"]
    # Without the bound (0: the rule before) the two guesses commit.
    la = LocalAgreement()
    la.insert(guessed(("the", 0.0), ("sailed", 0.4), p=0.14))
    assert [w.text for w in la.insert(guessed(("the", 0.0), ("sailed", 0.4), p=0.19))] == [" the", " sailed"]


def test_unsure_agreement_commits_a_low_probability_word_once_more_hypotheses_agree():
    def hyp(*spec):
        return [TimedWord(0.4 * i, 0.4 * i + 0.3, " " + text, p, 0) for i, (text, p) in enumerate(spec)]

    # A sentence's first word heard the same at low probability ('The' at 0.22 in four hypotheses
    # of 'The weather report'): two agreeing hypotheses do not commit it, a third does.
    la = LocalAgreement()
    heard = hyp(("the", 0.22), ("weather", 0.9))
    assert la.insert(heard, min_probability=0.5, unsure=3) == []
    assert la.insert(heard, min_probability=0.5, unsure=3) == []
    assert [w.text for w in la.insert(heard, min_probability=0.5, unsure=3)] == [" the", " weather"]
    # A third that revises it commits nothing; the confident words still need only two.
    la = LocalAgreement()
    la.insert(hyp(("a", 0.9), ("the", 0.22)), min_probability=0.5, unsure=3)
    assert [w.text for w in la.insert(hyp(("a", 0.9), ("the", 0.22)), min_probability=0.5, unsure=3)] == [" a"]
    assert la.insert(hyp(("a", 0.9), ("but", 0.53)), min_probability=0.5, unsure=3) == []
    # Without it (None, the default) they wait however many agree.
    la = LocalAgreement()
    for _ in range(4):
        assert la.insert(heard, min_probability=0.5) == []


@pytest.mark.parametrize("n", [0, 2, 7, 2.5, True])
def test_bad_unsure_agreement_raises_before_anything_is_built(n):
    from metal_backend.whisper.streaming import Stream
    with pytest.raises(WhisperError, match="unsure_agreement"):
        Stream(None, DecodingOptions(), None, unsure_agreement=n)


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan"), "0.5", True])
def test_bad_commit_probability_raises_before_anything_is_built(p):
    from metal_backend.whisper.streaming import Stream
    with pytest.raises(WhisperError, match="commit_probability"):
        Stream(None, DecodingOptions(), None, commit_probability=p)


@pytest.mark.parametrize("hold", [-0.1, 6.0, float("nan")])
def test_bad_edge_hold_raises_before_anything_is_built(hold):
    from metal_backend.whisper.streaming import Stream
    with pytest.raises(WhisperError, match="edge_hold_seconds"):
        Stream(None, DecodingOptions(), None, edge_hold_seconds=hold)


# ----------------------------------------------------------------- SpeechGate (scripted probabilities)

def test_speech_gate_hysteresis_padding_and_min_silence():
    params = VadParameters(threshold=0.5, min_silence_duration_ms=100, speech_pad_ms=32)
    gate = SpeechGate(params)
    probs = [0.1] * 10 + [0.9] * 5 + [0.4] * 2 + [0.9] * 3 + [0.1] * 4 + [0.2] * 3
    events = gate.feed(probs[:12]) + gate.feed(probs[12:])
    # 0.4 is above neg_threshold (0.35): no end there; 100 ms of silence = 4 windows.
    assert events == [("start", 10 * WINDOW - 512), ("end", 20 * WINDOW + 512)]
    assert gate.voiced_end == 20 * WINDOW and not gate.in_speech


@pytest.mark.parametrize("kwargs", [{"threshold": 1.5}, {"threshold": 0.5, "neg_threshold": 0.7},
                                    {"min_silence_duration_ms": -1}, {"speech_pad_ms": "x"}])
def test_bad_vad_parameters(kwargs):
    with pytest.raises(WhisperError):
        VadParameters(**kwargs)


# ----------------------------------------------------------------- streams through tiny.en

@pytest.fixture(scope="module")
def model(tiny_en_dir) -> Whisper:
    return Whisper.load(tiny_en_dir, device=mb.device(), threads=2)


@pytest.fixture(scope="module")
def vad() -> SileroVad:
    return SileroVad.load(device="CPU")


@pytest.fixture(scope="module")
def passage(asset):
    reference = json.loads(asset("passage.json").read_text())
    return load_audio(asset("passage.wav")), " ".join(s["text"] for s in reference["sentences"])


def test_transcribe_window_is_one_encoding_with_words(model, asset):
    """The stream's hypothesis step: one encoder run per call (no second window for the words
    after the last timestamp), and on a clip that fits one window the segments and words of the
    long-form loop's first window."""
    audio = load_audio(asset("jfk.wav"))
    options = DecodingOptions(beam_size=None, temperature=0.0, language="en", word_timestamps=True)
    encodes = []
    original = model.compute.encode
    model.compute.encode = lambda mel: encodes.append(1) or original(mel)
    try:
        window = model.transcribe_window(audio, options)
        # The clip cut mid-sentence: the unfinished last segment is kept, still one encoding.
        cut = model.transcribe_window(audio[:int(6.3 * SR)], options)
    finally:
        del model.compute.encode
    assert len(encodes) == 2
    offline = model.transcribe(audio, options)
    assert [s.text for s in window.segments] == [s.text for s in offline.segments]
    assert [(w.word, w.start, w.end) for s in window.segments for w in s.words] == \
        [(w.word, w.start, w.end) for s in offline.segments for w in s.words]
    assert "ask not what your country" in cut.text.lower(), cut.text
    assert cut.segments[-1].end <= 6.3 + 1e-6 and all(s.words for s in cut.segments)
    with pytest.raises(WhisperError, match="at most 480000 samples"):
        model.transcribe_window(np.zeros(31 * SR, np.float32), options)
    assert model.transcribe_window(np.zeros(SR, np.float32), options).segments == []


def test_passage_stream_matches_offline(model, vad, passage):
    """65 s of speech in 2 s pushes: the committed text is the offline text (WER within 2 points
    of the offline WER of the same options: no word lost or doubled where stretches join), in time
    order, every segment ending within the audio pushed so far."""
    samples, reference = passage
    s = model.stream(vad=vad, language="en", word_timestamps=True)
    step = 2 * SR
    for i in range(0, samples.size, step):
        for seg in s.push(samples[i:i + step]):
            assert seg.end <= (i + step) / SR + 1e-6, (seg, i)
            assert seg.words and seg.words[0].start >= seg.start - 1e-6 and seg.words[-1].end <= seg.end + 1e-6
    s.finish()
    segments = s.segments
    assert [seg.id for seg in segments] == list(range(len(segments)))
    for a, b in zip(segments, segments[1:]):
        assert a.start <= a.end <= b.start + 1e-6, (a, b)
    offline = model.transcribe(samples, beam_size=None, temperature=0.0, language="en")
    streamed, off = word_error_rate(reference, s.text), word_error_rate(reference, offline.text)
    assert streamed <= off + 0.02, (streamed, off, s.text)
    assert s.tentative == ""


def test_one_long_stretch_keeps_the_buffer_within_a_window(model, vad, passage):
    """With a VAD that never hears the pauses end speech (min silence 5 s), 40 s of the passage
    are one stretch: the buffer is cut at committed segment ends and never holds more than 30 s,
    and the text is still the offline text."""
    samples, _ = passage
    samples = samples[:40 * SR]
    s = model.stream(vad=vad, language="en", vad_parameters={"min_silence_duration_ms": 5000})
    held = []
    for i in range(0, samples.size, 2 * SR):
        s.push(samples[i:i + 2 * SR])
        held.append(s.buffer_seconds)
    s.finish()
    assert max(held) <= 30.0 and max(held) < 40.0 - 10.0, held
    offline = model.transcribe(samples, beam_size=None, temperature=0.0, language="en")
    assert word_error_rate(offline.text, s.text) <= 0.05, (s.text, offline.text)


def test_silence_and_noise_commit_nothing(model, vad):
    rng = np.random.default_rng(1)
    audio = np.concatenate([np.zeros(10 * SR), 0.05 * rng.standard_normal(10 * SR),
                            0.003 * rng.standard_normal(10 * SR)]).astype(np.float32)
    s = model.stream(vad=vad)
    for i in range(0, audio.size, SR // 2):
        assert s.push(audio[i:i + SR // 2]) == []
        assert s.tentative == ""
    assert s.finish() == [] and s.segments == [] and s.text == ""
    assert s.pushed_seconds == pytest.approx(30.0)


def test_an_hour_of_silence_and_noise_stays_in_bounded_memory(model, vad):
    """3600 s pushed as fast as the VAD takes it: the stream holds at most its pre-roll, and the
    memory it allocates on the way stays far below the hour's 230 MB of samples."""
    rng = np.random.default_rng(2)
    s = model.stream(vad=vad)
    chunk = 30 * SR
    noise = (0.02 * rng.standard_normal(chunk)).astype(np.float32)
    silence = np.zeros(chunk, np.float32)
    held = []
    tracemalloc.start()
    try:
        for i in range(3600 * SR // chunk):
            assert s.push(noise if i % 2 else silence) == []
            held.append(s.buffer_seconds)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert s.pushed_seconds == pytest.approx(3600.0)
    assert max(held) < 0.5, max(held)
    assert peak < 32 << 20, peak
    assert s.finish() == [] and s.segments == []


def test_a_push_during_a_transcription_is_queued_not_dropped(model, vad, passage):
    """A push from a second thread while the first push transcribes returns at once; its audio is
    transcribed later (finish here) and a reader thread sees consistent snapshots throughout."""
    samples, _ = passage
    started, release = threading.Event(), threading.Event()

    class Gated:
        data = model.data

        def transcribe_window(self, audio, options=None, previous=(), prefix=()):
            started.set()
            release.wait(60)
            return model.transcribe_window(audio, options, previous, prefix)

    from metal_backend.whisper.streaming import Stream, stream_options
    s = Stream(Gated(), stream_options(None, {"language": "en"}), vad)
    first, second = samples[:6 * SR], samples[6 * SR:11 * SR]  # sentence 1, then sentence 2
    results = {}
    pusher = threading.Thread(target=lambda: results.setdefault("first", s.push(first)))
    pusher.start()
    assert started.wait(60)
    assert s.push(second) == []  # queued: returns while the other push transcribes
    assert s.pushed_seconds == pytest.approx(11.0)
    snapshots = [(s.tentative, s.segments) for _ in range(100)]
    assert all(isinstance(t, str) and isinstance(seg, list) for t, seg in snapshots)
    release.set()
    pusher.join(120)
    s.finish()
    text = s.text.lower()
    assert "library opens" in text and "notebook" in text, text


@pytest.mark.parametrize("chunk,message", [
    (np.zeros(100, np.int16), "dtype int16"),
    (np.array([0.0, np.nan, 0.0], np.float32), "non-finite"),
    (np.zeros((2, 100), np.float32), "1-D"),
    (np.array([1 + 1j]), "dtype complex"),
])
def test_bad_chunks_raise_typed_errors(model, vad, chunk, message):
    s = model.stream(vad=vad)
    with pytest.raises(WhisperError, match=message):
        s.push(chunk)
    assert s.push(np.zeros(0, np.float32)) == []  # the stream is still usable


def test_push_after_finish_and_bad_options(model, vad):
    s = model.stream(vad=vad)
    s.push(np.zeros(SR, np.float32))
    assert s.finish() == []
    assert s.finish() == []
    with pytest.raises(StreamFinishedError, match="after finish"):
        s.push(np.zeros(10, np.float32))
    assert isinstance(StreamFinishedError("x"), WhisperError)
    with pytest.raises(WhisperError, match="unknown decoding option 'beam'"):
        model.stream(vad=vad, beam=3)
    with pytest.raises(WhisperError, match="unknown VAD parameter 'thresh'"):
        model.stream(vad=vad, vad_parameters={"thresh": 0.3})


def test_callbacks_see_every_commit_and_tentative_change(model, vad, passage):
    samples, _ = passage
    commits, tentatives = [], []
    s = model.stream(vad=vad, language="en", on_commit=commits.append, on_tentative=tentatives.append)
    for i in range(0, 12 * SR, SR // 2):
        s.push(samples[i:i + SR // 2])
    s.finish()
    assert [seg for batch in commits for seg in batch] == s.segments and s.segments
    assert tentatives and tentatives[-1] == ""
    assert all(a != b for a, b in zip(tentatives, tentatives[1:]))


@pytest.mark.skipif(not [d for d in mb.devices() if d.name == "MetalSim"], reason="MetalSim not built")
def test_a_stream_on_metalsim_commits_what_the_cpu_commits(tiny_en_dir, vad, asset):
    """The same stream on MetalSim (every Metal kernel Whisper uses, run on the CPU), at the cost
    of one transcription: a sentence in one push, cut before the VAD hears it end, is one
    hypothesis (all of it tentative: one hypothesis agrees with nothing), and finish() commits it
    from that same hypothesis (same audio, same prompt, a greedy final pass: final_beam_size=None;
    a beam final pass decodes it again, see test_stream_final_beam.py). Tentative text,
    committed segments and their word texts equal the CPU device's."""
    audio = load_audio(asset("door_light.wav"))[:int(2.7 * SR)]  # speech ends at 2.62 s
    results = []
    for device in ("CPU", "MetalSim"):
        m = Whisper.load(tiny_en_dir, device=device, threads=2)
        calls = []
        original = m.transcribe_window
        m.transcribe_window = lambda *a, **k: calls.append(1) or original(*a, **k)
        s = m.stream(vad=vad, language="en", word_timestamps=True, final_beam_size=None)
        assert s.push(audio) == []
        tentative = s.tentative
        committed = s.finish()
        assert len(calls) == 1, (device, len(calls))
        assert committed == s.segments and s.tentative == ""
        results.append((tentative, [(seg.text, [w.word for w in seg.words]) for seg in committed], s.text))
    assert results[1] == results[0], results
    assert "open the door" in results[0][2].lower() and results[0][0].lower() in results[0][2].lower(), results
