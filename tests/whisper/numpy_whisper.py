"""An independent float32 numpy implementation of Whisper's network: the test oracle.

It implements the WhisperCompute protocol (encode / decode / decode_batch /
reorder with a self-attention key/value cache per sequence), written from the architecture description
alone: conv1 + GELU, conv2 (stride 2) + GELU, sinusoidal positions, pre-norm
residual blocks, final LayerNorm; decoder with token and learned position
embeddings, masked self-attention, cross-attention, logits against the token
embedding. GELU is the exact erf form openai-whisper uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from metal_backend.whisper import QuantizedTensor, WhisperError, WhisperModelData

_LN_EPS = 1e-5


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), elementwise in float32."""
    a = np.abs(x)
    t = 1.0 / (1.0 + np.float32(0.3275911) * a)
    poly = np.float32(1.061405429) * t
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    a *= poly
    np.subtract(1.0, a, out=a)
    return np.copysign(a, x, out=a)


def gelu(x: np.ndarray) -> np.ndarray:
    y = erf(x * np.float32(1.0 / np.sqrt(2.0)))
    y += 1.0
    y *= x
    y *= np.float32(0.5)
    return y


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(_LN_EPS)) * weight + bias


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in place."""
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, n_head: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Multi-head scaled dot-product attention of q (n, d) over k, v (m, d) -> (n, d)."""
    n, d = q.shape
    m = k.shape[0]
    hd = d // n_head
    qh = (q * np.float32(hd ** -0.5)).reshape(n, n_head, hd).transpose(1, 0, 2)
    kh = k.reshape(m, n_head, hd).transpose(1, 2, 0)
    vh = v.reshape(m, n_head, hd).transpose(1, 0, 2)
    scores = qh @ kh
    if mask is not None:
        scores += mask
    out = softmax(scores) @ vh
    return out.transpose(1, 0, 2).reshape(n, d)


@dataclass
class NumpyAudioFeatures:
    """Encoder output (n_audio_ctx, d) and each decoder layer's cross-attention keys and values."""

    encoded: np.ndarray
    cross_kv: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)


