"""Whisper's sampling rules, applied to a batch of logits before a token is picked.

The published rules of openai-whisper and whisper.cpp:
- control tokens (start of transcript, languages, tasks, start of previous text, no-speech,
  no-timestamps) are never sampled; neither are the model's non-speech symbols (when asked) and
  the caller's suppress_tokens; without timestamps no timestamp token either;
- at the first sampled position the blank (the lone space) and end-of-text are suppressed;
- with timestamps: the first token is a timestamp no later than max_initial_timestamp;
  timestamps come in pairs (after a closing timestamp another timestamp or end-of-text follows;
  after a pair, text), they never decrease, and when the summed probability of all timestamp
  tokens beats the most likely text token, a timestamp is forced. The comparison is made in
  log-probability space (log-sum-exp of the timestamp log-probabilities against the best text
  log-probability), which neither underflows nor overflows.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

import metal_backend as mb

from .errors import WhisperError
from .model_data import WhisperModelData
from .options import DecodingOptions

TIME_PRECISION = 0.02  # seconds per timestamp token


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in float32 (rows may hold -inf, not all of them): (x - top) - log_total
    with log_normalizers' values, so both give the same bits."""
    x = np.asarray(logits, dtype=np.float32)
    rows = x.reshape(-1, x.shape[-1])  # any leading dimensions, as along axis -1
    top, log_total = log_normalizers(rows)
    return ((rows - top) - log_total).reshape(x.shape)


def log_normalizers(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the max and the log of sum(exp(x - max)) (exps in float32, the sum in float64), both
    float32 (n, 1): log_softmax(x)[i, t] is (x[i, t] - max[i]) - log_total[i], without the whole
    log-softmax in memory (for callers that read a few entries of each row). One native pass per row
    (mb.log_softmax_rows)."""
    top, log_total, _ = log_softmax_top_k(logits, 0)
    return top, log_total


def top_k(logits: np.ndarray, k: int) -> np.ndarray:
    """Indices (n, k) of the k largest entries of each row, largest first (ties to the lower index;
    NaN ranks below every number)."""
    if k < 1:
        raise WhisperError(f"top_k of {k}: at least one index per row")
    return log_softmax_top_k(logits, k)[2]


def log_softmax_top_k(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log_normalizers and top_k of the same rows in one pass over them (beam search asks for a few
    of ~52,000 logits per row and the log-softmax at those only): (top, log_total, best)."""
    x = np.asarray(logits, dtype=np.float32)
    if x.ndim != 2:
        raise WhisperError(f"logits must be (rows, n_vocab), got shape {x.shape}")
    if not 0 <= k <= x.shape[1]:
        raise WhisperError(f"top_k of {k} from rows of {x.shape[1]}")
    return mb.log_softmax_rows(x, k)


def logsumexp(x: np.ndarray) -> np.ndarray:
    """Row-wise log(sum(exp(x))); -inf for a row of -inf."""
    top = x.max(axis=-1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return (np.log(np.exp(x - safe).sum(axis=-1, keepdims=True)) + safe)[..., 0]


class LogitRules:
    """The rules for one model and one set of options; apply() edits a batch of logits in place."""

    def __init__(self, model: WhisperModelData, options: DecodingOptions):
        hp = model.hparams
        special = model.special
        self.eot = special.eot
        self.timestamp_begin = special.timestamp_begin
        self.n_vocab = hp.n_vocab
        self.timestamps = not options.without_timestamps

        suppressed = set(range(special.eot + 1, special.timestamp_begin))
        suppressed.update(options.suppress_tokens)
        if options.suppress_non_speech:
            suppressed.update(model.suppress_tokens)
        if not self.timestamps:
            suppressed.update(range(special.timestamp_begin, hp.n_vocab))
        bad = sorted(t for t in suppressed if not 0 <= t < hp.n_vocab)
        if bad:
            raise WhisperError(f"suppressed token id {bad[0]} is outside the vocabulary (0..{hp.n_vocab - 1})")
        self.suppressed = np.array(sorted(suppressed), dtype=np.int64)
        first = [special.eot]
        if options.suppress_blank:
            first += model.blank_token_ids
        self.first_step_suppressed = np.array(sorted(first), dtype=np.int64)
        self.last_initial_timestamp = None
        if options.max_initial_timestamp is not None:
            steps = int(round(options.max_initial_timestamp / TIME_PRECISION))
            self.last_initial_timestamp = self.timestamp_begin + steps

    def apply(self, logits: np.ndarray, sampled: Sequence[Sequence[int]],
              open_until: Sequence[int] | None = None) -> None:
        """Masks (sets to -inf) what may not come next. logits is (n, n_vocab) float, row i for the
        sequence whose sampled tokens so far (prompt excluded) are sampled[i]. open_until[i]: a
        timestamp token; a pair of timestamps below it may not be followed by the end of the text
        (the window holds speech after it: batched.py)."""
        if logits.ndim != 2 or logits.shape != (len(sampled), self.n_vocab):
            raise WhisperError(f"logits of shape {logits.shape} do not fit {len(sampled)} sequences of "
                               f"{self.n_vocab} tokens")
        logits[:, self.suppressed] = -np.inf
        first = [i for i, seq in enumerate(sampled) if not seq]
        if first:
            logits[np.ix_(first, self.first_step_suppressed)] = -np.inf
        if not self.timestamps:
            return
        tb, eot = self.timestamp_begin, self.eot
        for i, seq in enumerate(sampled):
            if not seq:
                logits[i, :tb] = -np.inf
                if self.last_initial_timestamp is not None:
                    logits[i, self.last_initial_timestamp + 1:] = -np.inf
                continue
            last_was_timestamp = seq[-1] >= tb
            penultimate_was_timestamp = len(seq) < 2 or seq[-2] >= tb
            if last_was_timestamp:
                if penultimate_was_timestamp:
                    logits[i, tb:] = -np.inf  # a pair is complete: text (or end) follows
                    if open_until is not None and len(seq) >= 2 and seq[-1] < open_until[i]:
                        logits[i, eot] = -np.inf
                else:
                    logits[i, :eot] = -np.inf  # a closing timestamp: another timestamp or end
            last_timestamp = next((t for t in reversed(seq) if t >= tb), None)
            if last_timestamp is not None:
                # The next segment may start where this one ended, later timestamps only move on.
                bound = last_timestamp if last_was_timestamp and not penultimate_was_timestamp else last_timestamp + 1
                logits[i, tb:bound] = -np.inf
        # In log-probability space both sides carry the same normalizer, so the raw logits compare
        # the same way without a log-softmax of the whole vocabulary.
        timestamp_mass = logsumexp(logits[:, tb:])
        best_text = logits[:, :tb].max(axis=-1)
        logits[timestamp_mass > best_text, :tb] = -np.inf
