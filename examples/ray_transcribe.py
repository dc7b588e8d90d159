"""Transcribe many audio files on a Ray cluster with Ray Data: one Whisper model per actor.

    python examples/ray_transcribe.py MODEL_DIR out.jsonl a.wav b.flac ... [--actors 4] [--threads 2]

Ray Data schedules the work (placement, retries, back-pressure); each actor loads one model and
transcribes the files it is handed, one at a time. Run it on a started cluster (`ray start --head` on
one machine, `ray start --address=HEAD:6379` on the others; the files must be readable from every
node, e.g. on shared storage), or without one, on a local cluster that ray.init() starts.
Needs `pip install "ray[data]"`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np


class Transcriber:
    """A Ray Data callable class: one Whisper model per actor, loaded once."""

    def __init__(self, model_path: str, threads: int | None = None, **transcribe_kwargs: Any):
        from metal_backend.whisper import Whisper

        self.model = Whisper.load(model_path, threads=threads)
        self.kwargs = transcribe_kwargs

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list]:
        texts, segments, errors = [], [], []
        for path in batch["path"]:
            try:
                result = self.model.transcribe(str(path), **self.kwargs)
            except ValueError as exc:  # WhisperError: a bad file does not stop the others
                texts.append("")
                segments.append("[]")
                errors.append(str(exc))
                continue
            texts.append(result.text)
            segments.append(json.dumps([[s.start, s.end, s.text] for s in result.segments]))
            errors.append("")
        return {"path": list(batch["path"]), "text": texts, "segments": segments, "error": errors}


def transcribe_paths(paths: list[str], model_path: str, actors: int = 2, threads: int = 1,
                     **transcribe_kwargs: Any) -> list[dict]:
    """Rows {path, text, segments (JSON [[start, end, text]]), error} for every path, in order."""
    import ray

    dataset = ray.data.from_items([{"path": str(p)} for p in paths])
    results = dataset.map_batches(Transcriber, batch_size=1, concurrency=actors, num_cpus=threads,
                                  fn_constructor_kwargs={"model_path": model_path, "threads": threads,
                                                         **transcribe_kwargs})
    order = {str(p): i for i, p in enumerate(paths)}
    return sorted(results.take_all(), key=lambda row: order[row["path"]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("output", help="JSON lines, one per file")
    parser.add_argument("audio", nargs="+")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--vad_filter", action="store_true")
    args = parser.parse_args()
    rows = transcribe_paths(args.audio, args.model, args.actors, args.threads, vad_filter=args.vad_filter)
    with open(args.output, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