class NumpyWhisper:
    """Whisper's encoder and decoder in float32 numpy, implementing WhisperCompute."""

    def __init__(self, model: WhisperModelData):
        self.hp = model.hparams
        self.w: dict[str, np.ndarray] = {}
        for name, tensor in model.tensors.items():
            if isinstance(tensor, QuantizedTensor):
                raise WhisperError(f"{name} is {tensor.ggml_type.name}: the numpy reference needs float weights")
            self.w[name] = np.ascontiguousarray(tensor, dtype=np.float32)
        self._cache_features: NumpyAudioFeatures | None = None
        self._caches: list[list[tuple[np.ndarray, np.ndarray]]] = []
        self._cache_len = 0

    def _linear(self, x: np.ndarray, name: str, bias: bool = True) -> np.ndarray:
        y = x @ self.w[f"{name}.weight"].T
        return y + self.w[f"{name}.bias"] if bias else y

    def _conv(self, x: np.ndarray, name: str, stride: int) -> np.ndarray:
        """1-D convolution, kernel 3, padding 1, of time-major x (t, c_in) -> (t_out, c_out)."""
        weight = self.w[f"{name}.weight"]  # (c_out, c_in, 3)
        c_out, c_in, width = weight.shape
        t_out = (x.shape[0] + 2 - width) // stride + 1
        xp = np.pad(x, ((1, 1), (0, 0)))
        # cols[t, c, k] = xp[t * stride + k, c], matching weight[o, c, k].
        cols = np.stack([xp[k:k + stride * (t_out - 1) + 1:stride] for k in range(width)], axis=-1)
        return cols.reshape(t_out, c_in * width) @ weight.reshape(c_out, c_in * width).T + self.w[f"{name}.bias"]

    def _mlp(self, x: np.ndarray, prefix: str) -> np.ndarray:
        h = layer_norm(x, self.w[f"{prefix}.mlp_ln.weight"], self.w[f"{prefix}.mlp_ln.bias"])
        return self._linear(gelu(self._linear(h, f"{prefix}.mlp.0")), f"{prefix}.mlp.2")

    def encode(self, mel: np.ndarray) -> NumpyAudioFeatures:
        mel = np.asarray(mel, dtype=np.float32)
        if mel.shape != (self.hp.n_mels, 2 * self.hp.n_audio_ctx):
            raise WhisperError(f"mel has shape {mel.shape}, expected {(self.hp.n_mels, 2 * self.hp.n_audio_ctx)}")
        x = gelu(self._conv(mel.T, "encoder.conv1", stride=1))
        x = gelu(self._conv(x, "encoder.conv2", stride=2))
        x = x + self.w["encoder.positional_embedding"]
        for i in range(self.hp.n_audio_layer):
            p = f"encoder.blocks.{i}"
            h = layer_norm(x, self.w[f"{p}.attn_ln.weight"], self.w[f"{p}.attn_ln.bias"])
            a = attention(self._linear(h, f"{p}.attn.query"), self._linear(h, f"{p}.attn.key", bias=False),
                          self._linear(h, f"{p}.attn.value"), self.hp.n_audio_head)
            x = x + self._linear(a, f"{p}.attn.out")
            x = x + self._mlp(x, p)
        encoded = layer_norm(x, self.w["encoder.ln_post.weight"], self.w["encoder.ln_post.bias"])
        features = NumpyAudioFeatures(encoded=encoded.astype(np.float32))
        for i in range(self.hp.n_text_layer):
            p = f"decoder.blocks.{i}.cross_attn"
            features.cross_kv.append((self._linear(encoded, f"{p}.key", bias=False),
                                      self._linear(encoded, f"{p}.value")))
        return features

    def decode(self, features: NumpyAudioFeatures, tokens: Sequence[int], offset: int) -> np.ndarray:
        return self.decode_batch(features, [tokens], offset)[0]

    def decode_batch(self, features: NumpyAudioFeatures, tokens: Sequence[Sequence[int]], offset: int,
                     skip: Sequence[int] | None = None) -> np.ndarray:
        """Each sequence decoded on its own, over its own cache: (len(tokens), n_vocab) logits.
        skip (offset 0): sequence s's first skip[s] tokens are padding: they are dropped, and its
        positions count from its first real token."""
        if len(tokens) == 0 or len(tokens[0]) == 0:
            raise WhisperError("decode needs at least one token")
        n = len(tokens[0])
        if any(len(row) != n for row in tokens):
            raise WhisperError("every sequence of a batch must feed the same number of tokens")
        if skip is not None and (offset != 0 or len(skip) != len(tokens) or any(not 0 <= k < n for k in skip)):
            raise WhisperError(f"bad skip {list(skip)} for {len(tokens)} sequences of {n} tokens at offset {offset}")
        if offset == 0:
            self._skips = list(skip) if skip is not None else [0] * len(tokens)
            self._cache_features = features
            empty = np.zeros((0, self.hp.n_text_state), np.float32)
            self._caches = [[(empty, empty)] * self.hp.n_text_layer for _ in tokens]
            self._cache_len = 0
        elif features is not self._cache_features or offset != self._cache_len:
            raise WhisperError(f"decode at offset {offset} does not continue the cached sequence "
                               f"({self._cache_len} tokens)")
        elif len(tokens) != len(self._caches):
            raise WhisperError(
                f"decode of {len(tokens)} sequences does not continue the {len(self._caches)} cached ones")
        if offset + n > self.hp.n_text_ctx:
            raise WhisperError(f"text context of {self.hp.n_text_ctx} exceeded ({offset} + {n})")
        logits = np.stack([self._decode_one(features, self._caches[s], row[self._skips[s]:] if offset == 0 else row,
                                            offset - (0 if offset == 0 else self._skips[s]))
                           for s, row in enumerate(tokens)])
        self._cache_len = offset + n
        return logits

    def reorder(self, sequences: Sequence[int]) -> None:
        """The cached sequences become [old[s] for s in sequences]."""
        if not sequences or any(not 0 <= s < len(self._caches) for s in sequences):
            raise WhisperError(f"bad reorder {list(sequences)} of {len(self._caches)} sequences")
        self._caches = [list(self._caches[s]) for s in sequences]
        self._skips = [self._skips[s] for s in sequences]

    def _decode_one(self, features: NumpyAudioFeatures, cache: list, tokens: Sequence[int], offset: int) -> np.ndarray:
        n = len(tokens)
        ids = np.asarray(tokens, dtype=np.int64)
        x = self.w["decoder.token_embedding.weight"][ids] + self.w["decoder.positional_embedding"][offset:offset + n]
        # New token i sits at position offset + i and may see positions <= offset + i.
        mask = np.triu(np.full((n, offset + n), -np.inf, np.float32), k=offset + 1)
        for i in range(self.hp.n_text_layer):
            p = f"decoder.blocks.{i}"
            h = layer_norm(x, self.w[f"{p}.attn_ln.weight"], self.w[f"{p}.attn_ln.bias"])
            k_prev, v_prev = cache[i]
            k = np.concatenate([k_prev, self._linear(h, f"{p}.attn.key", bias=False)])
            v = np.concatenate([v_prev, self._linear(h, f"{p}.attn.value")])
            cache[i] = (k, v)
            a = attention(self._linear(h, f"{p}.attn.query"), k, v, self.hp.n_text_head, mask)
            x = x + self._linear(a, f"{p}.attn.out")
            h = layer_norm(x, self.w[f"{p}.cross_attn_ln.weight"], self.w[f"{p}.cross_attn_ln.bias"])
            ck, cv = features.cross_kv[i]
            a = attention(self._linear(h, f"{p}.cross_attn.query"), ck, cv, self.hp.n_text_head)
            x = x + self._linear(a, f"{p}.cross_attn.out")
            x = x + self._mlp(x, p)
        last = layer_norm(x[-1:], self.w["decoder.ln.weight"], self.w["decoder.ln.bias"])
        return (last @ self.w["decoder.token_embedding.weight"].T)[0].astype(np.float32)

    def align(self, features: NumpyAudioFeatures, tokens: Sequence[int], heads: Sequence[tuple[int, int]],
              n_audio: int) -> "NumpyAlignment":
        """The alignment pass: the whole token sequence at once under a causal mask; the chosen
        heads' cross-attention probabilities (a softmax over the first n_audio encoder positions)
        and the logits of every position. The decode cache is left alone."""
        n = len(tokens)
        ids = np.asarray(tokens, dtype=np.int64)
        x = self.w["decoder.token_embedding.weight"][ids] + self.w["decoder.positional_embedding"][:n]
        causal = np.triu(np.full((n, n), -np.inf, np.float32), k=1)
        hd = self.hp.n_text_state // self.hp.n_text_head
        picked: dict[tuple[int, int], np.ndarray] = {}
        for i in range(self.hp.n_text_layer):
            p = f"decoder.blocks.{i}"
            h = layer_norm(x, self.w[f"{p}.attn_ln.weight"], self.w[f"{p}.attn_ln.bias"])
            a = attention(self._linear(h, f"{p}.attn.query"), self._linear(h, f"{p}.attn.key", bias=False),
                          self._linear(h, f"{p}.attn.value"), self.hp.n_text_head, causal)
            x = x + self._linear(a, f"{p}.attn.out")
            h = layer_norm(x, self.w[f"{p}.cross_attn_ln.weight"], self.w[f"{p}.cross_attn_ln.bias"])
            q = self._linear(h, f"{p}.cross_attn.query")
            ck, cv = features.cross_kv[i]
            for layer, head in heads:
                if layer == i:
                    cols = slice(head * hd, (head + 1) * hd)
                    scores = (q[:, cols] @ ck[:n_audio, cols].T) * (hd ** -0.5)
                    picked[(layer, head)] = softmax(scores)
            x = x + self._linear(attention(q, ck, cv, self.hp.n_text_head), f"{p}.cross_attn.out")
            x = x + self._mlp(x, p)
        x = layer_norm(x, self.w["decoder.ln.weight"], self.w["decoder.ln.bias"])
        logits = x @ self.w["decoder.token_embedding.weight"].T
        return NumpyAlignment(weights=np.stack([picked[(l, h)] for l, h in heads]).astype(np.float32),
                              logits=logits.astype(np.float32))


@dataclass
class NumpyAlignment:
    """The numpy alignment pass's result, shaped as the backend's AlignmentOutput."""

    weights: np.ndarray
    logits: np.ndarray


def float64_reference(model: WhisperModelData) -> NumpyWhisper:
    """The numpy model computing in float64 (weights widened from their stored values): the
    yardstick for the rounding error of float32/f16 implementations. Its GELU keeps the
    A&S erf (absolute error 1.5e-7), far below the errors it measures."""
    reference = NumpyWhisper(model)
    reference.w = {name: w.astype(np.float64) for name, w in reference.w.items()}
    return reference
