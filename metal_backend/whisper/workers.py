"""Many files on one machine: a pool of worker processes, each with its own model.

transcribe_files() hands the files to `workers` processes (concurrent.futures.ProcessPoolExecutor,
started by "spawn": no process forks after backends have started their threads). Each process loads
the model once, in its initializer, and transcribes the files it is given; the results come back in
the order of the files. One process per model is the only way to use several cores for several
files: transcribe() on one model runs one call at a time (model.Whisper).

With threads None, each worker's CPU backend gets os.cpu_count() // workers threads (at least one),
so the workers do not compete for the same cores.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Iterator

from .errors import WhisperError
from .options import DecodingOptions
from .transcript import Transcript

_model: Any = None  # the worker process's Whisper


def worker_threads(workers: int, threads: int | None) -> int | None:
    """The CPU threads of each worker's backend (see the module docstring)."""
    if threads is not None:
        return threads
    return max(1, (os.cpu_count() or 1) // workers)


def _load(model_path: str, device: str | None, threads: int | None) -> None:
    global _model
    from .model import Whisper

    try:
        _model = Whisper.load(model_path, device=device, threads=threads)
    except Exception as exc:  # kept, reported with every file this worker is given
        _model = f"{type(exc).__name__}: {exc}"


def _transcribe(audio: str, options: DecodingOptions, kwargs: dict[str, Any]) -> tuple[Transcript | None, str, str]:
    """(transcript, device name, "") or (None, "", error message) for one file."""
    if isinstance(_model, str):
        return None, "", f"cannot load the model: {_model}"
    try:
        return _model.transcribe(audio, options, **kwargs), _model.device.name, ""
    except Exception as exc:  # a bad file must not end the worker; the message goes to the caller
        return None, "", str(exc)


def transcribe_files(files: list[str], model_path: str, options: DecodingOptions, workers: int,
                     device: str | None = None, threads: int | None = None,
                     **kwargs: Any) -> Iterator[tuple[str, Transcript | None, str, str]]:
    """(file, transcript or None, device name, error message or "") for each file, in order.
    kwargs go to Whisper.transcribe (vad_filter, vad_parameters, batch_size, ...)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers <= 0:
        raise WhisperError(f"workers must be a positive integer (got {workers!r})")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, max(len(files), 1)), mp_context=context, initializer=_load,
                             initargs=(model_path, device, worker_threads(workers, threads))) as pool:
        futures = [pool.submit(_transcribe, audio, options, kwargs) for audio in files]
        for audio, future in zip(files, futures):
            yield (audio, *future.result())
