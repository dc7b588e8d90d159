"""What one Whisper setting may cost is bounded (issue 24, item 4).

`--temperature_increment_on_fallback 1e-9` built a billion-element temperature tuple (~32 GB) and
`beam_size=1000` took 127 s and 3.3 GB on a 5 s clip. Every setting that multiplies the work has a
limit (metal_backend/whisper/options.py) and a value past it raises SettingLimitError naming the
setting, the value and the limit, before anything is built; values at the limit are accepted.
Also here: settings whose extreme values broke the arithmetic (patience, length_penalty,
temperatures past float32's range).
"""
from __future__ import annotations

import numpy as np
import pytest

from isolated import run_isolated
from metal_backend.whisper import DecodingOptions, SettingLimitError, WhisperError, WindowDecoder
from metal_backend.whisper.__main__ import main, temperatures
from metal_backend.whisper.options import MAX_CANDIDATES, MAX_LENGTH_PENALTY, MAX_TEMPERATURES
from test_whisper_decoding import EN, NO_TS, ScriptedCompute, fake_model

# Every bounded setting: (name as it appears in the error, options at the limit, options past it).
BOUNDED = [
    ("beam_size", dict(beam_size=MAX_CANDIDATES), dict(beam_size=MAX_CANDIDATES + 1)),
    ("beam_size", dict(beam_size=MAX_CANDIDATES), dict(beam_size=1000)),
    ("best_of", dict(best_of=MAX_CANDIDATES), dict(best_of=MAX_CANDIDATES + 1)),
    ("best_of", dict(best_of=MAX_CANDIDATES), dict(best_of=10 ** 9)),
    ("len(temperature)", dict(temperature=tuple(np.linspace(0, 1, MAX_TEMPERATURES))),
     dict(temperature=tuple(np.linspace(0, 1, MAX_TEMPERATURES + 1)))),
    ("length_penalty", dict(length_penalty=MAX_LENGTH_PENALTY), dict(length_penalty=MAX_LENGTH_PENALTY * 10)),
]


@pytest.mark.parametrize("name,at_limit,past_limit", BOUNDED, ids=[f"{b[0]}-{i}" for i, b in enumerate(BOUNDED)])
def test_each_bounded_setting_is_accepted_at_its_limit_and_refused_past_it(name, at_limit, past_limit):
    DecodingOptions(**at_limit)
    with pytest.raises(SettingLimitError) as info:
        DecodingOptions(**past_limit)
    err = info.value
    assert isinstance(err, WhisperError) and isinstance(err, ValueError)
    assert err.name == name
    value = next(iter(past_limit.values()))
    assert err.value == (len(value) if name == "len(temperature)" else value)
    assert str(err).startswith(f"{name}={err.value!r}") and repr(err.limit) in str(err)


@pytest.mark.parametrize("start,increment", [(0.0, 1e-9), (0.0, 1e-300), (0.5, 1e-6), (0.0, 0.0099)])
def test_cli_fallback_increments_are_counted_before_any_temperature_is_made(start, increment):
    with pytest.raises(SettingLimitError, match=r"--temperature_increment_on_fallback=.*past its limit") as info:
        temperatures(start, increment)
    assert info.value.limit == pytest.approx((1.0 - start) / (MAX_TEMPERATURES - 1), abs=1e-6)
    assert len(temperatures(0.0, 0.01)) == MAX_TEMPERATURES  # the smallest step from 0 that is allowed


def test_cli_with_a_tiny_increment_fails_at_once_within_a_small_memory_limit():
    """The probe: the command fails with the limit named and exit status 1, in a process whose
    address space is capped at 2 GB (the old tuple needed ~32 GB)."""
    out = run_isolated("""
        import contextlib, io, resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from metal_backend.whisper.__main__ import main
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = main(["none.wav", "--model", "none", "--temperature_increment_on_fallback", "1e-9"])
        print(status, "past its limit" in err.getvalue() and "1e-09" in err.getvalue())
    """, timeout=60)
    assert out.split() == ["1", "True"]


def test_cli_refuses_beam_size_past_the_limit(capsys):
    assert main(["none.wav", "--model", "none", "--beam_size", "1000"]) == 1
    assert f"beam_size=1000 is past its limit ({MAX_CANDIDATES})" in capsys.readouterr().err


@pytest.mark.parametrize("temperature", [1.0, 100.0, 3.5e38, 1e100, 1e308])
def test_huge_temperatures_sample_only_allowed_tokens(temperature):
    """The class of temperatures past float32's range (3.4e38): they became inf in float32, a
    suppressed token's -inf logit turned NaN and argmax picked it ("!!!!", token 0). At any
    temperature only tokens the rules allow are sampled."""
    decoder = WindowDecoder(fake_model(EN), DecodingOptions(temperature=temperature, best_of=3, max_new_tokens=12,
                                                            suppress_tokens=(0, 1, 2), **NO_TS))
    for seed in range(3):
        compute = ScriptedCompute(EN.n_vocab, [[1000], [1001], [1002]])
        result = decoder.decode(compute, ("features", 1), temperature=temperature, rng=np.random.default_rng(seed))
        assert result.tokens, "nothing sampled"
        assert not set(result.tokens) & {0, 1, 2}, result.tokens
        assert all(t < 50256 for t in result.tokens)
        assert np.isfinite(result.sum_logprob)


@pytest.mark.parametrize("patience", [1.0, 1e6, 1e300, 1.7e308])
def test_any_finite_patience_decodes(patience):
    """beam_size * patience overflowed round() (OverflowError); candidates past what the steps can
    finish change nothing, so the count is bounded there."""
    decoder = WindowDecoder(fake_model(EN), DecodingOptions(beam_size=2, patience=patience, max_new_tokens=6, **NO_TS))
    compute = ScriptedCompute(EN.n_vocab, [[1000, 1001], [1002, 50256], [50256]])
    result = decoder.decode(compute, ("features", 1))
    assert result.tokens and all(t < 50256 for t in result.tokens) and np.isfinite(result.sum_logprob)


@pytest.mark.parametrize("penalty", [0.0, 1.0, 2.0, MAX_LENGTH_PENALTY])
def test_length_penalties_up_to_the_limit_score_without_overflow(penalty):
    decoder = WindowDecoder(fake_model(EN), DecodingOptions(beam_size=2, length_penalty=penalty, **NO_TS))
    for length in (0, 1, 224, 448):
        assert np.isfinite(decoder._score(-3.0, length))
