"""Word timestamps from the cross-attention of the alignment heads (the published method of
openai-whisper, which faster-whisper and whisper.cpp also follow).

For one decoded window:

1. the alignment pass (compute.align: BackendWhisper.align, or the numpy reference's) runs the decoder once over
   [start of transcript ..., <|notimestamps|>, text tokens ..., <|endoftext|>] and returns the
   chosen heads' cross-attention probabilities over the encoder positions that hold audio
   (n_frames // 2 of them, 20 ms each) and the logits at every position;
2. each head's weights are normalised per encoder position over the tokens (z-score), median
   filtered along time (width 7) and averaged over the heads;
3. dynamic time warping over the negated weights, from the row that predicts the first text
   token to the one that predicts <|endoftext|>, gives a monotone token -> time path; a token
   starts where the path first reaches its row;
4. tokens are grouped into words (a token starting with a space, a punctuation token or a
   special token starts a word; languages written without spaces split at whole characters),
   punctuation is merged into the next word (prepend_punctuations) or the previous one
   (append_punctuations), and each word gets the times of its first and of the next word's
   first token and the mean probability of its tokens;
5. words longer than twice the median word duration (at most 0.7 s) are cut at sentence ends
   and after pauses, and segment boundaries move to their words' times (or the first/last word
   to the segment's time when that word is implausibly long).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import WhisperError
from .model_data import WhisperModelData
from .options import DecodingOptions
from .tokenizer import Tokenizer
from .transcript import Segment, Word

MEDIAN_FILTER_WIDTH = 7
# Encoder positions per second (each covers two 10 ms mel frames).
POSITIONS_PER_SECOND = 50
# Words whose boundaries come from character splits, not spaces.
_NO_SPACE_LANGUAGES = ("zh", "ja", "th", "lo", "my", "yue")
_SENTENCE_END_MARKS = ".。!！?？"
_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


@dataclass
class WordTiming:
    """A word of the alignment: text, token ids, start and end in seconds from the window start,
    and the mean probability of its tokens."""

    word: str
    tokens: list[int]
    start: float
    end: float
    probability: float


def add_word_timestamps(compute: Any, model: WhisperModelData, tokenizer: Tokenizer, features: Any,
                        segments: list[Segment], window_start: float, n_frames: int, options: DecodingOptions,
                        language: str | None = None, last_speech_time: float | None = None) -> None:
    """Fills segment.words for the segments decoded in one window, and moves the segments' start
    and end to their words' times where those are more plausible.

    features are compute's handle of the window (from its latest encode()); window_start is the
    window's start in seconds; n_frames the mel frames of the window that hold audio (at most
    3000). language is the language the window was decoded in (None: options.language, else
    English); last_speech_time (seconds) is where the previous window's speech ended (None:
    window_start), used to spot words stretched over a pause.
    """
    hp = model.hparams
    if not isinstance(n_frames, (int, np.integer)) or not 1 <= n_frames <= 2 * hp.n_audio_ctx:
        raise WhisperError(f"n_frames must be an integer in 1..{2 * hp.n_audio_ctx} (got {n_frames!r})")
    special = model.special
    per_segment = [[t for t in s.tokens if t < special.eot] for s in segments]
    text_tokens = [t for tokens in per_segment for t in tokens]
    if not text_tokens:
        for s in segments:
            s.words = []
        return
    language = language or options.language or "en"
    timings = find_alignment(compute, model, tokenizer, features, text_tokens, n_frames, language, options.task)
    _assign(timings, segments, per_segment, window_start, options,
            window_start if last_speech_time is None else last_speech_time)


def sot_sequence(model: WhisperModelData, language: str, task: str) -> list[int]:
    """<|startoftranscript|>, and for multilingual models the language and task tokens."""
    special = model.special
    if not model.hparams.is_multilingual:
        return [special.sot]
    return [special.sot, special.language(language),
            special.translate if task == "translate" else special.transcribe]


def find_alignment(compute: Any, model: WhisperModelData, tokenizer: Tokenizer, features: Any,
                   text_tokens: Sequence[int], n_frames: int, language: str = "en",
                   task: str = "transcribe") -> list[WordTiming]:
    """The words of text_tokens with times (seconds from the window start) and probabilities,
    before punctuation merging."""
    special = model.special
    hp = model.hparams
    prefix = sot_sequence(model, language, task)
    tokens = [*prefix, special.no_timestamps, *text_tokens, special.eot]
    if len(tokens) > hp.n_text_ctx:
        raise WhisperError(f"{len(text_tokens)} text tokens do not fit the text context of {hp.n_text_ctx} "
                           f"for alignment")
    n_audio = max(1, min(n_frames // 2, hp.n_audio_ctx))
    out = compute.align(features, tokens, model.word_alignment_heads, n_audio)

    # Probability of each text token among the text tokens, from the position before it.
    logits = np.asarray(out.logits, dtype=np.float64)[len(prefix):len(prefix) + len(text_tokens), :special.eot]
    logits -= logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=-1, keepdims=True)
    token_probs = probs[np.arange(len(text_tokens)), text_tokens]

    matrix = alignment_matrix(np.asarray(out.weights, dtype=np.float64))[len(prefix):-1]
    rows, cols = dtw_path(-matrix)
    # Where the path first enters each row: that token's start (row k predicts token k).
    first = np.concatenate([[True], np.diff(rows) != 0])
    starts = cols[first] / POSITIONS_PER_SECOND

    words, word_tokens = split_words(tokenizer, [*text_tokens, special.eot], language)
    bounds = np.concatenate([[0], np.cumsum([len(t) for t in word_tokens[:-1]])]).astype(int)
    return [WordTiming(word=words[k], tokens=word_tokens[k], start=float(starts[bounds[k]]),
                       end=float(starts[bounds[k + 1]]),
                       probability=float(np.mean(token_probs[bounds[k]:bounds[k + 1]])))
            for k in range(len(words) - 1)]


def alignment_matrix(weights: np.ndarray) -> np.ndarray:
    """(tokens, positions) matrix from the heads' weights (heads, tokens, positions): each head
    z-scored over tokens per position, median filtered along positions, averaged over heads."""
    mean = weights.mean(axis=-2, keepdims=True)
    std = weights.std(axis=-2, keepdims=True)
    # A position every token attends to alike carries no timing: it becomes 0, not NaN.
    z = (weights - mean) / np.where(std > 0, std, 1.0)
    return median_filter(z, MEDIAN_FILTER_WIDTH).mean(axis=0)


def median_filter(x: np.ndarray, width: int) -> np.ndarray:
    """Median over windows of `width` (odd) along the last axis, mirrored at the edges
    (rows shorter than width // 2 + 1 are returned as they are)."""
    if width % 2 == 0 or width < 1:
        raise WhisperError(f"the median filter width must be odd and positive (got {width})")
    half = width // 2
    if x.shape[-1] <= half:
        return x
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(half, half)], mode="reflect")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1), axis=-1)


