"""Decoding of one 30 s window: greedy, beam search, or best-of sampling at a temperature.

The prompt is [<|startofprev|> previous text tokens (at most 223)] <|startoftranscript|>, then on
multilingual models <|lang|><|task|>, then <|notimestamps|> when decoding without timestamps.
The prompt is fed up to <|startoftranscript|> first: the logits there give the no-speech
probability (softmax of <|nospeech|>), as openai-whisper and faster-whisper measure it. Sampling
rules are in logit_filters.py. All sequences of a window (the beams, the best-of candidates) are
decoded as one batch through WhisperCompute.decode_batch; the cache follows the surviving
sequences through WhisperCompute.reorder.

Beam search (openai-whisper's published algorithm): every live beam proposes its beam_size + 1
most likely next tokens; candidates are taken best first, those ending in <|endoftext|> become
finished sequences, the others the next beams (at most beam_size); decoding stops when
round(beam_size * patience) sequences have finished or the length limit is reached (then the
live beams count as finished). Sequences are ranked by sum of log-probabilities over length
(length_penalty None) or over ((5 + length) / 6) ** length_penalty.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from .compute import WhisperCompute
from .errors import WhisperError
from .logit_filters import LogitRules, log_normalizers, log_softmax, log_softmax_top_k
from .model_data import WhisperModelData
from .options import DecodingOptions
from .tokenizer import Tokenizer
from .transcript import Segment, Transcript, Word

__all__ = ["DecodingOptions", "DecodingResult", "GreedyDecoder", "Segment", "Transcript", "WindowDecoder", "Word",
           "compression_ratio", "initial_tokens"]


@dataclass
class DecodingResult:
    """One window's decoding: the sampled tokens (timestamps included, <|endoftext|> excluded),
    their summed and average log-probability (the average over the tokens and the end token),
    the no-speech probability, the temperature used and the gzip compression ratio of the text."""

    tokens: list[int]
    text: str
    sum_logprob: float
    avg_logprob: float
    no_speech_prob: float
    temperature: float
    compression_ratio: float


def compression_ratio(text: str) -> float:
    """Bytes of the UTF-8 text over bytes of its zlib (gzip) compression: repetitive text scores high."""
    data = text.encode("utf-8")
    if not data:
        return 0.0
    return len(data) / len(zlib.compress(data))


def resolve_language(model: WhisperModelData, language: str | None) -> str | None:
    """The language a model decodes: English-only models "en" (another code raises), multilingual
    models the given code (checked against the model) or None (to be detected)."""
    if not model.hparams.is_multilingual:
        if language not in (None, "en"):
            raise WhisperError(f"this model is English-only; it cannot transcribe language {language!r}")
        return "en"
    if language is not None:
        model.special.language(language)
    return language


def initial_tokens(model: WhisperModelData, options: DecodingOptions, language: str | None = None) -> list[int]:
    """The start-of-transcript sequence of every window (language: overrides options.language;
    "en" when neither says)."""
    special = model.special
    tokens = [special.sot]
    if model.hparams.is_multilingual:
        task = special.transcribe if options.task == "transcribe" else special.translate
        tokens += [special.language(language or options.language or "en"), task]
    elif options.task != "transcribe":
        raise WhisperError(f"this model is English-only; it cannot {options.task}")
    if options.without_timestamps:
        tokens.append(special.no_timestamps)
    return tokens


class WindowDecoder:
    """Decodes windows with one model, options and language."""

    def __init__(self, model: WhisperModelData, options: DecodingOptions | None = None, language: str | None = None):
        self.model = model
        self.options = options = options or DecodingOptions()
        hp = model.hparams
        self.special = model.special
        self.tokenizer = Tokenizer(model.vocab, self.special)
        self.language = resolve_language(model, language or options.language) or "en"
        self.sot_sequence = initial_tokens(model, options, self.language)
        self.rules = LogitRules(model, options)
        self.n_text_ctx = hp.n_text_ctx
        self.max_new_tokens = options.max_new_tokens or hp.n_text_ctx // 2
        self.max_prompt = hp.n_text_ctx // 2 - 1

    def prompt(self, previous: Sequence[int] = ()) -> tuple[list[int], int]:
        """The tokens fed before sampling and the index of <|startoftranscript|> in them."""
        prefix: list[int] = []
        if previous:
            prefix = [self.special.start_of_prev] + [int(t) for t in previous[-self.max_prompt:]]
        return prefix + self.sot_sequence, len(prefix)

    def decode(self, compute: WhisperCompute, features: Any, previous: Sequence[int] = (), temperature: float = 0.0,
               rng: np.random.Generator | None = None, prefix: Sequence[int] = ()) -> DecodingResult:
        """Decodes one window: beam search at temperature 0 when beam_size is set, otherwise
        greedy (temperature 0) or best_of samples (temperature > 0).

        prefix: forced tokens the window's text starts with (text and timestamp tokens, as if
        sampled: the sampling rules see them), fed in one batch after the start-of-transcript
        sequence; sampling continues after them. The result's tokens hold the prefix and what
        follows; its log-probabilities and max_new_tokens count the sampled tokens only."""
        prompt, sot_index = self.prompt(previous)
        forced = [int(t) for t in prefix]
        n_vocab, tb = self.model.hparams.n_vocab, self.rules.timestamp_begin
        bad = [t for t in forced if not 0 <= t < n_vocab or self.special.eot <= t < tb]
        if bad:
            raise WhisperError(f"prefix token {bad[0]} is not a text or timestamp token of this model")
        if len(prompt) + len(forced) >= self.n_text_ctx:
            raise WhisperError(f"prompt of {len(prompt)} tokens and prefix of {len(forced)} leave no room in the "
                               f"text context of {self.n_text_ctx}")
        logits = self._logits(compute.decode_batch(features, [prompt[:sot_index + 1]], 0), 1)
        no_speech_prob = float(np.exp(log_softmax(logits[0])[self.special.no_speech]))
        fed = prompt[sot_index + 1:] + forced
        if fed:
            logits = self._logits(compute.decode_batch(features, [fed], sot_index + 1), 1)
        offset = len(prompt) + len(forced)
        if temperature == 0.0 and self.options.beam_size is not None:
            tokens, sum_logprob = self._beam_search(compute, features, logits, offset, forced)
        else:
            n = (self.options.best_of or 1) if temperature > 0.0 else 1
            tokens, sum_logprob = self._sample(compute, features, logits, offset, n, temperature,
                                               rng if rng is not None else np.random.default_rng(0), forced)
        text = self.tokenizer.decode(tokens)
        return DecodingResult(tokens=tokens, text=text, sum_logprob=sum_logprob,
                              avg_logprob=sum_logprob / (len(tokens) - len(forced) + 1), no_speech_prob=no_speech_prob,
                              temperature=temperature, compression_ratio=compression_ratio(text))

    # ---------------------------------------------------------------- strategies

    def _sample(self, compute: WhisperCompute, features: Any, logits: np.ndarray, offset: int, n: int,
                temperature: float, rng: np.random.Generator, prefix: list[int]) -> tuple[list[int], float]:
        """n sequences sampled at temperature (greedy at 0) after prefix; the best ranked one."""
        if n > 1:
            compute.reorder([0] * n)
            logits = np.repeat(logits, n, axis=0)
        sequences: list[list[int]] = [list(prefix) for _ in range(n)]
        sums = np.zeros(n)
        active = list(range(n))  # sequence of each cache row
        for _ in range(self.max_new_tokens):
            self.rules.apply(logits, [sequences[s] for s in active])
            top, log_total = log_normalizers(logits)
            if temperature == 0.0:
                picks = np.argmax(logits, axis=-1)
            else:
                # Gumbel-max: argmax of logits / T plus Gumbel noise samples softmax(logits / T).
                # In float64: a temperature past float32's range (3.4e38) would become inf there
                # and turn -inf logits into NaN, which argmax picks (token 0, "!").
                picks = np.argmax(logits.astype(np.float64) / temperature + rng.gumbel(size=logits.shape), axis=-1)
            # The log-softmax at the picks only (log_normalizers gives log_softmax's values).
            logprobs = (logits[np.arange(len(active)), picks] - top[:, 0]) - log_total[:, 0]
            keep = []
            for row, (s, token) in enumerate(zip(active, picks)):
                sums[s] += logprobs[row]
                if token != self.special.eot:
                    sequences[s].append(int(token))
                    keep.append(row)
            if not keep or offset >= self.n_text_ctx:
                break
            if len(keep) != len(active):
                compute.reorder(keep)
                active = [active[row] for row in keep]
            logits = self._logits(compute.decode_batch(features, [[sequences[s][-1]] for s in active], offset),
                                  len(active))
            offset += 1
        best = max(range(n), key=lambda s: self._score(sums[s], len(sequences[s]) - len(prefix)))
        return sequences[best], float(sums[best])

    def _beam_search(self, compute: WhisperCompute, features: Any, logits: np.ndarray,
                     offset: int, prefix: list[int]) -> tuple[list[int], float]:
        beam_size = self.options.beam_size
        # At most beam_size sequences end per step, so more candidates than that over all steps
        # change nothing; the bound keeps a huge patience from overflowing round().
        max_candidates = max(1, round(min(beam_size * (self.options.patience or 1.0),
                                          beam_size * (self.max_new_tokens + 1))))
        beams: list[tuple[list[int], float]] = [(list(prefix), 0.0)]
        finished: dict[tuple[int, ...], float] = {}
        eot = self.special.eot
        for _ in range(self.max_new_tokens):
            self.rules.apply(logits, [tokens for tokens, _ in beams])
            # Each row's beam_size + 1 best tokens (the logits rank a row as its log-softmax does)
            # and the log-softmax at those tokens only.
            top, log_total, best = log_softmax_top_k(logits, beam_size + 1)
            best_logprobs = (np.take_along_axis(logits, best, axis=-1) - top) - log_total
            candidates = []
            for row, (tokens, total) in enumerate(beams):
                candidates += [(total + lp, row, int(t)) for t, lp in zip(best[row], best_logprobs[row])
                               if np.isfinite(lp)]
            candidates.sort(key=lambda c: -c[0])
            new_beams: list[tuple[list[int], float]] = []
            sources: list[int] = []
            ended: list[tuple[tuple[int, ...], float]] = []
            for total, row, token in candidates:
                if token == eot:
                    ended.append((tuple(beams[row][0]), float(total)))
                else:
                    new_beams.append((beams[row][0] + [token], float(total)))
                    sources.append(row)
                    if len(new_beams) == beam_size:
                        break
            for tokens, total in ended:
                if len(finished) >= max_candidates:
                    break
                finished.setdefault(tokens, total)
            if len(finished) >= max_candidates or not new_beams or offset >= self.n_text_ctx:
                beams = new_beams
                break
            if sources != list(range(len(beams))):
                compute.reorder(sources)
            beams = new_beams
            logits = self._logits(compute.decode_batch(features, [[tokens[-1]] for tokens, _ in beams], offset),
                                  len(beams))
            offset += 1
        # Out of length: the live beams compete with what finished.
        for tokens, total in sorted(beams, key=lambda b: -b[1]):
            if len(finished) >= beam_size:
                break
            finished.setdefault(tuple(tokens), total)
        if not finished:
            return list(prefix), 0.0
        best = max(finished, key=lambda tokens: self._score(finished[tokens], len(tokens) - len(prefix)))
        return list(best), finished[best]

    # ---------------------------------------------------------------- helpers

    def _score(self, sum_logprob: float, length: int) -> float:
        penalty = self.options.length_penalty
        weight = max(length, 1) if penalty is None else ((5 + length) / 6) ** penalty
        return sum_logprob / weight

    def _logits(self, logits: np.ndarray, rows: int) -> np.ndarray:
        # decode_batch's array is the caller's (WhisperCompute): edited in place, copied only when it
        # is not already writeable float32.
        logits = np.asarray(logits, dtype=np.float32)
        if not logits.flags.writeable:
            logits = logits.copy()
        expected = (rows, self.model.hparams.n_vocab)
        if logits.shape != expected:
            raise WhisperError(f"decode returned logits of shape {logits.shape}, expected {expected}")
        return logits


class GreedyDecoder:
    """Greedy decoding of one window (temperature 0, one sequence): decode() returns the sampled
    tokens. prompt is the start-of-transcript sequence."""

    def __init__(self, model: WhisperModelData, options: DecodingOptions | None = None):
        options = replace(options or DecodingOptions(), beam_size=None, patience=None, temperature=0.0)
        self.window = WindowDecoder(model, options)
        self.prompt = self.window.sot_sequence

    def decode(self, compute: WhisperCompute, features: Any) -> list[int]:
        """Sampled tokens for one window (prompt and <|endoftext|> excluded)."""
        return self.window.decode(compute, features).tokens
