"""Decoding rules, beam search, sampling, fallback and the long-form loop, driven by scripted computes."""

from __future__ import annotations

import numpy as np
import pytest

from metal_backend.whisper import (
    DecodingOptions,
    GreedyDecoder,
    LogitRules,
    SpecialTokens,
    WhisperCompute,
    WhisperError,
    WhisperHParams,
    WhisperModelData,
    WindowDecoder,
    compression_ratio,
    initial_tokens,
    transcribe,
)
from metal_backend.whisper.logit_filters import log_normalizers, log_softmax, top_k

EN = WhisperHParams(51864, 1500, 8, 2, 1, 448, 8, 2, 1, 80)
MULTI = WhisperHParams(51865, 1500, 8, 2, 1, 448, 8, 2, 1, 80)
WORDS = {220: b" ", 1000: b" hello", 1001: b" world", 1002: b".", 1003: b" again"}
TB = 50363  # English-only <|0.00|>
NO_TS = dict(without_timestamps=True)


def fake_model(hp: WhisperHParams, suppress: tuple[int, ...] = ()) -> WhisperModelData:
    special = SpecialTokens.for_hparams(hp)
    names = special.names(hp.n_vocab)
    vocab = [WORDS.get(i, b"t%d" % i) for i in range(special.eot)] + [names[i] for i in range(special.eot, hp.n_vocab)]
    return WhisperModelData(hparams=hp, tensors={}, vocab=vocab, mel_filters=np.zeros((80, 201), np.float32),
                            suppress_tokens=suppress)


class ScriptedCompute:
    """At step i (the i-th decode call of a window), every row prefers script[i][0], then
    script[i][1], ... ; records every call. scripts per window (by encode count) when given."""

    def __init__(self, n_vocab: int, script: list[list[int]] | None = None,
                 windows: list[list[list[int]]] | None = None):
        self.n_vocab = n_vocab
        self.windows = windows or [script]
        self.calls: list[tuple[object, list[list[int]], int]] = []
        self.reorders: list[list[int]] = []
        self.encoded = 0
        self.step = 0
        self.rows = 0

    def encode(self, mel):
        assert mel.shape == (80, 3000)
        self.encoded += 1
        return ("features", self.encoded)

    def logits_for(self, prefs: list[int]) -> np.ndarray:
        logits = np.zeros(self.n_vocab, np.float32)
        for rank, token in enumerate(prefs):
            logits[token] = 100 - rank
        return logits

    def decode_batch(self, features, tokens, offset):
        self.calls.append((features, [list(t) for t in tokens], offset))
        if offset == 0:
            self.step = 0
        elif len(tokens) != self.rows:
            raise AssertionError("batch does not continue the cached rows")
        self.rows = len(tokens)
        script = self.windows[min(features[1], len(self.windows)) - 1]
        prefs = script[min(self.step, len(script) - 1)]
        self.step += 1
        return np.stack([self.logits_for(prefs)] * len(tokens))

    def decode(self, features, tokens, offset):
        return self.decode_batch(features, [tokens], offset)[0]

    def reorder(self, sequences):
        assert all(0 <= s < self.rows for s in sequences)
        self.reorders.append(list(sequences))
        self.rows = len(sequences)


class TreeCompute:
    """Log-probabilities by sequence: tree[history tuple] = {token: logprob}; rows follow reorder()."""

    def __init__(self, n_vocab: int, tree: dict[tuple[int, ...], dict[int, float]], prompt_len: int):
        self.n_vocab = n_vocab
        self.tree = tree
        self.prompt_len = prompt_len
        self.histories: list[list[int]] = []
        self.batch_sizes: list[int] = []
        self.reorders: list[list[int]] = []

    def encode(self, mel):
        return "F"

    def decode_batch(self, features, tokens, offset):
        if offset == 0:
            self.histories = [list(t) for t in tokens]
        else:
            assert len(tokens) == len(self.histories)
            for h, t in zip(self.histories, tokens):
                h.extend(t)
        self.batch_sizes.append(len(tokens))
        out = np.full((len(tokens), self.n_vocab), -1e9, np.float32)
        for row, h in enumerate(self.histories):
            for token, lp in self.tree.get(tuple(h[self.prompt_len:]), {}).items():
                out[row, token] = lp
        return out

    def decode(self, features, tokens, offset):
        return self.decode_batch(features, [tokens], offset)[0]

    def reorder(self, sequences):
        self.reorders.append(list(sequences))
        self.histories = [list(self.histories[s]) for s in sequences]


