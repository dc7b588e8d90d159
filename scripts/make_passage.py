#!/usr/bin/env python3
"""Builds a long spoken passage with known sentence start times (espeak-ng + sox).

Each sentence is spoken by espeak-ng (en-us, 140 words per minute), converted to 16 kHz mono
16-bit by sox, and the sentences are joined with a fixed pause between them. The passage can be
repeated. Next to the WAV a JSON file lists every sentence with its start and end in seconds, so
transcripts can be scored (WER) and segment or word times checked against where each sentence
really starts.

    python3 scripts/make_passage.py out.wav                 # the 25-sentence passage (~2 min)
    python3 scripts/make_passage.py out.wav --sentences 12  # its first 12 sentences
    python3 scripts/make_passage.py out.wav --repeat 5      # the passage five times over

Needs espeak-ng and sox on PATH (Debian: apt-get install espeak-ng sox).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

SAMPLE_RATE = 16000

# Plain declarative sentences of ordinary vocabulary, each spoken in 2-7 s.
SENTENCES = [
    "The library opens at nine in the morning and closes at six in the evening.",
    "Please remember to bring your notebook to the meeting on Thursday.",
    "The train to the city leaves from the second platform every half hour.",
    "My brother planted tomatoes and beans in the garden behind the house.",
    "We walked along the river until the sun went down behind the hills.",
    "The children built a small wooden boat and painted it bright blue.",
    "A warm cup of tea is the best way to start a cold winter day.",
    "The doctor said that I should drink more water and sleep a little longer.",
    "Our teacher explained the lesson twice so that everyone could follow it.",
    "The old bridge was closed for repairs during the whole summer.",
    "She found her keys under a pile of newspapers on the kitchen table.",
    "The museum has a new exhibition about ships and the history of the sea.",
    "Every Saturday my grandmother bakes fresh bread for the whole family.",
    "The weather report promised rain, but the afternoon stayed dry and sunny.",
    "He fixed the broken chair with some glue and a few small nails.",
    "The store on the corner sells fruit, vegetables and fresh flowers.",
    "We need to finish the report before the end of the week.",
    "The cat slept all afternoon in a patch of sunlight by the window.",
    "Tourists from many countries visit the castle on the hill each year.",
    "The farmer drove his tractor slowly across the muddy field.",
    "Please turn off the lights and close the door when you leave the room.",
    "The concert in the park was cancelled because of the strong wind.",
    "My neighbor walks his dog twice a day, even when it snows.",
    "The students asked many questions after the talk about the planets.",
    "At the end of the day we sat by the fire and told old stories.",
]

PAUSE_SECONDS = 0.6


def speak(text: str, work: Path, index: int) -> bytes:
    """16 kHz mono 16-bit PCM frames of one sentence."""
    raw, out = work / f"s{index}_raw.wav", work / f"s{index}.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "140", "-w", str(raw), text], check=True)
    subprocess.run(["sox", str(raw), "-r", str(SAMPLE_RATE), "-c", "1", "-b", "16", str(out)], check=True)
    with wave.open(str(out), "rb") as w:
        return w.readframes(w.getnframes())


def build(dest: Path, n_sentences: int, repeat: int) -> dict:
    if not 1 <= n_sentences <= len(SENTENCES):
        raise SystemExit(f"make_passage: --sentences must be in 1..{len(SENTENCES)} (got {n_sentences})")
    if repeat < 1:
        raise SystemExit(f"make_passage: --repeat must be at least 1 (got {repeat})")
    texts = SENTENCES[:n_sentences]
    with tempfile.TemporaryDirectory() as tmp:
        frames = [speak(text, Path(tmp), i) for i, text in enumerate(texts)]
    pause = b"\0\0" * int(PAUSE_SECONDS * SAMPLE_RATE)
    pcm = bytearray(pause)
    sentences = []
    for _ in range(repeat):
        for text, data in zip(texts, frames):
            start = len(pcm) / 2 / SAMPLE_RATE
            pcm += data
            sentences.append({"text": text, "start": round(start, 3), "end": round(len(pcm) / 2 / SAMPLE_RATE, 3)})
            pcm += pause
    dest.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(dest), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(bytes(pcm))
    info = {"duration": round(len(pcm) / 2 / SAMPLE_RATE, 3), "sentences": sentences}
    dest.with_suffix(".json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="WAV file to write; the sentence times go to the .json beside it")
    parser.add_argument("--sentences", type=int, default=len(SENTENCES), help="how many of the sentences (default all)")
    parser.add_argument("--repeat", type=int, default=1, help="times the passage is repeated (default 1)")
    args = parser.parse_args(argv)
    info = build(args.output, args.sentences, args.repeat)
    print(f"make_passage: wrote {args.output} ({info['duration']:.1f} s, {len(info['sentences'])} sentences)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
