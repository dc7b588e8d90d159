"""The interface between Whisper's decoding logic and whatever runs the network.

Decoding (decoding.py, language.py, transcribe.py) only needs these calls, so the numpy reference
in the tests and the metal_backend graph implementation plug in the same way.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class WhisperCompute(Protocol):
    """Runs Whisper's encoder and decoder over a batch of text sequences.

    encode(mel) takes one float32 (n_mels, 3000) log-mel window and returns an
    opaque handle to the audio features (whatever the implementation keeps:
    an array, device tensors, precomputed cross-attention keys and values).

    decode_batch(features, tokens, offset) feeds tokens[s] to sequence s at
    text positions offset .. offset + len(tokens[s]) - 1 (every row the same
    length) and returns the float32 logits (len(tokens), n_vocab) of each
    sequence's last token, a new array that the caller owns (decoding edits it
    in place). offset 0 starts len(tokens) new sequences for these
    features; a later call must continue where the previous one stopped
    (offset = number of tokens fed so far, the same number of sequences),
    which is what lets an implementation keep a self-attention key/value cache
    per sequence. Every sequence attends to the same audio features.
    skip (batched decoding, offset 0 only; BatchDecoder passes it only when the
    windows' prompts differ in length): for each new sequence, how many of its
    first tokens are padding, to be ignored (its real tokens at positions 0..).

    reorder(sequences) replaces the cached sequences by [old[s] for s in
    sequences]: beam search keeps the beams it continues, one prompt grows into
    several sequences (reorder([0] * n)), finished ones are dropped.

    decode(features, tokens, offset) is decode_batch of one sequence, returning
    its (n_vocab,) logits.
    """

    def encode(self, mel: np.ndarray) -> Any:
        ...

    def decode(self, features: Any, tokens: Sequence[int], offset: int) -> np.ndarray:
        ...

    def decode_batch(self, features: Any, tokens: Sequence[Sequence[int]], offset: int,
                     skip: Sequence[int] | None = None) -> np.ndarray:
        ...

    def reorder(self, sequences: Sequence[int]) -> None:
        ...