def test_compute_protocol_is_runtime_checkable():
    assert isinstance(ScriptedCompute(10, [[0]]), WhisperCompute)


def test_initial_tokens():
    assert initial_tokens(fake_model(EN), DecodingOptions()) == [50257]
    assert initial_tokens(fake_model(EN), DecodingOptions(**NO_TS)) == [50257, 50362]
    assert initial_tokens(fake_model(MULTI), DecodingOptions()) == [50258, 50259, 50359]
    assert initial_tokens(fake_model(MULTI), DecodingOptions(language="de", task="translate", **NO_TS)) == \
        [50258, 50261, 50358, 50363]
    with pytest.raises(WhisperError, match="English-only; it cannot translate"):
        initial_tokens(fake_model(EN), DecodingOptions(task="translate"))
    with pytest.raises(WhisperError, match="English-only; it cannot transcribe language 'de'"):
        WindowDecoder(fake_model(EN), DecodingOptions(language="de"))


def test_greedy_feeds_prompt_then_one_token_at_a_time():
    compute = ScriptedCompute(EN.n_vocab, [[0], [1000], [1001], [1002], [50256]])
    tokens = GreedyDecoder(fake_model(EN), DecodingOptions(**NO_TS)).decode(compute, ("F", 1))
    assert tokens == [1000, 1001, 1002]
    # Up to <|startoftranscript|> first (the no-speech probability is read there), then the rest.
    assert [(t, o) for _, t, o in compute.calls] == [([[50257]], 0), ([[50362]], 1), ([[1000]], 2), ([[1001]], 3),
                                                    ([[1002]], 4)]


def test_blank_and_eot_suppressed_at_first_step_only():
    compute = ScriptedCompute(EN.n_vocab, [[0], [220, 50256, 1000], [220, 1001], [50256]])
    assert GreedyDecoder(fake_model(EN), DecodingOptions(**NO_TS)).decode(compute, ("F", 1)) == [1000, 220]
    compute = ScriptedCompute(EN.n_vocab, [[0], [220, 1000], [50256]])
    options = DecodingOptions(suppress_blank=False, **NO_TS)
    assert GreedyDecoder(fake_model(EN), options).decode(compute, ("F", 1)) == [220]


class _NoScan(list):
    def __getitem__(self, index):
        raise AssertionError(f"vocabulary read again: {index!r}")


def test_blank_tokens_are_found_once_per_model():
    # suppress_blank's token list comes from a scan of the vocabulary, which costs tens of
    # milliseconds at 51864 tokens: it runs on the first LogitRules of a model, not on every one.
    model = fake_model(EN)
    rules = LogitRules(model, DecodingOptions())
    assert model.blank_token_ids == (220,)
    assert rules.first_step_suppressed.tolist() == [220, model.special.eot]
    model.vocab = _NoScan(model.vocab)
    again = LogitRules(model, DecodingOptions())
    assert again.first_step_suppressed.tolist() == [220, model.special.eot]
    no_blank = LogitRules(model, DecodingOptions(suppress_blank=False))
    assert no_blank.first_step_suppressed.tolist() == [model.special.eot]


@pytest.mark.parametrize("hp", [EN, MULTI])
def test_special_and_timestamp_tokens_never_sampled_without_timestamps(hp):
    sp = SpecialTokens.for_hparams(hp)
    banned = [sp.sot, sp.language("en"), sp.transcribe, sp.translate, sp.no_timestamps, sp.no_speech,
              sp.start_of_prev, sp.timestamp_begin, hp.n_vocab - 1]
    n_prompt_calls = 2
    compute = ScriptedCompute(hp.n_vocab, [[0]] * (n_prompt_calls - 1) + [banned + [1000], banned + [sp.eot]])
    assert GreedyDecoder(fake_model(hp), DecodingOptions(**NO_TS)).decode(compute, ("F", 1)) == [1000]


def test_extra_suppression():
    def run(model, **kw):
        compute = ScriptedCompute(EN.n_vocab, [[0], [1000, 1001], [50256]])
        return GreedyDecoder(model, DecodingOptions(**NO_TS, **kw)).decode(compute, ("F", 1))

    assert run(fake_model(EN), suppress_tokens=(1000,)) == [1001]
    model = fake_model(EN, suppress=(1000,))
    # The model's non-speech list is suppressed by default, as openai-whisper's suppress_tokens="-1".
    assert run(model) == [1001]
    assert run(model, suppress_non_speech=False) == [1000]
    with pytest.raises(WhisperError, match="suppressed token id 99999 is outside"):
        run(fake_model(EN), suppress_tokens=(99999,))


