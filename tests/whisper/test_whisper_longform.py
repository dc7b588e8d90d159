"""Long-form transcription, silence, language detection and threads with real models on the backend."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import metal_backend as mb
from metal_backend.whisper import BackendWhisper, DecodingOptions, Whisper, WindowDecoder, load_audio, mel_windows
from whisper_testing import DOOR_TEXT, JFK_TEXT, normalize, word_error_rate


@pytest.fixture(scope="module")
def tiny_en_model(tiny_en_dir) -> Whisper:
    return Whisper.load(tiny_en_dir, device=mb.device(), threads=2)


@pytest.fixture(scope="module")
def base_model(base_dir) -> Whisper:
    return Whisper.load(base_dir, device=mb.device(), threads=2)


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def test_passage_across_windows(tiny_en_model, asset):
    # 65 s, 12 sentences: at least three windows, each join falling inside or between sentences.
    path = asset("passage.wav")
    sentences = json.loads(Path(path).with_suffix(".json").read_text())["sentences"]
    progress: list[tuple[float, float]] = []
    result = tiny_en_model.transcribe(path, progress=lambda done, total: progress.append((done, total)))
    reference = " ".join(s["text"] for s in sentences)
    assert word_error_rate(reference, result.text) <= 0.10, result.text

    # No sentence lost or duplicated: each is found (most of its word pairs present) once.
    hyp = normalize(result.text).split()
    hyp_bigrams = Counter(_ngrams(hyp, 2))
    hyp_trigrams = Counter(_ngrams(hyp, 3))
    for s in sentences:
        words = normalize(s["text"]).split()
        bigrams = _ngrams(words, 2)
        assert sum(b in hyp_bigrams for b in bigrams) >= 0.6 * len(bigrams), f"lost: {s['text']}"
        assert max(hyp_trigrams[t] for t in _ngrams(words, 3)) <= 1, f"duplicated: {s['text']}"
    assert abs(len(hyp) - len(reference.split())) <= 0.05 * len(reference.split())

    # Segments in order, starting near a sentence start; no loops.
    starts = [seg.start for seg in result.segments]
    assert starts == sorted(starts)
    assert all(seg.end > seg.start for seg in result.segments)
    known = np.array([s["start"] for s in sentences])
    near = [np.abs(known - start).min() <= 1.0 for start in starts]
    assert sum(near) >= 0.8 * len(near), list(zip(starts, near))
    assert max(seg.compression_ratio for seg in result.segments) <= 2.4
    assert not re.search(r"\b(\w+)( \1\b){3,}", " ".join(hyp))
    assert all(seg.temperature == 0.0 for seg in result.segments)

    # Progress after every window, up to the whole duration.
    done = [d for d, _ in progress]
    assert len(progress) >= 3 and done == sorted(done)
    assert done[-1] == pytest.approx(progress[-1][1]) == pytest.approx(64.8, abs=0.05)


@pytest.mark.parametrize("kind", ["silence", "white noise"])
def test_silence_and_noise_give_no_text(tiny_en_model, kind):
    rng = np.random.default_rng(0)
    audio = np.zeros(16000 * 10, np.float32) if kind == "silence" else rng.normal(0, 0.1, 16000 * 10).astype(np.float32)
    result = tiny_en_model.transcribe(audio)
    assert result.text == "" and result.segments == []


def test_beam_batch_on_backend_matches_numpy_reference(tiny_en, tiny_en_numpy, asset):
    # Beam search of 5 drives decode_batch and reorder: the same beams on both computes.
    mel = mel_windows(load_audio(asset("jfk.wav")))[0]
    backend = BackendWhisper(tiny_en, device=mb.device(), threads=2)
    decoder = WindowDecoder(tiny_en, DecodingOptions(beam_size=5))
    ours = decoder.decode(backend, backend.encode(mel))
    ref = decoder.decode(tiny_en_numpy, tiny_en_numpy.encode(mel))
    assert ours.tokens == ref.tokens
    assert ours.sum_logprob == pytest.approx(ref.sum_logprob, abs=0.05)
    assert normalize(ours.text) == normalize(JFK_TEXT)
    assert any(b > 1 for _, b, _, _, _ in backend.decoder_graphs) and backend.reorder_graphs


def test_greedy_and_beam_give_the_clip_transcripts(tiny_en_model, asset):
    for options in (DecodingOptions(beam_size=None), DecodingOptions(beam_size=5, patience=2.0)):
        result = tiny_en_model.transcribe(asset("jfk.wav"), options)
        assert normalize(result.text) == normalize(JFK_TEXT)
        assert result.segments[0].start == 0.0 and result.segments[-1].end <= 11.0


def test_one_model_from_two_threads(tiny_en_model, asset):
    clips = {"jfk.wav": JFK_TEXT, "door_light.wav": DOOR_TEXT}
    results: dict[str, str] = {}
    errors: list[BaseException] = []

    def run(clip: str) -> None:
        try:
            for _ in range(2):
                results[clip] = tiny_en_model.transcribe(asset(clip), beam_size=None).text
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(clip,)) for clip in clips]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors and not any(t.is_alive() for t in threads)
    assert {clip: normalize(text) for clip, text in results.items()} == {c: normalize(t) for c, t in clips.items()}


def test_transcribe_inside_transcribe_is_an_error(tiny_en_model, asset):
    from metal_backend.whisper import WhisperError

    def nested(done, total):
        tiny_en_model.transcribe(asset("door_light.wav"))

    with pytest.raises(WhisperError, match="inside a transcribe"):
        tiny_en_model.transcribe(asset("door_light.wav"), beam_size=None, progress=nested)
    # The model is usable afterwards.
    assert normalize(tiny_en_model.transcribe(asset("door_light.wav"), beam_size=None).text) == normalize(DOOR_TEXT)


def test_overrides_and_bad_options(tiny_en_model, asset):
    from metal_backend.whisper import WhisperError

    with pytest.raises(WhisperError, match="unknown decoding option 'beam'"):
        tiny_en_model.transcribe(asset("jfk.wav"), beam=3)
    with pytest.raises(WhisperError, match="beam_size must be"):
        tiny_en_model.transcribe(asset("jfk.wav"), beam_size=0)
    with pytest.raises(WhisperError, match="English-only"):
        tiny_en_model.transcribe(asset("jfk.wav"), language="es")
    with pytest.raises(WhisperError, match="non-finite"):
        tiny_en_model.transcribe(np.full(16000, np.nan))


# ---------------------------------------------------------------- multilingual


@pytest.fixture(scope="module")
def spanish_wav(asset) -> Path:
    """espeak-ng -v es: "Buenos días. Me gustaría reservar una mesa para dos personas esta noche, por favor." """
    return asset("spanish.wav")


def test_language_detection_spanish_and_english(base_model, spanish_wav, asset):
    spanish = base_model.transcribe(spanish_wav)
    assert spanish.language == "es" and spanish.language_probability > 0.5
    words = normalize(spanish.text).split()
    assert {"mesa", "personas", "noche"} <= set(words), spanish.text
    english = base_model.transcribe(asset("jfk.wav"))
    assert english.language == "en" and english.language_probability > 0.5
    assert normalize(english.text) == normalize(JFK_TEXT)


def test_translate_task(base_model, spanish_wav):
    result = base_model.transcribe(spanish_wav, task="translate", language="es")
    assert result.language == "es" and result.language_probability == 1.0
    words = set(normalize(result.text).split())
    # Into English: no Spanish content words left, some English ones.
    assert not words & {"mesa", "personas", "noche", "gustaría"}, result.text
    assert words & {"table", "people", "tonight", "night", "please", "good", "morning"}, result.text
