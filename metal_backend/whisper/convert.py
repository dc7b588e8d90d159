"""Converts a Whisper model to a whisper.cpp ggml .bin file.

    python -m metal_backend.whisper.convert CT2_DIR OUT.bin

The input may be a CTranslate2 directory or another ggml file. Matrices and
conv weights are written as float16, biases, norms and positional embeddings
as float32, with the mel filter bank and the text-token vocabulary: the
layout whisper.cpp loads.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from metal_backend.io.ggml_types import QuantizedTensor

from .errors import WhisperError
from .ggml_format import write_ggml
from .loader import load_model_data

_FTYPE_F16 = 1


def convert(source: str, destination: str) -> None:
    """Writes the model at `source` to `destination` as a float16 ggml file."""
    model = load_model_data(source)
    if any(isinstance(t, QuantizedTensor) for t in model.tensors.values()):
        raise WhisperError(f"{source}: model is quantized; only float models convert to a float16 file")
    write_ggml(replace(model, hparams=replace(model.hparams, ftype=_FTYPE_F16)), destination)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m metal_backend.whisper.convert",
        description="Convert a CTranslate2 Whisper model directory to a whisper.cpp ggml .bin file.")
    parser.add_argument("source", help="CTranslate2 model directory (or a ggml .bin file)")
    parser.add_argument("destination", help="output .bin file")
    args = parser.parse_args(argv)
    try:
        convert(args.source, args.destination)
    except WhisperError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.destination}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
