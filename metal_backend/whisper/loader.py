"""Opens any supported Whisper model: a whisper.cpp .bin file, a GGUF file with whisper.cpp's tensor
names (gguf_format.py) or a CTranslate2 directory."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from metal_backend.io.ggml_types import GgmlType, QuantizedTensor

from .ct2_format import is_ct2_dir, read_ct2
from .errors import WhisperError
from .ggml_format import is_ggml_file, read_ggml
from .gguf_format import is_gguf_file, read_gguf
from .model_data import Tensor, WhisperModelData, is_matrix

# whisper.cpp records quantized files as ftype + 2 * 1000 (its quantization format version 2).
_QUANTIZED_FTYPES = {GgmlType.Q4_0: 2002, GgmlType.Q4_1: 2003, GgmlType.Q8_0: 2007,
                     GgmlType.Q5_0: 2008, GgmlType.Q5_1: 2009}

QuantizeHook = Callable[[str, np.ndarray], Tensor]


def load_model_data(path: str | os.PathLike, quantize: Optional[QuantizeHook] = None) -> WhisperModelData:
    """Loads a model file or directory into WhisperModelData.

    quantize, when given, is called as quantize(name, array) for every float
    linear-layer matrix and the token embedding (what ggml quantizes) and
    returns its replacement: a QuantizedTensor of the same logical shape or
    another float array. When all matrices end up quantized to one type,
    hparams.ftype is set as whisper.cpp would for such a file.
    """
    path = Path(path)
    if not path.exists():
        raise WhisperError(f"{path}: model not found")
    if path.is_dir():
        if not is_ct2_dir(path):
            raise WhisperError(f"{path}: directory has no model.bin (not a CTranslate2 model)")
        model = read_ct2(path)
    elif is_ggml_file(path):
        model = read_ggml(path)
    elif is_gguf_file(path):
        model = read_gguf(path)
    else:
        raise WhisperError(f"{path}: not a whisper.cpp ggml model file (bad magic), a GGUF file "
                           "nor a CTranslate2 model directory")
    if quantize is not None:
        model = _apply_quantize(model, quantize)
    return model


def _apply_quantize(model: WhisperModelData, quantize: QuantizeHook) -> WhisperModelData:
    tensors = dict(model.tensors)
    for name, tensor in model.tensors.items():
        if is_matrix(name) and isinstance(tensor, np.ndarray):
            result = quantize(name, tensor)
            if tuple(result.shape) != tuple(tensor.shape):
                raise WhisperError(f"quantize hook changed the shape of {name} "
                                   f"from {tuple(tensor.shape)} to {tuple(result.shape)}")
            tensors[name] = result
    types = {t.ggml_type if isinstance(t, QuantizedTensor) else None
             for n, t in tensors.items() if is_matrix(n)}
    hparams = model.hparams
    if len(types) == 1 and None not in types:
        hparams = replace(hparams, ftype=_QUANTIZED_FTYPES[types.pop()])
    result = replace(model, tensors=tensors, hparams=hparams)
    result.validate()
    return result
