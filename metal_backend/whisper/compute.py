"""The interface between Whisper's decoding logic and whatever runs the network.

Decoding (decoding.py) only needs these two calls, so the numpy reference in
the tests and the metal_backend graph implementation plug in the same way.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class WhisperCompute(Protocol):
    """Runs Whisper's encoder and decoder.

    encode(mel) takes one float32 (n_mels, 3000) log-mel window and returns an
    opaque handle to the audio features (whatever the implementation keeps:
    an array, device tensors, precomputed cross-attention keys and values).

    decode(features, tokens, offset) feeds `tokens` at text positions
    offset .. offset + len(tokens) - 1 and returns the float32 logits
    (n_vocab,) of the last of them. offset 0 starts a new sequence for these
    features; a later call must continue where the previous one stopped
    (offset = number of tokens fed so far), which is what lets an
    implementation keep a self-attention key/value cache.
    """

    def encode(self, mel: np.ndarray) -> Any:
        ...

    def decode(self, features: Any, tokens: Sequence[int], offset: int) -> np.ndarray:
        ...
