"""mb.log_softmax_rows: the host-side log-softmax normalizers and top-k that Whisper's decoders take
per step, against float64 numpy, under every max_isa cap (AVX-512, AVX2 and portable exps and sums),
with the edge rows decoding produces (suppressed -inf entries, ties, NaN) and the bad inputs."""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

CPU = mb.device("CPU")


@pytest.fixture(params=[2, 1, 0], ids=["avx512", "avx2", "portable"])
def cap(request):
    before = int(CPU.props.extra["max_isa"])
    CPU.set_prop("max_isa", request.param)
    yield request.param
    CPU.set_prop("max_isa", before)


def reference(x: np.ndarray, k: int):
    x64 = x.astype(np.float64)
    top = x.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):  # a row of -inf: NaN, as the kernel gives
        log_total = np.log(np.exp(x64 - top).sum(axis=1, keepdims=True))
    # Largest first, ties to the lower index; NaN below every number.
    key = np.where(np.isnan(x), -np.inf, x64)
    order = np.lexsort((np.arange(x.shape[1])[None, :].repeat(x.shape[0], 0), np.isnan(x), -key), axis=1)
    return top, log_total, order[:, :k]


@pytest.mark.parametrize("v,k", [(v, k) for v in (1, 7, 8, 33, 51864) for k in (0, 1, 6) if k <= v])
def test_against_numpy(v, k, cap):
    rng = np.random.default_rng(v * 10 + k)
    x = (rng.standard_normal((5, v)) * 6).astype(np.float32)
    x[1, ::3] = -np.inf  # suppressed tokens (v = 1: a row of -inf)
    top, log_total, best = mb.log_softmax_rows(x, k)
    rtop, rlog, rbest = reference(x, k)
    assert top.dtype == np.float32 and log_total.dtype == np.float32 and best.dtype == np.int64
    assert top.shape == (5, 1) and log_total.shape == (5, 1) and best.shape == (5, k)
    assert np.array_equal(top, rtop)
    np.testing.assert_allclose(log_total, rlog, rtol=2e-6, atol=2e-6)  # NaN where rlog is
    assert np.array_equal(best, rbest)
    # The decoders' identity: log_softmax at the picks from the normalizers.
    if k and v > 1:
        picked = (np.take_along_axis(x, best, axis=1) - top) - log_total
        exact = np.take_along_axis(x.astype(np.float64), best, axis=1) - rtop - rlog
        np.testing.assert_allclose(picked, exact, rtol=1e-5, atol=1e-5)


def test_edge_rows(cap):
    x = np.zeros((6, 40), np.float32)
    x[0, [3, 9, 20]] = 5.0  # ties at the top: lower indices first
    x[1] = -np.inf
    x[1, [4, 30]] = [1.0, 2.0]  # fewer numbers above -inf than k: -inf entries fill, in index order
    x[2, 17] = np.nan  # a NaN: max and log_total NaN, the NaN index ranked last
    x[3, :] = np.nan
    x[3, 8] = 1.0  # one number among NaNs: then the NaNs, in index order
    x[4] = -np.inf  # nothing above -inf
    x[5, 2] = np.inf
    top, log_total, best = mb.log_softmax_rows(x, 4)
    assert best[0].tolist() == [3, 9, 20, 0]
    assert top[1, 0] == 2.0 and best[1].tolist() == [30, 4, 0, 1]
    np.testing.assert_allclose(log_total[1, 0], np.log1p(np.exp(-1.0)), rtol=1e-6)
    assert np.isnan(top[2, 0]) and np.isnan(log_total[2, 0]) and 17 not in best[2].tolist()
    assert best[3].tolist() == [8, 0, 1, 2]
    assert top[4, 0] == -np.inf and np.isnan(log_total[4, 0])
    assert top[5, 0] == np.inf and np.isnan(log_total[5, 0]) and best[5, 0] == 2


def test_converts_other_layouts_and_dtypes():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 300))
    got = mb.log_softmax_rows(x[:, ::2], 3)  # float64, strided: converted as np.asarray would
    want = mb.log_softmax_rows(np.ascontiguousarray(x[:, ::2], dtype=np.float32), 3)
    for a, b in zip(got, want):
        assert np.array_equal(a, b)
    assert mb.log_softmax_rows(np.zeros((0, 5), np.float32), 2)[2].shape == (0, 2)


def test_bad_inputs():
    x = np.zeros((2, 10), np.float32)
    with pytest.raises(mb.OutOfRangeError, match="k must be in 0..10 .* got 11"):
        mb.log_softmax_rows(x, 11)
    with pytest.raises(mb.OutOfRangeError, match="got -1"):
        mb.log_softmax_rows(x, -1)
    with pytest.raises(TypeError):
        mb.log_softmax_rows(x, 1.5)
    with pytest.raises(mb.InvalidArgumentError, match="2-D .* got 1-D"):
        mb.log_softmax_rows(np.zeros(10, np.float32), 1)
    with pytest.raises(mb.InvalidArgumentError, match="rows of 0 entries"):
        mb.log_softmax_rows(np.zeros((3, 0), np.float32), 0)
    with pytest.raises((mb.InvalidArgumentError, TypeError, ValueError)):
        mb.log_softmax_rows([["a", "b"]], 1)
    with pytest.raises((mb.InvalidArgumentError, TypeError, ValueError)):
        mb.log_softmax_rows(np.array([[object(), 1.0]], dtype=object), 1)