def test_max_new_tokens_and_context_limit():
    compute = ScriptedCompute(EN.n_vocab, [[0], [1003]])
    assert len(GreedyDecoder(fake_model(EN), DecodingOptions(max_new_tokens=5, **NO_TS)).decode(compute, ("F", 1))) == 5
    compute = ScriptedCompute(EN.n_vocab, [[0], [1003]])
    assert len(GreedyDecoder(fake_model(EN), DecodingOptions(**NO_TS)).decode(compute, ("F", 1))) == 224
    small = WhisperHParams(51864, 1500, 8, 2, 1, 10, 8, 2, 1, 80)
    compute = ScriptedCompute(small.n_vocab, [[0], [1003]])
    tokens = GreedyDecoder(fake_model(small), DecodingOptions(max_new_tokens=100, **NO_TS)).decode(compute, ("F", 1))
    # 2 prompt tokens + 8 sampled fill the 10 positions; the last sample needs no position of its own.
    assert len(tokens) == 9 and compute.calls[-1][2] == 9


def test_bad_logits_shape():
    class Broken(ScriptedCompute):
        def decode_batch(self, features, tokens, offset):
            return np.zeros((1, 10), np.float32)

    with pytest.raises(WhisperError, match="logits of shape \\(1, 10\\)"):
        GreedyDecoder(fake_model(EN)).decode(Broken(EN.n_vocab, [[0]]), ("F", 1))


# ---------------------------------------------------------------- timestamp rules


def _rules(**kw) -> LogitRules:
    return LogitRules(fake_model(EN), DecodingOptions(**kw))


def _allowed(rules: LogitRules, sampled: list[int], logits: np.ndarray | None = None) -> np.ndarray:
    if logits is None:
        # Text likely enough that the timestamp-mass rule does not force a timestamp.
        logits = np.zeros(EN.n_vocab, np.float32)
        logits[[1000, 50256]] = 30.0
    row = logits[None].copy()
    rules.apply(row, [sampled])
    return np.isfinite(row[0])


def test_first_token_is_an_early_timestamp():
    ok = _allowed(_rules(), [])
    assert not ok[:TB].any()
    assert ok[TB:TB + 51].all() and not ok[TB + 51:].any()  # <|0.00|> .. <|1.00|>
    assert _allowed(_rules(max_initial_timestamp=None), [])[TB:].all()
    assert _allowed(_rules(max_initial_timestamp=0.5), [])[TB:].sum() == 26


def test_timestamps_pair_and_never_decrease():
    rules = _rules()
    # After an opening timestamp and text: text, or a timestamp after the opening one.
    ok = _allowed(rules, [TB + 10, 1000])
    assert ok[1000] and ok[50256] and not ok[TB:TB + 11].any() and ok[TB + 11]
    # After a closing timestamp: end of text or a timestamp no earlier (the next segment's start).
    ok = _allowed(rules, [TB + 10, 1000, TB + 20])
    assert not ok[:50256].any() and ok[50256] and not ok[TB:TB + 20].any() and ok[TB + 20:].all()
    # After a pair: text.
    ok = _allowed(rules, [TB + 10, 1000, TB + 20, TB + 20])
    assert not ok[TB:].any() and ok[1000]
    # Control tokens never, with or without timestamps.
    assert not ok[50257:TB].any()


def test_timestamp_forced_when_their_summed_probability_wins():
    logits = np.full(EN.n_vocab, -50.0, np.float32)
    logits[1000] = 5.0
    logits[TB + 30:TB + 130] = 2.0  # each below the best text token, together far above it
    ok = _allowed(_rules(), [TB, 1000], logits)
    assert not ok[:TB].any() and ok[TB + 30]
    logits[TB + 30:TB + 130] = -5.0
    ok = _allowed(_rules(), [TB, 1000], logits)
    assert ok[1000]


def test_log_normalizers_give_log_softmax_values_bit_for_bit():
    # The decoders read the log-softmax at a few tokens per row through log_normalizers.
    rng = np.random.default_rng(5)
    logits = (rng.standard_normal((3, EN.n_vocab)) * 8).astype(np.float32)
    logits[1, ::3] = -np.inf
    top, log_total = log_normalizers(logits)
    picks = rng.integers(0, EN.n_vocab, (3, 40))
    at = (np.take_along_axis(logits, picks, axis=-1) - top) - log_total
    assert at.dtype == np.float32
    assert np.array_equal(at, np.take_along_axis(log_softmax(logits), picks, axis=-1))


