"""Decoding of several 30 s windows in lockstep: one decoder batch carries every window's sequences.

The windows come from one WhisperCompute.encode_batch; decode_batch then takes the same number of
sequences for each window, window by window (window w's sequences are rows w * S .. w * S + S - 1).
Each window is decoded by the rules of decoding.WindowDecoder (greedy, best-of sampling at a
temperature, or beam search with patience and length penalty), with the same prompt, logit rules
and ranking; only the bookkeeping is per window:

- greedy / sampling: S = 1 (greedy) or best_of sequences per window; a sequence that ended keeps
  its row while other sequences of its window go on (it is fed <|endoftext|> and its logits are
  ignored).
- beam search: S = beam_size rows per window; a window with fewer live beams (the first step,
  or candidates that ended) fills its rows with copies of a live beam whose results are ignored.
- a window whose decoding has finished leaves the batch (BackendWhisper.keep_windows moves the
  remaining windows' cross-attention keys and values and cache rows forward on the device), so
  the steps after it cost only what the windows still decoding need.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .compute import WhisperCompute
from .decoding import DecodingResult, WindowDecoder, compression_ratio
from .errors import WhisperError
from .logit_filters import log_normalizers, log_softmax, log_softmax_top_k


class BatchDecoder(WindowDecoder):
    """Decodes the windows of one encode_batch together (see the module docstring)."""

    def decode_windows(self, compute: WhisperCompute, features: Any, count: int, previous: Sequence[int] = (),
                       temperature: float = 0.0, rng: np.random.Generator | None = None,
                       languages: Sequence[str] | None = None,
                       previous_windows: Sequence[Sequence[int]] | None = None,
                       open_until: Sequence[int] | None = None) -> list[DecodingResult]:
        """One DecodingResult per window. previous: prompt text tokens given to every window;
        previous_windows: instead, each window's own prompt text tokens (of any lengths: each
        window decodes at its own text positions, as it would alone); languages: each window's language
        (multilingual models; default self.language); open_until: each window's timestamp token
        below which its text may not end right after a timestamp pair (LogitRules.apply)."""
        if open_until is not None and len(open_until) != count:
            raise WhisperError(f"open_until holds {len(open_until)} timestamps for {count} windows")
        skip = None
        if previous_windows is not None:
            if len(previous_windows) != count:
                raise WhisperError(f"previous_windows holds {len(previous_windows)} prompts for {count} windows")
            own = [self.prompt(p) for p in previous_windows]
            sot_index = max(index for _, index in own)
            # Shorter prompts are left-padded (with their first token) to the longest one's length;
            # the compute ignores the padding (decode_batch's skip).
            pads = [sot_index - index for _, index in own]
            prompts = [row[:1] * pad + row for (row, _), pad in zip(own, pads)]
            prompt = prompts[0]
            if any(pads):
                skip = pads
        else:
            prompt, sot_index = self.prompt(previous)
            prompts = [list(prompt) for _ in range(count)]
        if languages is not None and self.model.hparams.is_multilingual:
            position = sot_index + 1  # <|lang|> follows <|startoftranscript|>
            for row, language in zip(prompts, languages):
                row[position] = self.special.language(language)
        if len(prompt) >= self.n_text_ctx:
            raise WhisperError(f"prompt of {len(prompt)} tokens leaves no room in the text context "
                               f"of {self.n_text_ctx}")
        heads = [p[:sot_index + 1] for p in prompts]
        logits = self._logits(compute.decode_batch(features, heads, 0) if skip is None else
                              compute.decode_batch(features, heads, 0, skip=skip), count)
        no_speech = np.exp(log_softmax(logits)[:, self.special.no_speech]).astype(float)
        if sot_index + 1 < len(prompt):
            logits = self._logits(compute.decode_batch(features, [p[sot_index + 1:] for p in prompts],
                                                       sot_index + 1), count)
        if temperature == 0.0 and self.options.beam_size is not None:
            found = self._beam_windows(compute, features, logits, len(prompt), count, open_until)
        else:
            n = (self.options.best_of or 1) if temperature > 0.0 else 1
            found = self._sample_windows(compute, features, logits, len(prompt), count, n, temperature,
                                         rng if rng is not None else np.random.default_rng(0), open_until)
        results = []
        for (tokens, sum_logprob), p_no_speech in zip(found, no_speech):
            text = self.tokenizer.decode(tokens)
            results.append(DecodingResult(tokens=tokens, text=text, sum_logprob=sum_logprob,
                                          avg_logprob=sum_logprob / (len(tokens) + 1),
                                          no_speech_prob=float(p_no_speech),
                                          temperature=temperature, compression_ratio=compression_ratio(text)))
        return results

    def _sample_windows(self, compute: WhisperCompute, features: Any, logits: np.ndarray, offset: int, count: int,
                        n: int, temperature: float, rng: np.random.Generator,
                        open_until: Sequence[int] | None = None) -> list[tuple[list[int], float]]:
        eot = self.special.eot
        if n > 1:
            compute.reorder([w for w in range(count) for _ in range(n)])
            logits = np.repeat(logits, n, axis=0)
        # Sequence w * n + j is window w's j-th; live lists the windows still in the batch, in order.
        sequences: list[list[int]] = [[] for _ in range(count * n)]
        sums = np.zeros(count * n)
        alive = np.ones(count * n, dtype=bool)
        live = list(range(count))
        for _ in range(self.max_new_tokens):
            rows = [w * n + j for w in live for j in range(n)]
            self.rules.apply(logits, [sequences[r] for r in rows],
                             None if open_until is None else [open_until[w] for w in live for _ in range(n)])
            if temperature == 0.0:
                picks = np.argmax(logits, axis=-1)
            else:
                # In float64, as WindowDecoder._sample: past float32's range the temperature would be inf.
                picks = np.argmax(logits.astype(np.float64) / temperature + rng.gumbel(size=logits.shape), axis=-1)
            # The log-softmax at the picked tokens only (log_normalizers: the same bits as log_softmax).
            top, log_total = log_normalizers(logits)
            picked = (logits[np.arange(len(rows)), picks] - top[:, 0]) - log_total[:, 0]
            feed = []
            for i, r in enumerate(rows):
                if alive[r]:
                    token = int(picks[i])
                    sums[r] += picked[i]
                    if token == eot:
                        alive[r] = False
                    else:
                        sequences[r].append(token)
                feed.append([sequences[r][-1] if alive[r] else eot])
            if not alive.any() or offset >= self.n_text_ctx:
                break
            keep = [k for k, w in enumerate(live) if alive[w * n:(w + 1) * n].any()]
            if len(keep) < len(live):
                features = compute.keep_windows(features, keep, [k * n + j for k in keep for j in range(n)])
                feed = [feed[k * n + j] for k in keep for j in range(n)]
                live = [live[k] for k in keep]
            logits = self._logits(compute.decode_batch(features, feed, offset), len(live) * n)
            offset += 1
        found = []
        for w in range(count):
            best = max(range(w * n, (w + 1) * n), key=lambda r: self._score(sums[r], len(sequences[r])))
            found.append((sequences[best], float(sums[best])))
        return found

    def _beam_windows(self, compute: WhisperCompute, features: Any, logits: np.ndarray, offset: int,
                      count: int, open_until: Sequence[int] | None = None) -> list[tuple[list[int], float]]:
        beam_size = self.options.beam_size
        max_candidates = max(1, round(beam_size * (self.options.patience or 1.0)))
        eot = self.special.eot
        compute.reorder([w for w in range(count) for _ in range(beam_size)])
        logits = np.repeat(logits, beam_size, axis=0)
        beams: list[list[tuple[list[int], float]]] = [[([], 0.0)] for _ in range(count)]
        finished: list[dict[tuple[int, ...], float]] = [{} for _ in range(count)]
        live = list(range(count))  # the windows still searching, in batch order (beam_size rows each)
        for _ in range(self.max_new_tokens):
            sampled = [beams[w][j][0] if j < len(beams[w]) else [] for w in live for j in range(beam_size)]
            self.rules.apply(logits, sampled,
                             None if open_until is None else [open_until[w] for w in live for _ in range(beam_size)])
            # Every row's beam_size + 1 best tokens and the log-softmax at those only, for all rows at
            # once (as WindowDecoder._beam_search: log_normalizers gives log_softmax's bits).
            top, log_total, best = log_softmax_top_k(logits, beam_size + 1)
            # float32 log-probabilities added to the float totals, as the sequential search adds them.
            best_logprobs = (np.take_along_axis(logits, best, axis=-1) - top) - log_total
            best = best.tolist()
            sources: list[int] = []
            feed: list[list[int]] = []
            keep: list[int] = []
            for k, w in enumerate(live):
                base = k * beam_size
                candidates = []
                for j, (tokens, total) in enumerate(beams[w]):
                    candidates += [(total + lp, j, t) for t, lp in zip(best[base + j], best_logprobs[base + j])
                                   if math.isfinite(lp)]
                candidates.sort(key=lambda c: -c[0])
                new_beams: list[tuple[list[int], float]] = []
                picked: list[int] = []
                ended: list[tuple[tuple[int, ...], float]] = []
                for total, j, token in candidates:
                    if token == eot:
                        ended.append((tuple(beams[w][j][0]), float(total)))
                    else:
                        new_beams.append((beams[w][j][0] + [token], float(total)))
                        picked.append(j)
                        if len(new_beams) == beam_size:
                            break
                for tokens, total in ended:
                    if len(finished[w]) >= max_candidates:
                        break
                    finished[w].setdefault(tokens, total)
                beams[w] = new_beams
                if len(finished[w]) >= max_candidates or not new_beams:
                    continue  # this window's search is over: it leaves the batch
                keep.append(k)
                fill = beam_size - len(new_beams)
                sources += [base + j for j in picked] + [base + picked[0]] * fill
                feed += [[tokens[-1]] for tokens, _ in new_beams] + [[new_beams[0][0][-1]]] * fill
            if not keep or offset >= self.n_text_ctx:
                break
            if len(keep) < len(live):
                features = compute.keep_windows(features, keep, sources)
                live = [live[k] for k in keep]
            elif sources != list(range(len(live) * beam_size)):
                compute.reorder(sources)
            logits = self._logits(compute.decode_batch(features, feed, offset), len(live) * beam_size)
            offset += 1
        found = []
        for w in range(count):
            # Out of length: the live beams compete with what finished.
            for tokens, total in sorted(beams[w], key=lambda b: -b[1]):
                if len(finished[w]) >= beam_size:
                    break
                finished[w].setdefault(tuple(tokens), total)
            if not finished[w]:
                found.append(([], 0.0))
                continue
            best = max(finished[w], key=lambda tokens: self._score(finished[w][tokens], len(tokens)))
            found.append((list(best), finished[w][best]))
        return found
