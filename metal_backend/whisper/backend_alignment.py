"""The alignment pass of word timestamps as metal_backend graphs, on a BackendWhisper's weights.

One decoder run over a whole token sequence ([start of transcript ..., <|notimestamps|>, text
tokens, <|endoftext|>]) of the latest encoded window, with no self-attention cache: the sequence
is fed at once under a causal mask. Its outputs are the cross-attention probabilities of the
chosen (layer, head) pairs, each a softmax over only the encoder positions that hold audio (the
frames mask puts -inf on the rest, as the published method normalises over the audio part of the
window), and the logits of every position (the probability of each text token). All of it runs
in f32 except the window's cross-attention keys and values, which are the f16 tensors the
encoder graph wrote for the decoder.

Graphs are keyed by (padded token count, heads): the count is rounded up to _ROWS so windows of
similar length share a graph; the padding rows come after the real ones, and the causal mask
keeps them from changing the real rows.

It is given what it reads as an AlignmentModel (the runner, the weights, the cross-attention
tensors and the head sizes) and builds its graphs from metal_backend.nn.layers; it imports nothing
of backend_compute, which owns an AlignmentGraphs and calls it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

import metal_backend as mb
from metal_backend import ops
from metal_backend.nn import Runner, Weights, layers

from .errors import WhisperError
from .model_data import WhisperHParams

_ROWS = 16


@dataclass
class AlignmentOutput:
    """What the alignment pass returns: weights (n_heads, n_tokens, n_audio) float32, the chosen
    heads' cross-attention probabilities over the first n_audio encoder positions (each row sums
    to 1), and logits (n_tokens, n_vocab) float32, the next-token logits at every position."""

    weights: np.ndarray
    logits: np.ndarray


@dataclass(frozen=True)
class AlignmentModel:
    """What the alignment pass reads of a Whisper network on the backend: the runner (device,
    backends), the weights (decoder tensors by their Whisper names, the qkv/out/query matrices as
    BackendWhisper lays them out), the window's f16 cross-attention keys and values per decoder
    layer as BackendWhisper stores them (keys (1, H, n_audio, hd); values the same shape as rows where
    values_as_rows, else transposed, (1, H, hd, n_audio)), and the decoder's heads."""

    hp: WhisperHParams
    runner: Runner
    weights: Weights
    cross_keys: Sequence[mb.Tensor]
    cross_values: Sequence[mb.Tensor]
    values_as_rows: bool
    n_head: int
    head_dim: int

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim)


@dataclass
class _Graph:
    graph: mb.Graph
    heads: list[mb.Tensor]
    logits: mb.Tensor