@pytest.mark.parametrize("k", [1, 2, 6, 17])
def test_top_k_picks_the_largest_logits(k):
    # Beam search's candidates: the k largest of each row, as a whole-row partition finds them.
    rng = np.random.default_rng(k)
    logits = (rng.standard_normal((4, EN.n_vocab)) * 5).astype(np.float32)
    logits[0, ::3] = -np.inf  # suppressed tokens
    logits[1, :] = -np.inf
    logits[1, [7, 900, 51000] + list(range(100, 100 + k))] = 1.0  # ties and few finite values
    logits[2, 5000:5000 + 2 * k] = 40.0  # the best all in one chunk
    logits[3, 123] = np.nan
    got = top_k(logits, k)
    assert got.shape == (4, k)
    for row in range(4):
        values = np.sort(logits[row, got[row]])
        finite = logits[row][~np.isnan(logits[row])]
        expected = np.sort(finite)[finite.size - k:]
        if row == 3:  # a NaN row: whatever argpartition gives, every pick a real index
            assert len(set(got[row])) == k
            continue
        assert np.array_equal(values, expected), row
        assert len(set(got[row])) == k
    small = rng.standard_normal((2, 50)).astype(np.float32)
    assert np.array_equal(np.sort(top_k(small, 3), axis=1), np.sort(np.argsort(small, axis=1)[:, -3:], axis=1))
    with pytest.raises(WhisperError, match="top_k of 0"):
        top_k(small, 0)


def test_without_timestamps_suppresses_every_timestamp():
    ok = _allowed(_rules(without_timestamps=True), [])
    assert not ok[TB:].any() and ok[1000] and not ok[50256]


def test_compression_ratio():
    assert compression_ratio("") == 0.0
    assert compression_ratio(" strong" * 100) > 2.4
    assert compression_ratio("The quick brown fox jumps over the lazy dog.") < 2.4


# ---------------------------------------------------------------- beam search and sampling


def test_beam_search_finds_the_more_likely_sequence_greedy_misses():
    eot = 50256
    # Greedy takes 1000 (0.6) and then has only poor continuations; 1001 (0.4) leads to 1002 (0.95).
    p = {(): {1000: 0.6, 1001: 0.4},
         (1000,): {1003: 0.35, 1002: 0.35, eot: 0.3}, (1000, 1003): {eot: 1.0}, (1000, 1002): {eot: 1.0},
         (1001,): {1002: 0.95, eot: 0.05}, (1001, 1002): {eot: 1.0}}
    tree = {k: {t: float(np.log(v)) for t, v in d.items()} for k, d in p.items()}
    model = fake_model(EN)
    greedy = WindowDecoder(model, DecodingOptions(beam_size=None, **NO_TS))
    result = greedy.decode(TreeCompute(EN.n_vocab, tree, 2), "F")
    assert result.tokens in ([1000, 1003], [1000, 1002])
    beam = WindowDecoder(model, DecodingOptions(beam_size=3, **NO_TS))
    compute = TreeCompute(EN.n_vocab, tree, 2)
    result = beam.decode(compute, "F")
    assert result.tokens == [1001, 1002]
    assert result.sum_logprob == pytest.approx(np.log(0.4 * 0.95), abs=1e-4)
    assert result.avg_logprob == pytest.approx(np.log(0.4 * 0.95) / 3, abs=1e-4)
    # One prompt grown into the beams on the compute, then decoded as one batch.
    assert compute.reorders[0] == [0, 0, 0] and max(compute.batch_sizes) == 3


def test_best_of_sampling_decodes_candidates_as_one_batch():
    eot = 50256
    p = {(): {1000: 0.5, 1001: 0.5}, (1000,): {eot: 1.0}, (1001,): {1002: 1.0}, (1001, 1002): {eot: 1.0}}
    tree = {k: {t: float(np.log(v)) for t, v in d.items()} for k, d in p.items()}
    decoder = WindowDecoder(fake_model(EN), DecodingOptions(best_of=4, **NO_TS))
    shrunk = 0
    for seed in range(6):
        compute = TreeCompute(EN.n_vocab, tree, 2)
        result = decoder.decode(compute, "F", temperature=1.0, rng=np.random.default_rng(seed))
        assert compute.reorders[0] == [0, 0, 0, 0] and compute.batch_sizes[2] == 4
        # Sequences that ended are dropped from the batch.
        shrunk += any(len(r) < 4 for r in compute.reorders[1:])
        assert result.sum_logprob == pytest.approx(np.log(0.5), abs=1e-4)
        assert result.temperature == 1.0
        if shrunk and any(len(r) < 4 for r in compute.reorders[1:]):
            # Both candidates were sampled: the longer ranks higher (same sum over more tokens).
            assert result.tokens == [1001, 1002]
    assert shrunk


