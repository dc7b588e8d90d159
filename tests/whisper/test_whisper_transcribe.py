"""The numpy reference transcribes real speech with real weights, and agrees with CTranslate2."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from metal_backend.whisper import DecodingOptions, GreedyDecoder, load_audio, load_model_data, mel_windows, transcribe
from metal_backend.whisper.convert import convert
from numpy_whisper import NumpyWhisper
from whisper_testing import DOOR_TEXT, JFK_TEXT, MORNING_TEXT, normalize, require

CLIPS = [("jfk.wav", JFK_TEXT), ("door_light.wav", DOOR_TEXT), ("good_morning.wav", MORNING_TEXT)]
# The numpy reference decodes one sequence at a time: greedy keeps these tests quick.
GREEDY = DecodingOptions(beam_size=None)


@pytest.mark.parametrize("clip,expected", CLIPS, ids=[c for c, _ in CLIPS])
def test_tiny_en(tiny_en, tiny_en_numpy, asset, clip, expected):
    result = transcribe(tiny_en_numpy, tiny_en, asset(clip), GREEDY)
    assert normalize(result.text) == normalize(expected)


def test_base_multilingual(base, base_numpy, asset):
    # The multilingual prompt (<|en|><|transcribe|>) and vocabulary layout.
    result = transcribe(base_numpy, base, asset("jfk.wav"), DecodingOptions(beam_size=None, language="en"))
    assert normalize(result.text) == normalize(JFK_TEXT)


def test_resampled_speech(tiny_en, tiny_en_numpy, asset):
    # espeak's original 22050 Hz file goes through our resampler.
    result = transcribe(tiny_en_numpy, tiny_en, asset("door_light_22k.wav"), GREEDY)
    assert normalize(result.text) == normalize(DOOR_TEXT)


def test_converted_ggml_model(tiny_en_dir, asset, tmp_path):
    path = tmp_path / "tiny.en.bin"
    convert(str(tiny_en_dir), str(path))
    model = load_model_data(path)
    result = transcribe(NumpyWhisper(model), model, asset("jfk.wav"), GREEDY)
    assert normalize(result.text) == normalize(JFK_TEXT)


def test_long_audio_in_windows(tiny_en, tiny_en_numpy, asset):
    silence = np.zeros(16000 * 25, np.float32)
    audio = np.concatenate([load_audio(asset("jfk.wav")), silence, load_audio(asset("door_light.wav")),
                            silence, load_audio(asset("good_morning.wav"))])
    result = transcribe(tiny_en_numpy, tiny_en, audio, GREEDY)
    assert normalize(result.text) == normalize(" ".join([JFK_TEXT, DOOR_TEXT, MORNING_TEXT]))
    starts = [s.start for s in result.segments]
    assert starts == sorted(starts) and len(starts) >= 3
    # door_light is spoken from 36.0 to 39.1 s. The first timestamp of a window is at most 1 s
    # (max_initial_timestamp), so after 6 s of silence at a window's start the segment starts early.
    door = [s for s in result.segments if "door" in s.text]
    assert len(door) == 1 and 30.0 <= door[0].start <= 36.5 and 38.0 <= door[0].end <= 41.0


def test_kv_cache_matches_full_recompute(tiny_en, asset):
    compute = NumpyWhisper(tiny_en)
    features = compute.encode(mel_windows(load_audio(asset("jfk.wav")))[0])
    tokens = [50257, 50362, 400, 523, 616]
    stepwise = compute.decode(features, tokens[:2], 0)
    for i in range(2, len(tokens)):
        stepwise = compute.decode(features, tokens[i:i + 1], i)
    whole = compute.decode(features, tokens, 0)
    np.testing.assert_allclose(stepwise, whole, rtol=0, atol=1e-3 * np.abs(whole).max())


@pytest.fixture(scope="module")
def ctranslate2():
    require(importlib.util.find_spec("ctranslate2") is not None, "ctranslate2 (pip install faster-whisper)")
    import ctranslate2

    return ctranslate2


def test_encoder_and_tokens_agree_with_ctranslate2(ctranslate2, tiny_en_dir, tiny_en, tiny_en_numpy, asset):
    mel = mel_windows(load_audio(asset("jfk.wav")))[0]
    ct = ctranslate2.models.Whisper(str(tiny_en_dir), device="cpu", compute_type="float32", intra_threads=2)
    theirs = np.array(ct.encode(ctranslate2.StorageView.from_array(mel[None]), to_cpu=True))[0]
    ours = tiny_en_numpy.encode(mel)
    assert ours.encoded.shape == theirs.shape == (1500, 384)
    np.testing.assert_allclose(ours.encoded, theirs, rtol=0, atol=1e-5 * 20 * np.abs(theirs).max())

    decoder = GreedyDecoder(tiny_en, DecodingOptions(without_timestamps=True))
    generated = ct.generate(ctranslate2.StorageView.from_array(mel[None]), [decoder.prompt], beam_size=1,
                            suppress_blank=True, suppress_tokens=[], max_length=224)
    assert decoder.decode(tiny_en_numpy, ours) == generated[0].sequences_ids[0]
