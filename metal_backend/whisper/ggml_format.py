"""Reader and writer for whisper.cpp's ggml model files (.bin).

Layout, all little-endian:
  u32 magic 0x67676d6c ("ggml")
  i32 x 11 hparams: n_vocab n_audio_ctx n_audio_state n_audio_head n_audio_layer
                    n_text_ctx n_text_state n_text_head n_text_layer n_mels ftype
  i32 n_mels, i32 n_fft, f32[n_mels * n_fft] mel filter bank
  i32 n_words, then n_words x (u32 length, raw token bytes): the text tokens;
      whisper.cpp derives the special tokens from n_vocab
  tensors to the end of the file, each:
      i32 n_dims, i32 name length, i32 ggml type, i32[n_dims] ne (innermost
      first, the reverse of numpy order), name bytes, data (no padding)

whisper.cpp checks each tensor's type by size against what it expects: f32
positional embeddings, biases and norms (conv biases stored as ne (1, d)),
matrices in the file's type, conv weights f16 (f32 in an f32 file).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from metal_backend.io import ByteCursor, map_file
from metal_backend.io.ggml_types import NUMPY_TYPES, GgmlType, QuantizedTensor

from .errors import WhisperError
from .model_data import SpecialTokens, Tensor, WhisperHParams, WhisperModelData, expected_shapes, is_matrix

GGML_MAGIC = 0x67676D6C

# whisper.cpp's ftype (modulo its quantization-version factor) -> matrix type.
_FTYPE_MATRIX_TYPES = {
    0: GgmlType.F32, 1: GgmlType.F16, 2: GgmlType.Q4_0, 3: GgmlType.Q4_1,
    7: GgmlType.Q8_0, 8: GgmlType.Q5_0, 9: GgmlType.Q5_1,
}
_QNT_VERSION_FACTOR = 1000
_QNT_VERSION = 2  # ggml's current quantization format
_MAX_DIMS = 4


def is_ggml_file(path: str | os.PathLike) -> bool:
    """True when the file starts with the ggml magic."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return len(head) == 4 and struct.unpack("<I", head)[0] == GGML_MAGIC


def read_ggml(path: str | os.PathLike) -> WhisperModelData:
    """Loads a whisper.cpp ggml model file.

    float tensors are zero-copy views of the memory-mapped file in their
    stored dtype; quantized ones become QuantizedTensor over the same mapping.
    Raises WhisperError naming the file for anything malformed.
    """
    path = Path(path)
    name = str(path)
    cur = ByteCursor(map_file(path, WhisperError), name, WhisperError)

    (magic,) = cur.ints("I", "the magic number")
    if magic != GGML_MAGIC:
        raise WhisperError(f"{name}: not a whisper.cpp ggml model (magic 0x{magic:08x}, expected 0x{GGML_MAGIC:08x})")
    hparams = WhisperHParams(*cur.ints("11i", "the hyper-parameters"))
    hparams.validate(name)
    try:
        matrix_type_for_ftype(hparams.ftype)
    except WhisperError as e:
        raise WhisperError(f"{name}: {e}") from None

    n_mel, n_fft = cur.ints("2i", "the mel filter header")
    if n_mel != hparams.n_mels or n_fft <= 0:
        raise WhisperError(f"{name}: mel filter bank is {n_mel} x {n_fft}, expected {hparams.n_mels} rows")
    filters = cur.take(4 * n_mel * n_fft, "the mel filters").view("<f4").reshape(n_mel, n_fft).astype(np.float32)

    (n_words,) = cur.ints("i", "the vocabulary size")
    if not 0 <= n_words <= hparams.n_vocab:
        raise WhisperError(f"{name}: vocabulary declares {n_words} tokens, more than n_vocab {hparams.n_vocab}")
    vocab = []
    for i in range(n_words):
        (length,) = cur.ints("I", f"the length of token {i}")
        vocab.append(cur.take(length, f"token {i}").tobytes())
    special_names = SpecialTokens.for_hparams(hparams).names(hparams.n_vocab)
    vocab += [special_names.get(i, b"[_extra_token_%d]" % i) for i in range(n_words, hparams.n_vocab)]

    _check_tensor_bytes(cur, hparams)
    tensors: dict[str, Tensor] = {}
    while not cur.at_end():
        n_dims, name_len, type_id = cur.ints("3i", "a tensor header")
        if not 1 <= n_dims <= _MAX_DIMS or not 0 < name_len <= 256:
            raise WhisperError(f"{name}: corrupt tensor header at byte {cur.pos - 12} "
                               f"(n_dims {n_dims}, name length {name_len})")
        ne = cur.ints(f"{n_dims}i", "tensor dimensions")
        tname = cur.take(name_len, "a tensor name").tobytes().decode("utf-8", errors="replace")
        if any(n <= 0 for n in ne):
            raise WhisperError(f"{name}: tensor {tname} has dimensions {ne}")
        try:
            ttype = GgmlType(type_id)
        except ValueError:
            raise WhisperError(f"{name}: tensor {tname} has unsupported ggml type {type_id}") from None
        if tname in tensors:
            raise WhisperError(f"{name}: tensor {tname} appears twice")
        tensors[tname] = _read_tensor(cur, tname, ttype, tuple(reversed(ne)))

    model = WhisperModelData(hparams=hparams, tensors=tensors, vocab=vocab, mel_filters=filters, source=name)
    model.validate()
    return model