# ---------------------------------------------------------------- the long-form loop


def _audio(seconds: float) -> np.ndarray:
    return np.random.default_rng(0).normal(0, 0.01, int(16000 * seconds)).astype(np.float32)


def test_segments_and_seeking_on_timestamps():
    ts = lambda s: TB + int(round(s / 0.02))  # noqa: E731
    first = [[ts(0.0)], [1000], [ts(4.0)], [ts(4.0)], [1001], [ts(9.0)], [ts(26.0)], [1003], [50256]]
    # The window ends on an unfinished segment (opened at 26 s): it is dropped and the next window
    # starts at the last closing timestamp (9 s); that window ends on a single timestamp, so the
    # rest of it holds no speech.
    second = [[ts(0.0)], [1003], [1002], [ts(3.0)], [50256]]
    compute = ScriptedCompute(EN.n_vocab, windows=[first, second])
    progress = []
    result = transcribe(compute, fake_model(EN), _audio(35.0), DecodingOptions(beam_size=None),
                        progress=lambda done, total: progress.append((done, total)))
    assert [(s.start, s.end, s.text) for s in result.segments] == [
        (0.0, 4.0, " hello"), (4.0, 9.0, " world"), (9.0, 12.0, " again.")]
    assert [s.id for s in result.segments] == [0, 1, 2]
    assert [s.seek for s in result.segments] == [0, 0, 900]
    assert result.segments[2].tokens == [1003, 1002]
    assert result.text == "hello world again."
    assert compute.encoded == 2
    assert progress == [(9.0, 35.0), (35.0, 35.0)]
    # The second window's prompt holds the first one's finished segments, timestamps included.
    second_prompt = [t for f, t, o in compute.calls if f == ("features", 2) and o == 0][0][0]
    assert second_prompt == [50360, ts(0.0), 1000, ts(4.0), ts(4.0), 1001, ts(9.0), 50257]
    assert set(result.timings) >= {"mel", "encode", "decode", "total", "tokens"}
    assert result.language == "en" and result.language_probability == 1.0


def test_window_without_timestamps_is_one_segment():
    compute = ScriptedCompute(EN.n_vocab, windows=[[[0], [1000], [1001], [50256]], [[0], [1003], [50256]]])
    result = transcribe(compute, fake_model(EN), _audio(35.0), DecodingOptions(beam_size=None, **NO_TS))
    assert [(s.start, s.end, s.text) for s in result.segments] == [(0.0, 30.0, " hello world"), (30.0, 35.0, " again")]


def test_initial_prompt_and_reset_without_conditioning():
    compute = ScriptedCompute(EN.n_vocab, windows=[[[0], [1000], [50256]], [[0], [1003], [50256]]])
    options = DecodingOptions(beam_size=None, initial_prompt="hello", condition_on_previous_text=False, **NO_TS)
    transcribe(compute, fake_model(EN), _audio(35.0), options)
    prompts = [t[0] for _, t, o in compute.calls if o == 0]
    assert prompts == [[50360, 1000, 50257], [50257]]


def test_fallback_to_higher_temperatures_and_keeps_the_best():
    # Flat logits: every attempt has a low average log-probability, so all six temperatures are tried.
    class Flat(ScriptedCompute):
        def logits_for(self, prefs):
            logits = np.zeros(self.n_vocab, np.float32)
            logits[prefs[0]] = 3.0
            return logits

    compute = Flat(EN.n_vocab, [[0], [1000], [1001], [50256]])
    result = transcribe(compute, fake_model(EN), _audio(5.0), DecodingOptions(beam_size=None, best_of=2, **NO_TS))
    prompt_calls = [(t, o) for _, t, o in compute.calls if o == 0]
    assert len(prompt_calls) == 6
    assert result.segments and result.segments[0].avg_logprob < -1.0
    assert result.segments[0].temperature in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def test_no_speech_window_is_skipped():
    # <|nocaptions|> dominates at <|startoftranscript|> and the text is unlikely: silence.
    class Quiet(ScriptedCompute):
        def logits_for(self, prefs):
            logits = np.zeros(self.n_vocab, np.float32)
            logits[prefs[0]] = 12.0 if prefs[0] == 50361 else 2.0
            return logits

    compute = Quiet(EN.n_vocab, [[50361], [1000], [1001], [50256]])
    result = transcribe(compute, fake_model(EN), _audio(5.0), DecodingOptions(beam_size=None, **NO_TS))
    assert result.segments == [] and result.text == ""
    assert len([o for _, _, o in compute.calls if o == 0]) == 1  # silence is not retried