def dtw_path(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The monotone path of least total cost through cost (n, m) from (0, 0) to (n - 1, m - 1),
    each step moving down, right or diagonally: (row indices, column indices) along the path.

    Row i of the accumulated cost D follows from row i - 1 without a loop over columns:
    D[i, j] = x_j + min(a_j, D[i, j - 1]) with a_j = min(D[i-1, j-1], D[i-1, j]) unrolls to
    D[i, j] = S_j + min_{k <= j} (a_k - S_{k-1}), S the running sum of row i's costs.
    """
    cost = np.asarray(cost, dtype=np.float64)
    if cost.ndim != 2 or 0 in cost.shape:
        raise WhisperError(f"DTW needs a non-empty 2-D cost matrix (got shape {cost.shape})")
    if not np.all(np.isfinite(cost)):
        raise WhisperError("DTW cost matrix has non-finite values")
    n, m = cost.shape
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0.0
    for i in range(1, n + 1):
        above = acc[i - 1]
        a = np.minimum(above[:-1], above[1:])
        sums = np.concatenate([[0.0], np.cumsum(cost[i - 1])])
        acc[i, 1:] = sums[1:] + np.minimum.accumulate(a - sums[:-1])
    rows, cols = [], []
    i, j = n, m
    while i > 0 and j > 0:
        rows.append(i - 1)
        cols.append(j - 1)
        diagonal, up, left = acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1]
        if diagonal <= up and diagonal <= left:
            i, j = i - 1, j - 1
        elif up < left:
            i -= 1
        else:
            j -= 1
    return np.array(rows[::-1], dtype=np.int64), np.array(cols[::-1], dtype=np.int64)


def split_words(tokenizer: Tokenizer, tokens: Sequence[int], language: str = "en") -> tuple[list[str], list[list[int]]]:
    """Words of tokens and the tokens of each. Pieces are the shortest runs of tokens that decode
    to whole UTF-8 characters; in languages written with spaces a piece starting with a space,
    a punctuation piece or a special token starts a new word, other pieces join the word before."""
    pieces, piece_tokens = _split_characters(tokenizer, tokens)
    if language in _NO_SPACE_LANGUAGES:
        return pieces, piece_tokens
    words: list[str] = []
    word_tokens: list[list[int]] = []
    for piece, ids in zip(pieces, piece_tokens):
        starts_word = (tokenizer.is_special(ids[0]) or piece.startswith(" ") or not words
                       or all(c in _PUNCTUATION for c in piece.strip()))
        if starts_word:
            words.append(piece)
            word_tokens.append(list(ids))
        else:
            words[-1] += piece
            word_tokens[-1].extend(ids)
    return words, word_tokens


def _split_characters(tokenizer: Tokenizer, tokens: Sequence[int]) -> tuple[list[str], list[list[int]]]:
    pieces: list[str] = []
    piece_tokens: list[list[int]] = []
    pending: list[int] = []
    data = b""
    for token in tokens:
        if tokenizer.is_special(token):
            if pending:
                pieces.append(data.decode("utf-8", errors="replace"))
                piece_tokens.append(pending)
                pending, data = [], b""
            pieces.append(tokenizer.decode_with_special([token]))
            piece_tokens.append([token])
            continue
        pending.append(token)
        data += tokenizer.token_bytes(token)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            # A character split over tokens: wait for its remaining bytes.
            if exc.reason == "unexpected end of data" and exc.start >= len(data) - 3:
                continue
            text = data.decode("utf-8", errors="replace")
        pieces.append(text)
        piece_tokens.append(pending)
        pending, data = [], b""
    if pending:
        pieces.append(data.decode("utf-8", errors="replace"))
        piece_tokens.append(pending)
    return pieces, piece_tokens


def merge_punctuations(words: list[WordTiming], prepended: str, appended: str) -> None:
    """Moves opening punctuation (a word of only prepended characters after a space) into the
    next word and closing punctuation (a word in appended) into the previous one; the emptied
    entries keep no text and no tokens."""
    following = len(words) - 1
    for i in range(len(words) - 2, -1, -1):
        before, after = words[i], words[following]
        if before.word.startswith(" ") and before.word.strip() and all(c in prepended for c in before.word.strip()):
            after.word = before.word + after.word
            after.tokens = before.tokens + after.tokens
            before.word, before.tokens = "", []
        else:
            following = i
    previous = 0
    for j in range(1, len(words)):
        before, after = words[previous], words[j]
        if not before.word.endswith(" ") and after.word and all(c in appended for c in after.word):
            before.word += after.word
            before.tokens = before.tokens + after.tokens
            after.word, after.tokens = "", []
        else:
            previous = j


def _assign(timings: list[WordTiming], segments: list[Segment], per_segment: list[list[int]], window_start: float,
            options: DecodingOptions, last_speech_time: float) -> None:
    durations = np.array([w.end - w.start for w in timings])
    durations = durations[durations > 0]
    median = min(0.7, float(np.median(durations))) if durations.size else 0.0
    longest = 2 * median
    # A word that runs across a sentence end or out of a pause is cut to the longest plausible length.
    if durations.size:
        for i in range(1, len(timings)):
            w = timings[i]
            if w.end - w.start > longest:
                if w.word in _SENTENCE_END_MARKS:
                    w.end = w.start + longest
                elif timings[i - 1].word in _SENTENCE_END_MARKS:
                    w.start = w.end - longest
    merge_punctuations(timings, options.prepend_punctuations, options.append_punctuations)

    k = 0
    for segment, tokens in zip(segments, per_segment):
        taken = 0
        words: list[Word] = []
        while k < len(timings) and taken < len(tokens):
            w = timings[k]
            if w.word:
                words.append(Word(start=round(window_start + w.start, 2), end=round(window_start + w.end, 2),
                                  word=w.word, probability=w.probability))
            taken += len(w.tokens)
            k += 1
        segment.words = words
        if not words:
            continue
        first = words[0]
        # The first word after a pause tends to be stretched back into the silence.
        if first.end - last_speech_time > 4 * median and (
                first.end - first.start > longest
                or (len(words) > 1 and words[1].end - first.start > 2 * longest)):
            if len(words) > 1 and words[1].end - words[1].start > longest:
                boundary = max(words[1].end / 2, words[1].end - longest)
                first.end = words[1].start = boundary
            first.start = max(0.0, first.end - longest)
        if segment.start < first.end and segment.start - 0.5 > first.start:
            first.start = max(0.0, min(first.end - median, segment.start))
        else:
            segment.start = first.start
        last = words[-1]
        if segment.end > last.start and segment.end + 0.5 < last.end:
            last.end = max(last.start + median, segment.end)
        else:
            segment.end = last.end
        last_speech_time = segment.end
