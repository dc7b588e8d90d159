"""Decoding of several 30 s windows in lockstep: one decoder batch carries every window's sequences.

The windows come from one WhisperCompute.encode_batch; decode_batch then takes the same number of
sequences for each window, window by window (window w's sequences are rows w * S .. w * S + S - 1).
Each window is decoded by the rules of decoding.WindowDecoder (greedy, best-of sampling at a
temperature, or beam search with patience and length penalty), with the same prompt, logit rules
and ranking; only the bookkeeping is per window:

- greedy / sampling: S = 1 (greedy) or best_of sequences per window; a sequence that ended keeps
  its row (it is fed <|endoftext|> and its logits are ignored) so that every step has the same
  rows.
- beam search: S = beam_size rows per window; a window with fewer live beams (the first step,
  or candidates that ended) fills its rows with copies of a live beam whose results are ignored;
  a window whose search has finished keeps its rows unchanged until every window has finished.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .compute import WhisperCompute
from .decoding import DecodingResult, WindowDecoder, compression_ratio
from .errors import WhisperError
from .logit_filters import log_softmax


class BatchDecoder(WindowDecoder):
    """Decodes the windows of one encode_batch together (see the module docstring)."""

    def decode_windows(self, compute: WhisperCompute, features: Any, count: int, previous: Sequence[int] = (),
                       temperature: float = 0.0, rng: np.random.Generator | None = None,
                       languages: Sequence[str] | None = None) -> list[DecodingResult]:
        """One DecodingResult per window. previous: prompt text tokens given to every window;
        languages: each window's language (multilingual models; default self.language)."""
        prompt, sot_index = self.prompt(previous)
        prompts = [list(prompt) for _ in range(count)]
        if languages is not None and self.model.hparams.is_multilingual:
            position = sot_index + 1  # <|lang|> follows <|startoftranscript|>
            for row, language in zip(prompts, languages):
                row[position] = self.special.language(language)
        if len(prompt) >= self.n_text_ctx:
            raise WhisperError(f"prompt of {len(prompt)} tokens leaves no room in the text context "
                               f"of {self.n_text_ctx}")
        logits = self._logits(compute.decode_batch(features, [p[:sot_index + 1] for p in prompts], 0), count)
        no_speech = np.exp(log_softmax(logits)[:, self.special.no_speech]).astype(float)
        if sot_index + 1 < len(prompt):
            logits = self._logits(compute.decode_batch(features, [p[sot_index + 1:] for p in prompts],
                                                       sot_index + 1), count)
        if temperature == 0.0 and self.options.beam_size is not None:
            found = self._beam_windows(compute, features, logits, len(prompt), count)
        else:
            n = (self.options.best_of or 1) if temperature > 0.0 else 1
            found = self._sample_windows(compute, features, logits, len(prompt), count, n, temperature,
                                         rng if rng is not None else np.random.default_rng(0))
        results = []
        for (tokens, sum_logprob), p_no_speech in zip(found, no_speech):
            text = self.tokenizer.decode(tokens)
            results.append(DecodingResult(tokens=tokens, text=text, sum_logprob=sum_logprob,
                                          avg_logprob=sum_logprob / (len(tokens) + 1),
                                          no_speech_prob=float(p_no_speech),
                                          temperature=temperature, compression_ratio=compression_ratio(text)))
        return results

    def _sample_windows(self, compute: WhisperCompute, features: Any, logits: np.ndarray, offset: int, count: int,
                        n: int, temperature: float, rng: np.random.Generator) -> list[tuple[list[int], float]]:
        eot = self.special.eot
        rows = count * n
        if n > 1:
            compute.reorder([w for w in range(count) for _ in range(n)])
            logits = np.repeat(logits, n, axis=0)
        sequences: list[list[int]] = [[] for _ in range(rows)]
        sums = np.zeros(rows)
        alive = np.ones(rows, dtype=bool)
        for _ in range(self.max_new_tokens):
            self.rules.apply(logits, sequences)
            logprobs = log_softmax(logits)
            if temperature == 0.0:
                picks = np.argmax(logits, axis=-1)
            else:
                # In float64, as WindowDecoder._sample: past float32's range the temperature would be inf.
                picks = np.argmax(logits.astype(np.float64) / temperature + rng.gumbel(size=logits.shape), axis=-1)
            feed = []
            for r in range(rows):
                if alive[r]:
                    token = int(picks[r])
                    sums[r] += logprobs[r, token]
                    if token == eot:
                        alive[r] = False
                    else:
                        sequences[r].append(token)
                feed.append([sequences[r][-1] if alive[r] else eot])
            if not alive.any() or offset >= self.n_text_ctx:
                break
            logits = self._logits(compute.decode_batch(features, feed, offset), rows)
            offset += 1
        found = []
        for w in range(count):
            best = max(range(w * n, (w + 1) * n), key=lambda r: self._score(sums[r], len(sequences[r])))
            found.append((sequences[best], float(sums[best])))
        return found

    def _beam_windows(self, compute: WhisperCompute, features: Any, logits: np.ndarray, offset: int,
                      count: int) -> list[tuple[list[int], float]]:
        beam_size = self.options.beam_size
        max_candidates = max(1, round(beam_size * (self.options.patience or 1.0)))
        eot = self.special.eot
        rows = count * beam_size
        compute.reorder([w for w in range(count) for _ in range(beam_size)])
        logits = np.repeat(logits, beam_size, axis=0)
        beams: list[list[tuple[list[int], float]]] = [[([], 0.0)] for _ in range(count)]
        finished: list[dict[tuple[int, ...], float]] = [{} for _ in range(count)]
        done = [False] * count
        for _ in range(self.max_new_tokens):
            sampled = [beams[w][j][0] if j < len(beams[w]) else [] for w in range(count) for j in range(beam_size)]
            self.rules.apply(logits, sampled)
            logprobs = log_softmax(logits)
            sources: list[int] = []
            feed: list[list[int]] = []
            for w in range(count):
                base = w * beam_size
                if done[w]:
                    sources += range(base, base + beam_size)
                    feed += [[eot]] * beam_size
                    continue
                candidates = []
                for j, (tokens, total) in enumerate(beams[w]):
                    row = logprobs[base + j]
                    top = np.argpartition(-row, beam_size)[:beam_size + 1]
                    candidates += [(total + row[t], j, int(t)) for t in top if np.isfinite(row[t])]
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
                    done[w] = True
                    sources += range(base, base + beam_size)
                    feed += [[eot]] * beam_size
                    continue
                fill = beam_size - len(new_beams)
                sources += [base + j for j in picked] + [base + picked[0]] * fill
                feed += [[tokens[-1]] for tokens, _ in new_beams] + [[new_beams[0][0][-1]]] * fill
            if all(done) or offset >= self.n_text_ctx:
                break
            if sources != list(range(rows)):
                compute.reorder(sources)
            logits = self._logits(compute.decode_batch(features, feed, offset), rows)
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
