"""Converts a Whisper model to a whisper.cpp ggml .bin file, float16 or quantized.

    python -m metal_backend.whisper.convert SOURCE OUT.bin [--type f16|f32|q8_0|q5_1|q5_0|q4_1|q4_0] [--force]

SOURCE is a CTranslate2 directory or a float (f16/f32) ggml file. The file is what whisper.cpp
loads. f16 (the default): matrices and conv weights float16; biases, norms and positional
embeddings float32. f32: everything float32. A quantized type follows whisper.cpp's quantize
tool (examples/quantize): every 2-D tensor except the two positional embeddings (and the conv
biases, which ggml stores as (1, d)) is quantized from the source's values (f16 widened exactly),
which makes the linear-layer matrices and the token embedding quantized; the 3-D conv weights
stay float16 and everything 1-D float32; the header's ftype is the type's id plus 2000 (ggml's
quantization version 2). An existing OUT is refused unless --force; the file appears only when
complete (written beside it, then renamed).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

import metal_backend as mb
from metal_backend.io.ggml_types import GgmlType, QuantizedTensor

from .errors import WhisperError
from .ggml_format import write_ggml
from .loader import load_model_data
from .model_data import WhisperModelData, is_matrix

# whisper.cpp's header ftype for each output type: the float ftypes, and ggml's ftype of the
# quantized type plus 1000 x its quantization version (2).
FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2002, "q4_1": 2003, "q8_0": 2007, "q5_0": 2008, "q5_1": 2009}


def convert(source: str | os.PathLike, destination: str | os.PathLike, type: str = "f16",
            force: bool = False) -> WhisperModelData:
    """Writes the model at `source` to `destination` as a whisper.cpp file of `type` (a FILE_TYPES
    key); returns the model as written.

    Raises WhisperError naming the values for an unknown type, a quantized source (whisper.cpp
    re-quantizes nothing either), a destination that exists (unless force), is a directory or is
    the source itself; nothing is written then.
    """
    if type not in FILE_TYPES:
        raise WhisperError(f"unknown output type {type!r}; expected one of {', '.join(FILE_TYPES)}")
    src, dst = Path(source), Path(destination)
    if dst.is_dir():
        raise WhisperError(f"{dst}: is a directory; give the output file's path")
    if src.exists() and dst.exists() and os.path.samefile(src, dst):
        raise WhisperError(f"{dst}: is the source model itself; write to another file")
    if dst.exists() and not force:
        raise WhisperError(f"{dst}: already exists; choose another name or pass force=True (--force) to replace it")
    if not dst.parent.is_dir():
        raise WhisperError(f"{dst.parent}: output directory does not exist")
    model = load_model_data(src)
    quantized = sorted({t.ggml_type.name.lower() for t in model.tensors.values() if isinstance(t, QuantizedTensor)})
    if quantized:
        raise WhisperError(f"{src}: model is already quantized ({', '.join(quantized)}); convert from its float "
                           "(f16 or f32) file or directory instead")
    model = replace(model, hparams=replace(model.hparams, ftype=FILE_TYPES[type]))
    if type not in ("f16", "f32"):
        model = quantize_matrices(model, GgmlType[type.upper()])
    write_ggml(model, dst)
    return model


def quantize_matrices(model: WhisperModelData, ggml_type: GgmlType) -> WhisperModelData:
    """The model with every tensor whisper.cpp's quantize tool quantizes (is_matrix: the 2-D ones
    other than the positional embeddings) replaced by its ggml_type blocks; ggml's reference
    quantizers (mb.quantize) over the float32 values, row by row."""
    qtype = ggml_type.mb_type
    tensors = dict(model.tensors)
    for name, tensor in model.tensors.items():
        if not is_matrix(name):
            continue
        rows, n = tensor.shape
        if n % qtype.block_size:
            raise WhisperError(f"{model.source}: tensor {name} rows of {n} values are not whole "
                               f"{ggml_type.name} blocks of {qtype.block_size}")
        data = np.frombuffer(mb.quantize(np.ascontiguousarray(tensor, dtype=np.float32), qtype), np.uint8)
        tensors[name] = QuantizedTensor(ggml_type, (rows, n), data.reshape(rows, -1))
    result = replace(model, tensors=tensors)
    result.validate()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m metal_backend.whisper.convert",
        description="Convert a CTranslate2 Whisper model directory (or a float ggml file) to a whisper.cpp "
                    "ggml .bin file, float16 or quantized as whisper.cpp's quantize tool does.")
    parser.add_argument("source", help="CTranslate2 model directory (or a float16/float32 ggml .bin file)")
    parser.add_argument("destination", help="output .bin file")
    parser.add_argument("--type", default="f16", metavar="TYPE",
                        help=f"tensor type of the matrices: {', '.join(FILE_TYPES)} (default f16)")
    parser.add_argument("--force", action="store_true", help="replace the output file if it exists")
    args = parser.parse_args(argv)
    try:
        convert(args.source, args.destination, type=args.type, force=args.force)
    except WhisperError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.destination} ({args.type})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