class AlignmentGraphs:
    """Builds and runs the alignment graphs of one Whisper network (`model`)."""

    def __init__(self, model: AlignmentModel):
        self.model = model
        hp = model.hp
        n_ctx, n_audio = hp.n_text_ctx, hp.n_audio_ctx
        # Graph tensors must share the weights' Context: the inputs are added to it and get a
        # buffer of their own.
        self.ctx = model.weights.ctx
        self.tokens_in = self.ctx.tensor(mb.i32, (n_ctx,), name="align.tokens")
        self.positions_in = self.ctx.tensor(mb.i32, (n_ctx,), name="align.positions")
        self.causal_in = self.ctx.tensor(mb.f16, (n_ctx * n_ctx,), name="align.causal")
        self.frames_in = self.ctx.tensor(mb.f16, (n_ctx * n_audio,), name="align.frames")
        for t in (self.tokens_in, self.positions_in, self.causal_in, self.frames_in):
            t.is_input = True
        self.buffer = mb.alloc_ctx_tensors(self.ctx, model.runner.buffer_type)
        self.scheduler = model.runner.scheduler()
        self.graphs: dict[tuple[int, tuple[tuple[int, int], ...]], _Graph] = {}

    def run(self, tokens: Sequence[int], heads: Sequence[tuple[int, int]], n_audio: int) -> AlignmentOutput:
        """The alignment pass over tokens for the window last encoded (checked by the caller)."""
        hp = self.model.hp
        n = len(tokens)
        if n == 0:
            raise WhisperError("the alignment pass needs at least one token")
        if n > hp.n_text_ctx:
            raise WhisperError(f"the alignment pass got {n} tokens; the text context holds {hp.n_text_ctx}")
        try:
            ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError, OverflowError):
            raise WhisperError("token ids must be integers") from None
        if ids.size != n or ids.min() < 0 or ids.max() >= hp.n_vocab:
            raise WhisperError(f"token ids must be in 0..{hp.n_vocab - 1} (got {ids.min()}..{ids.max()})")
        heads = _check_heads(heads, hp)
        if not isinstance(n_audio, (int, np.integer)) or not 1 <= n_audio <= hp.n_audio_ctx:
            raise WhisperError(f"n_audio must be an integer in 1..{hp.n_audio_ctx} (got {n_audio!r})")

        rows = min(-(-n // _ROWS) * _ROWS, hp.n_text_ctx)
        g = self.graphs.get((rows, heads))
        if g is None:
            g = self.graphs[(rows, heads)] = self._build(rows, heads)
        padded = np.full(rows, ids[-1], np.int32)
        padded[:n] = ids
        self.tokens_in.set(np.concatenate([padded, np.zeros(hp.n_text_ctx - rows, np.int32)]))
        self.positions_in.set(np.arange(hp.n_text_ctx, dtype=np.int32))
        causal = np.where(np.arange(rows)[None, :] <= np.arange(rows)[:, None], 0.0, -np.inf).astype(np.float16)
        self.causal_in.set(np.concatenate([causal.reshape(-1), np.zeros(hp.n_text_ctx ** 2 - rows * rows, np.float16)]))
        frames = np.where(np.arange(hp.n_audio_ctx) < n_audio, 0.0, -np.inf).astype(np.float16)
        self.frames_in.set(np.tile(frames, hp.n_text_ctx))
        self.model.runner.compute(g.graph, "BackendWhisper alignment", self.scheduler)
        weights = np.stack([h.get()[:n, :n_audio] for h in g.heads])
        return AlignmentOutput(weights=np.ascontiguousarray(weights, dtype=np.float32), logits=g.logits.get()[:n])

    def _build(self, n: int, heads: tuple[tuple[int, int], ...]) -> _Graph:
        m = self.model
        hp, w = m.hp, m.weights
        d, n_audio, H, hd, scale = hp.n_text_state, hp.n_audio_ctx, m.n_head, m.head_dim, m.scale

        def linear(x: mb.Tensor, name: str) -> mb.Tensor:
            return layers.linear(x, w[f"{name}.weight"], w[f"{name}.bias"], name)

        def layer_norm(x: mb.Tensor, name: str) -> mb.Tensor:
            return layers.layer_norm(x, w[f"{name}.weight"], w[f"{name}.bias"], 1e-5, name)

        def view_heads(x: mb.Tensor, row_elems: int, offset: int) -> mb.Tensor:
            return layers.head_view(x, H, hd, n, row_elems, offset)

        tokens = ops.view(self.tokens_in, (n,))
        positions = ops.view(self.positions_in, (n,))
        causal = ops.reshape(ops.view(self.causal_in, (n * n,)), (n, n))
        frames = ops.reshape(ops.view(self.frames_in, (n * n_audio,)), (n, n_audio))
        x = ops.add(ops.get_rows(w["decoder.token_embedding.weight"], tokens),
                    ops.get_rows(w["decoder.positional_embedding"], positions))  # (n, d)
        outputs: list[mb.Tensor] = []
        for i in range(hp.n_text_layer):
            p = f"decoder.blocks.{i}"
            qkv = linear(layer_norm(x, f"{p}.attn_ln"), f"{p}.attn.qkv")  # (n, 3d)
            v_t = ops.cont(ops.permute(view_heads(qkv, 3 * d, 2 * d), [0, 1, 3, 2]))  # (1, H, hd, n)
            a = layers.attention_matmul(view_heads(qkv, 3 * d, 0), view_heads(qkv, 3 * d, d), v_t, causal, scale)
            x = ops.add(x, linear(a, f"{p}.attn.out"))

            h = layer_norm(x, f"{p}.cross_attn_ln")
            q = view_heads(linear(h, f"{p}.cross_attn.query"), d, 0)
            # Values stored as rows: mul_mat reads V^T as their transposed view.
            v_t = ops.transpose(m.cross_values[i]) if m.values_as_rows else m.cross_values[i]
            scores = ops.mul_mat(m.cross_keys[i], q)  # (1, H, n, n_audio)
            for layer, head in heads:
                if layer == i:
                    head_scores = ops.view(scores, (n, n_audio), offset=head * n * n_audio * 4)
                    outputs.append(ops.soft_max_ext(head_scores, frames, scale, 0.0))
            probs = ops.soft_max_ext(scores, None, scale, 0.0)
            a = layers.merge_heads(ops.mul_mat(v_t, probs))
            x = ops.add(x, linear(a, f"{p}.cross_attn.out"))
            hm = layer_norm(x, f"{p}.mlp_ln")
            x = ops.add(x, layers.mlp(hm, w[f"{p}.mlp.0.weight"], w[f"{p}.mlp.0.bias"], w[f"{p}.mlp.2.weight"],
                                      w[f"{p}.mlp.2.bias"], ops.gelu_erf))
        logits = ops.mul_mat(w["decoder.token_embedding.weight"], layer_norm(x, "decoder.ln"))  # (n, n_vocab)
        # The heads come out in the order asked, which _check_heads made (layer, head) order.
        return _Graph(mb.Graph(*outputs, logits), outputs, logits)


def _check_heads(heads: Sequence[tuple[int, int]], hp: WhisperHParams) -> tuple[tuple[int, int], ...]:
    try:
        pairs = tuple((int(layer), int(head)) for layer, head in heads)
    except (TypeError, ValueError):
        raise WhisperError(f"alignment heads must be (layer, head) pairs (got {heads!r})") from None
    if not pairs:
        raise WhisperError("the alignment pass needs at least one (layer, head) pair")
    for layer, head in pairs:
        if not (0 <= layer < hp.n_text_layer and 0 <= head < hp.n_text_head):
            raise WhisperError(f"alignment head ({layer}, {head}) is outside the decoder's "
                               f"{hp.n_text_layer} layers x {hp.n_text_head} heads")
    if list(pairs) != sorted(set(pairs)):
        raise WhisperError(f"alignment heads must be distinct and in (layer, head) order (got {list(pairs)})")
    return pairs
