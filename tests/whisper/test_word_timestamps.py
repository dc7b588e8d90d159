"""Word timestamps: alignment heads, the alignment pass on the backend against the numpy reference,
DTW and the median filter against plain loops, word splitting, and word times on real speech."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import pytest

from metal_backend.whisper import WhisperError, load_model_data
from metal_backend.whisper.alignment import (
    WordTiming,
    add_word_timestamps,
    dtw_path,
    find_alignment,
    median_filter,
    merge_punctuations,
    split_words,
)
from metal_backend.whisper.audio import load_audio
from metal_backend.whisper.backend_compute import BackendWhisper
from metal_backend.whisper.convert import convert
from metal_backend.whisper.mel import mel_windows
from metal_backend.whisper.model_data import default_alignment_heads, parse_alignment_heads
from metal_backend.whisper.options import DecodingOptions
from metal_backend.whisper.tokenizer import Tokenizer
from metal_backend.whisper.transcript import Segment
from whisper_testing import DOOR_TEXT, normalize

TINY_EN_HEADS = ((1, 0), (2, 0), (2, 5), (3, 0), (3, 1), (3, 2), (3, 3), (3, 4))
BASE_HEADS = ((3, 1), (4, 2), (4, 3), (4, 7), (5, 1), (5, 2), (5, 4), (5, 6))


# ---------------------------------------------------------------- alignment heads


def test_ct2_config_heads(tiny_en, base):
    assert tiny_en.alignment_heads == TINY_EN_HEADS
    assert base.alignment_heads == BASE_HEADS
    assert tiny_en.word_alignment_heads == TINY_EN_HEADS


def test_default_heads(tiny_en, base):
    assert default_alignment_heads(tiny_en.hparams) == TINY_EN_HEADS
    assert default_alignment_heads(base.hparams) == BASE_HEADS
    # An unknown size: every head of the last half of the decoder layers.
    hp = replace(tiny_en.hparams, n_text_layer=6, n_audio_layer=6, n_text_state=640, n_audio_state=640,
                 n_text_head=10, n_audio_head=10)
    assert default_alignment_heads(hp) == tuple((layer, head) for layer in (3, 4, 5) for head in range(10))


def test_ggml_file_gets_default_heads(tiny_en_dir, tmp_path):
    path = tmp_path / "tiny.en.bin"
    convert(str(tiny_en_dir), str(path))
    model = load_model_data(path)
    assert model.alignment_heads == ()
    assert model.word_alignment_heads == TINY_EN_HEADS


@pytest.mark.parametrize("value, message", [
    ([], "non-empty list"),
    ("1,0", "non-empty list"),
    ([[1]], "not a \\[layer, head\\] pair"),
    ([[1, "0"]], "not a \\[layer, head\\] pair"),
    ([[True, 0]], "not a \\[layer, head\\] pair"),
    ([[4, 0]], "outside the decoder's 4 layers x 6 heads"),
    ([[0, 6]], "outside the decoder's 4 layers x 6 heads"),
    ([[-1, 0]], "outside"),
])
def test_bad_config_heads(tiny_en, value, message):
    with pytest.raises(WhisperError, match=message):
        parse_alignment_heads(value, tiny_en.hparams, "model/config.json")


def test_bad_config_heads_in_directory(tiny_en_dir, tmp_path):
    for name in ("model.bin", "vocabulary.txt", "tokenizer.json"):
        if (tiny_en_dir / name).exists():
            (tmp_path / name).symlink_to(tiny_en_dir / name)
    config = json.loads((tiny_en_dir / "config.json").read_text())
    config["alignment_heads"] = [[9, 0]]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(WhisperError, match=r"config|alignment head \[9, 0\]"):
        load_model_data(tmp_path)


# ---------------------------------------------------------------- the alignment pass


@pytest.fixture(scope="module")
def door(tiny_en, asset):
    samples = load_audio(asset("door_light.wav"))
    mel = mel_windows(samples, tiny_en.hparams.n_mels, filters=tiny_en.mel_filters)[0]
    return samples, mel


@pytest.fixture(scope="module")
def tiny_backend(tiny_en):
    return BackendWhisper(tiny_en, device="CPU")


def _door_tokens(model):
    tokenizer = Tokenizer(model.vocab, model.special)
    return tokenizer, tokenizer.encode(" " + DOOR_TEXT)


def test_align_matches_numpy(tiny_en, tiny_en_numpy, tiny_backend, door):
    samples, mel = door
    _, text = _door_tokens(tiny_en)
    special = tiny_en.special
    tokens = [special.sot, special.no_timestamps, *text, special.eot]
    n_audio = samples.size // 320
    heads = tiny_en.word_alignment_heads
    got = tiny_backend.align(tiny_backend.encode(mel), tokens, heads, n_audio)
    want = tiny_en_numpy.align(tiny_en_numpy.encode(mel), tokens, heads, n_audio)
    assert got.weights.shape == (len(heads), len(tokens), n_audio)
    assert got.logits.shape == (len(tokens), tiny_en.hparams.n_vocab)
    np.testing.assert_allclose(got.weights.sum(axis=-1), 1.0, atol=1e-5)
    # The cross-attention keys are f16 on the backend, f32 in numpy.
    np.testing.assert_allclose(got.weights, want.weights, atol=2e-3)
    assert np.linalg.norm(got.logits - want.logits) / np.linalg.norm(want.logits) < 1e-3
    assert np.array_equal(got.logits.argmax(axis=-1), want.logits.argmax(axis=-1))


def test_align_padding_rows_do_not_leak(tiny_en, tiny_backend, door):
    """Sequences of 13 and 16 tokens share a padded graph; the first 13 rows agree."""
    samples, mel = door
    _, text = _door_tokens(tiny_en)
    special = tiny_en.special
    tokens = [special.sot, special.no_timestamps, *text, special.eot]
    features = tiny_backend.encode(mel)
    short = tiny_backend.align(features, tokens, TINY_EN_HEADS, 500)
    longer = tiny_backend.align(features, tokens + [special.eot] * (16 - len(tokens)), TINY_EN_HEADS, 500)
    np.testing.assert_allclose(short.weights, longer.weights[:, :len(tokens)], atol=1e-6)
    np.testing.assert_allclose(short.logits, longer.logits[:len(tokens)], atol=1e-4)


def test_align_leaves_decoder_cache(tiny_en, tiny_backend, door):
    _, mel = door
    special = tiny_en.special
    features = tiny_backend.encode(mel)
    first = tiny_backend.decode(features, [special.sot, special.no_timestamps], 0)
    token = int(first.argmax())
    expected = tiny_backend.decode(features, [token], 2)
    tiny_backend.decode(features, [special.sot, special.no_timestamps], 0)
    tiny_backend.align(features, [special.sot, special.no_timestamps, token, special.eot], TINY_EN_HEADS, 1500)
    np.testing.assert_allclose(tiny_backend.decode(features, [token], 2), expected, atol=1e-5)


def test_align_bad_inputs(tiny_en, tiny_backend, door):
    _, mel = door
    special = tiny_en.special
    stale = tiny_backend.encode(mel)
    features = tiny_backend.encode(mel)
    ok = [special.sot, special.no_timestamps, special.eot]
    with pytest.raises(WhisperError, match="latest encode"):
        tiny_backend.align(stale, ok, TINY_EN_HEADS, 100)
    with pytest.raises(WhisperError, match="at least one token"):
        tiny_backend.align(features, [], TINY_EN_HEADS, 100)
    with pytest.raises(WhisperError, match="text context holds 448"):
        tiny_backend.align(features, [special.eot] * 449, TINY_EN_HEADS, 100)
    with pytest.raises(WhisperError, match="token ids must be in 0..51863"):
        tiny_backend.align(features, [special.sot, 51864], TINY_EN_HEADS, 100)
    with pytest.raises(WhisperError, match=r"\(4, 0\) is outside"):
        tiny_backend.align(features, ok, [(4, 0)], 100)
    with pytest.raises(WhisperError, match="distinct and in"):
        tiny_backend.align(features, ok, [(2, 0), (1, 0)], 100)
    with pytest.raises(WhisperError, match="at least one"):
        tiny_backend.align(features, ok, [], 100)
    for n_audio in (0, 1501, 2.5):
        with pytest.raises(WhisperError, match="n_audio must be an integer in 1..1500"):
            tiny_backend.align(features, ok, TINY_EN_HEADS, n_audio)


# ---------------------------------------------------------------- DTW, median filter, words


def _dtw_loops(cost):
    """Textbook DTW with explicit loops: the least total cost of a monotone path."""
    n, m = cost.shape
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            acc[i, j] = cost[i - 1, j - 1] + min(acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1])
    return acc[n, m]


@pytest.mark.parametrize("n, m", [(1, 1), (1, 7), (6, 1), (5, 9), (9, 5), (12, 40)])
def test_dtw_path_is_optimal(n, m):
    rng = np.random.default_rng(n * 100 + m)
    cost = rng.normal(size=(n, m))
    rows, cols = dtw_path(cost)
    assert (rows[0], cols[0]) == (0, 0) and (rows[-1], cols[-1]) == (n - 1, m - 1)
    steps = set(zip(np.diff(rows), np.diff(cols)))
    assert steps <= {(0, 1), (1, 0), (1, 1)}
    assert cost[rows, cols].sum() == pytest.approx(_dtw_loops(cost), abs=1e-9)


def test_dtw_follows_a_diagonal():
    cost = -np.kron(np.eye(4), np.ones((1, 3)))  # token k owns columns 3k .. 3k + 2
    rows, cols = dtw_path(cost)
    starts = [int(cols[np.argmax(rows == k)]) for k in range(4)]
    assert starts == [0, 3, 6, 9]


def test_dtw_bad_input():
    with pytest.raises(WhisperError, match="non-empty 2-D"):
        dtw_path(np.zeros((0, 3)))
    with pytest.raises(WhisperError, match="non-finite"):
        dtw_path(np.array([[0.0, np.nan]]))


def test_median_filter_matches_loops():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 3, 20))
    got = median_filter(x, 7)
    padded = np.concatenate([x[..., 3:0:-1], x, x[..., -2:-5:-1]], axis=-1)  # mirrored, edge not repeated
    want = np.empty_like(x)
    for idx in itertools.product(range(2), range(3), range(20)):
        want[idx] = np.median(padded[idx[0], idx[1], idx[2]:idx[2] + 7])
    np.testing.assert_allclose(got, want)
    short = rng.normal(size=(2, 3))
    assert np.array_equal(median_filter(short, 7), short)
    with pytest.raises(WhisperError, match="odd and positive"):
        median_filter(x, 4)


def test_split_words_and_punctuation(tiny_en):
    tokenizer = Tokenizer(tiny_en.vocab, tiny_en.special)
    tokens = tokenizer.encode(' "Hello," she said, (quietly) to everyone.') + [tiny_en.special.eot]
    words, word_tokens = split_words(tokenizer, tokens)
    assert "".join(words[:-1]) == ' "Hello," she said, (quietly) to everyone.'
    assert words[-1] == "<|endoftext|>" and word_tokens[-1] == [tiny_en.special.eot]
    assert [t for ts in word_tokens for t in ts] == tokens
    timings = [WordTiming(w, t, float(i), float(i + 1), 1.0) for i, (w, t) in enumerate(zip(words[:-1], word_tokens))]
    options = DecodingOptions()
    merge_punctuations(timings, options.prepend_punctuations, options.append_punctuations)
    merged = [w.word for w in timings if w.word]
    assert merged == [' "Hello,"', " she", " said,", " (quietly)", " to", " everyone."]
    assert sum(len(w.tokens) for w in timings) == len(tokens) - 1


def test_split_words_multibyte(tiny_en):
    tokenizer = Tokenizer(tiny_en.vocab, tiny_en.special)
    text = " café 東京 naïve"
    tokens = tokenizer.encode(text)
    words, word_tokens = split_words(tokenizer, tokens)
    assert "".join(words) == text and "\ufffd" not in "".join(words)
    assert [normalize(w) for w in words] == ["café", "東京", "naïve"]
    pieces, _ = split_words(tokenizer, tokenizer.encode("東京"), language="ja")
    assert pieces == ["東", "京"]


# ---------------------------------------------------------------- word times on speech


def test_door_words(tiny_en, tiny_backend, door):
    samples, mel = door
    tokenizer, text = _door_tokens(tiny_en)
    n_frames = samples.size // 160
    duration = samples.size / 16000
    segment = Segment(id=0, seek=0, start=0.0, end=duration, text=" " + DOOR_TEXT, tokens=text, temperature=0.0,
                      avg_logprob=-0.1, compression_ratio=1.0, no_speech_prob=0.0)
    features = tiny_backend.encode(mel)
    add_word_timestamps(tiny_backend, tiny_en, tokenizer, features, [segment], 10.0, n_frames, DecodingOptions())
    words = segment.words
    assert [normalize(w.word) for w in words] == normalize(DOOR_TEXT).split()
    assert words[-1].word == " light."
    starts = [w.start for w in words]
    assert starts == sorted(starts) and all(w.end >= w.start for w in words)
    assert 10.0 <= words[0].start and words[-1].end <= 10.0 + duration + 0.02
    assert all(0.0 < w.probability <= 1.0 for w in words)
    assert segment.start == words[0].start and segment.end == words[-1].end
    assert words[-1].end - words[0].start > 1.5


def test_door_words_numpy_agree(tiny_en, tiny_en_numpy, tiny_backend, door):
    samples, mel = door
    tokenizer, text = _door_tokens(tiny_en)
    n_frames = samples.size // 160
    got = find_alignment(tiny_backend, tiny_en, tokenizer, tiny_backend.encode(mel), text, n_frames)
    want = find_alignment(tiny_en_numpy, tiny_en, tokenizer, tiny_en_numpy.encode(mel), text, n_frames)
    assert [w.word for w in got] == [w.word for w in want]
    # One encoder position (20 ms) of slack for a near-tie in the DTW.
    np.testing.assert_allclose([w.start for w in got], [w.start for w in want], atol=0.021)
    np.testing.assert_allclose([w.probability for w in got], [w.probability for w in want], atol=1e-3)


def test_add_word_timestamps_bad_inputs(tiny_en, tiny_backend, door):
    _, mel = door
    tokenizer = Tokenizer(tiny_en.vocab, tiny_en.special)
    features = tiny_backend.encode(mel)
    for n_frames in (0, 3001, 1.5):
        with pytest.raises(WhisperError, match="n_frames must be an integer in 1..3000"):
            add_word_timestamps(tiny_backend, tiny_en, tokenizer, features, [], 0.0, n_frames, DecodingOptions())
    empty = Segment(id=0, seek=0, start=0.0, end=1.0, text="", tokens=[], temperature=0.0, avg_logprob=0.0,
                    compression_ratio=1.0, no_speech_prob=0.0)
    add_word_timestamps(tiny_backend, tiny_en, tokenizer, features, [empty], 0.0, 100, DecodingOptions())
    assert empty.words == []


def test_passage_sentence_starts(tiny_en_dir, asset):
    """Each sentence's first word starts within 0.6 s of where the sentence starts, for most of
    the 12 sentences of the passage (tiny.en, greedy)."""
    from metal_backend.whisper import Whisper
    passage = json.loads(asset("passage.json").read_text())
    model = Whisper.load(tiny_en_dir, device="CPU")
    result = model.transcribe(asset("passage.wav"), word_timestamps=True, beam_size=None)
    words = [w for s in result.segments for w in (s.words or [])]
    assert words
    starts = [w.start for w in words]
    assert starts == sorted(starts)
    hits = 0
    for sentence in passage["sentences"]:
        first = normalize(sentence["text"]).split()[0]
        near = [abs(w.start - sentence["start"]) for w in words if normalize(w.word) == first]
        hits += bool(near) and min(near) <= 0.6
    assert hits >= 0.8 * len(passage["sentences"]), f"{hits} of {len(passage['sentences'])} sentence starts"
