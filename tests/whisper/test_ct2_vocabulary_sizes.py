"""A CTranslate2 directory's vocabulary checked against the model's sizes (issue 24, item 8).

An empty or truncated vocabulary.txt loaded and every transcript became "[_extra_token_383]...":
the missing tokens were named like special ones. Now every text token and <|endoftext|> must be
in the file (only special tokens, whose names follow from their ids, may be missing). The class:
every length from empty to one short of the text tokens, in each of the three vocabulary formats,
raises WhisperError naming the file and the sizes; the full file, and one without the special
tokens, load the same vocabulary.
"""
from __future__ import annotations

import json

import pytest

from metal_backend.whisper import WhisperError, load_model_data


def _dir(tmp_path, tiny_en_dir, name):
    d = tmp_path / name
    d.mkdir()
    for f in ("model.bin", "config.json"):
        if (tiny_en_dir / f).exists():
            (d / f).symlink_to(tiny_en_dir / f)
    return d


@pytest.mark.parametrize("keep", [0, 1, 383, 25000, 50255, 50256])
@pytest.mark.parametrize("fmt", ["txt", "json", "tokenizer"])
def test_a_vocabulary_short_of_the_text_tokens_is_refused(tiny_en_dir, tiny_en, tmp_path, keep, fmt):
    lines = (tiny_en_dir / "vocabulary.txt").read_text(encoding="utf-8").split("\n")
    lines = [t for t in lines if t != ""][:keep]
    d = _dir(tmp_path, tiny_en_dir, "m")
    if fmt == "txt":
        (d / "vocabulary.txt").write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    elif fmt == "json":
        (d / "vocabulary.json").write_text(json.dumps(lines), encoding="utf-8")
    else:
        (d / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {t: i for i, t in enumerate(lines)}}}),
                                          encoding="utf-8")
    with pytest.raises(WhisperError, match=rf"{keep} tokens, fewer than the model's 50256 text tokens and "
                                           rf"<\|endoftext\|> \(the model has {tiny_en.hparams.n_vocab}\)"):
        load_model_data(d)


def test_only_special_tokens_may_be_missing(tiny_en_dir, tiny_en, tmp_path):
    lines = [t for t in (tiny_en_dir / "vocabulary.txt").read_text(encoding="utf-8").split("\n") if t != ""]
    d = _dir(tmp_path, tiny_en_dir, "short")
    (d / "vocabulary.txt").write_text("".join(t + "\n" for t in lines[:50257]), encoding="utf-8")
    vocab = load_model_data(d).vocab
    # The text tokens and <|endoftext|> as in the full file; the rest by openai-whisper's names.
    assert len(vocab) == len(tiny_en.vocab) and vocab[:50257] == tiny_en.vocab[:50257]