def _check_tensor_bytes(cur: ByteCursor, hparams: WhisperHParams) -> None:
    """Refuses a header whose tensors cannot fit in what is left of the file, before reading any.

    The bound is the least the tensors could take in any type the reader accepts (q4_0 where rows
    are whole blocks, else f16), so a file with unexpected per-tensor types is judged by its
    tensors, not refused here.
    """
    densest = GgmlType.Q4_0
    need = 0
    for shape in expected_shapes(hparams).values():
        rows = int(np.prod(shape[:-1], dtype=np.int64))
        row = densest.row_bytes(shape[-1]) if shape[-1] % densest.block_size == 0 else 2 * shape[-1]
        need += rows * row
    left = cur.remaining()
    if need > left:
        raise WhisperError(f"{cur.name}: truncated model file, or a corrupt header: its hyper-parameters "
                           f"(n_audio_layer {hparams.n_audio_layer}, n_text_layer {hparams.n_text_layer}, state "
                           f"{hparams.n_audio_state}, ftype {hparams.ftype}) need at least {need} bytes of tensor "
                           f"data, but only {left} bytes follow the vocabulary")


def _read_tensor(cur: ByteCursor, tname: str, ttype: GgmlType, shape: tuple[int, ...]) -> Tensor:
    if shape[-1] % ttype.block_size:
        raise WhisperError(f"{cur.name}: tensor {tname} rows of {shape[-1]} are not whole {ttype.name} blocks")
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    row_bytes = ttype.row_bytes(shape[-1])
    raw = cur.take(rows * row_bytes, f"the data of tensor {tname}")
    if ttype.is_quantized:
        return QuantizedTensor(ttype, shape, raw.reshape(rows, row_bytes))
    array = raw.view(NUMPY_TYPES[ttype]).reshape(shape)
    # whisper.cpp keeps conv biases as (d, 1); every bias here is 1-D.
    if tname.endswith(".bias"):
        array = array.reshape(-1)
    return array


def matrix_type_for_ftype(ftype: int) -> GgmlType:
    """The type whisper.cpp expects for matrices in a file of this ftype."""
    version, base = divmod(ftype, _QNT_VERSION_FACTOR)
    if ftype < 0 or version > _QNT_VERSION or base not in _FTYPE_MATRIX_TYPES:
        raise WhisperError(f"unsupported whisper.cpp ftype {ftype} (known: "
                           f"{', '.join(str(k) for k in _FTYPE_MATRIX_TYPES)}, plus {_QNT_VERSION_FACTOR} times a "
                           f"quantization version of at most {_QNT_VERSION})")
    return _FTYPE_MATRIX_TYPES[base]


def stored_type(name: str, matrix_type: GgmlType) -> GgmlType:
    """The type whisper.cpp expects for a tensor in a file whose matrices are matrix_type."""
    if is_matrix(name):
        return matrix_type
    if name in ("encoder.conv1.weight", "encoder.conv2.weight"):
        return GgmlType.F32 if matrix_type == GgmlType.F32 else GgmlType.F16
    return GgmlType.F32


def write_ggml(model: WhisperModelData, path: str | os.PathLike) -> None:
    """Writes a whisper.cpp ggml model file that whisper.cpp itself can load.

    Each tensor is written in the type whisper.cpp expects for the model's
    ftype: float tensors are converted, quantized ones must already be of the
    file's matrix type. The file appears atomically (written beside, then renamed).
    """
    model.validate()
    hp = model.hparams
    matrix_type = matrix_type_for_ftype(hp.ftype)
    special = model.special
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<I", GGML_MAGIC))
            f.write(struct.pack("<11i", hp.n_vocab, hp.n_audio_ctx, hp.n_audio_state, hp.n_audio_head,
                                hp.n_audio_layer, hp.n_text_ctx, hp.n_text_state, hp.n_text_head,
                                hp.n_text_layer, hp.n_mels, hp.ftype))
            filters = np.ascontiguousarray(model.mel_filters, dtype="<f4")
            f.write(struct.pack("<2i", *filters.shape))
            f.write(memoryview(filters).cast("B"))
            # Only the text tokens: whisper.cpp names the special ones itself.
            f.write(struct.pack("<i", special.eot))
            for token in model.vocab[:special.eot]:
                f.write(struct.pack("<I", len(token)))
                f.write(token)
            for tname, shape in expected_shapes(hp).items():
                _write_tensor(f, tname, model.tensors[tname], stored_type(tname, matrix_type), shape)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_tensor(f, tname: str, tensor: Tensor, ttype: GgmlType, shape: tuple[int, ...]) -> None:
    if isinstance(tensor, QuantizedTensor):
        if tensor.ggml_type != ttype:
            raise WhisperError(f"tensor {tname} is {tensor.ggml_type.name}, but this file's type needs {ttype.name}")
        data = np.ascontiguousarray(tensor.data)
    elif ttype.is_quantized:
        raise WhisperError(f"tensor {tname} must be quantized to {ttype.name} before writing")
    else:
        data = np.ascontiguousarray(tensor, dtype=NUMPY_TYPES[ttype])
    if tname in ("encoder.conv1.bias", "encoder.conv2.bias"):
        shape = (shape[0], 1)
    encoded = tname.encode()
    f.write(struct.pack("<3i", len(shape), len(encoded), int(ttype)))
    f.write(struct.pack(f"<{len(shape)}i", *reversed(shape)))
    f.write(encoded)
    f.write(memoryview(data).cast("B"))
