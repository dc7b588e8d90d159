"""BatchDecoder samples at temperatures past float32's range as WindowDecoder does: only tokens the
rules allow (the float32 division made the temperature inf, -inf logits NaN, and argmax picked
token 0, "!")."""

from __future__ import annotations

import numpy as np
import pytest

from metal_backend.whisper import DecodingOptions
from metal_backend.whisper.batch_decoding import BatchDecoder
from test_whisper_decoding import EN, NO_TS, ScriptedCompute, fake_model


@pytest.mark.parametrize("temperature", [1.0, 3.5e38, 1e308])
def test_huge_temperatures_sample_only_allowed_tokens_in_batches(temperature):
    decoder = BatchDecoder(fake_model(EN), DecodingOptions(temperature=temperature, best_of=2, max_new_tokens=10,
                                                           suppress_tokens=(0, 1, 2), **NO_TS))
    for seed in range(2):
        compute = ScriptedCompute(EN.n_vocab, [[1000], [1001], [1002]])
        results = decoder.decode_windows(compute, ("features", 1), 2, temperature=temperature,
                                         rng=np.random.default_rng(seed))
        assert len(results) == 2
        for result in results:
            assert result.tokens, "nothing sampled"
            assert not set(result.tokens) & {0, 1, 2}, result.tokens
            assert all(t < 50256 for t in result.tokens) and np.isfinite(result.sum_logprob)