def test_language_is_detected_on_multilingual_models():
    sp = SpecialTokens.for_hparams(MULTI)
    es = sp.language("es")
    compute = ScriptedCompute(MULTI.n_vocab, [[es, 1000], [50257]])
    result = transcribe(compute, fake_model(MULTI), _audio(3.0), DecodingOptions(beam_size=None))
    assert result.language == "es" and 0.5 < result.language_probability <= 1.0
    # The detection step, then the window's prompt in Spanish.
    assert compute.calls[0][1:] == ([[sp.sot]], 0)
    assert compute.calls[2][1:] == ([[es, sp.transcribe]], 1)
    compute = ScriptedCompute(MULTI.n_vocab, [[es, 1000], [50257]])
    result = transcribe(compute, fake_model(MULTI), _audio(3.0), DecodingOptions(beam_size=None, language="de"))
    assert result.language == "de" and result.language_probability == 1.0


def test_transcribe_rejects_bad_audio():
    compute = ScriptedCompute(EN.n_vocab, [[50256]])
    model = fake_model(EN)
    with pytest.raises(WhisperError, match="audio is empty"):
        transcribe(compute, model, np.zeros(0, np.float32))
    with pytest.raises(WhisperError, match="1-D"):
        transcribe(compute, model, np.zeros((2, 10), np.float32))
    with pytest.raises(WhisperError, match="floating point.*int16"):
        transcribe(compute, model, np.zeros(100, np.int16))
    with pytest.raises(WhisperError, match="floating point.*bool"):
        transcribe(compute, model, np.zeros(100, bool))
    with pytest.raises(WhisperError, match="16000 non-finite samples .* first at index 0"):
        transcribe(compute, model, np.full(16000, np.nan))
    audio = np.zeros(100)
    audio[42] = np.inf
    with pytest.raises(WhisperError, match="1 non-finite .* index 42"):
        transcribe(compute, model, audio)
    with pytest.raises(WhisperError, match="file path or a numpy array"):
        transcribe(compute, model, [0.0] * 100)
    with pytest.raises(WhisperError, match="options must be DecodingOptions"):
        transcribe(compute, model, np.zeros(100), {"beam_size": 1})
    # float64 is fine.
    transcribe(ScriptedCompute(EN.n_vocab, [[0], [50256]]), model, np.zeros(1600, np.float64))


def test_digital_silence_is_not_decoded():
    compute = ScriptedCompute(EN.n_vocab, [[0], [1000], [50256]])
    audio = np.concatenate([np.zeros(16000 * 31, np.float32), np.full(16000 * 2, 1e-5, np.float32)])
    progress = []
    result = transcribe(compute, fake_model(EN), audio, DecodingOptions(beam_size=None, **NO_TS),
                        progress=lambda done, total: progress.append(done))
    assert result.segments == [] and compute.encoded == 0
    assert progress == [30.0, 33.0]


def test_punctuation_only_window_with_likely_no_speech_is_skipped():
    # Likely text (avg log-probability near 0) but only punctuation, and <|nocaptions|> dominant at
    # <|startoftranscript|>: white noise as tiny.en hears it.
    class Noise(ScriptedCompute):
        def logits_for(self, prefs):
            logits = np.zeros(self.n_vocab, np.float32)
            logits[prefs[0]] = 30.0
            if prefs[0] == 50361:
                logits[1002] = 28.0
            return logits

    compute = Noise(EN.n_vocab, [[50361], [1002], [50256]])
    result = transcribe(compute, fake_model(EN), _audio(5.0), DecodingOptions(beam_size=None, **NO_TS))
    assert result.segments == []
    compute = Noise(EN.n_vocab, [[50361], [1000], [50256]])
    result = transcribe(compute, fake_model(EN), _audio(5.0), DecodingOptions(beam_size=None, **NO_TS))
    assert result.text == "hello"
