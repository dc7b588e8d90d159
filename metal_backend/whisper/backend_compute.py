"""Whisper's encoder and decoder as metal_backend graphs: the WhisperCompute the application runs.

Everything lives in one Context on the chosen device: the weights (matrices as stored, f16 or
quantized; conv kernels f16; biases, norms and positional embeddings f32), the inputs (mel window,
token ids, positions, attention mask), the f16 self-attention key/value cache and the f16
cross-attention keys and (transposed) values of the current window. Graphs are built once and
reused:

- the encoder graph (always the same shapes) ends with the cross-attention keys and values of
  every decoder layer, copied into their f16 tensors;
- one decoder graph per (sequences, tokens fed per sequence, cache length read): the cache length
  is the number of positions filled rounded up to _KV_BLOCK, so a 30-token transcript uses two
  single-token graphs. Positions, token ids, cache rows and the mask are input tensors, so
  consecutive steps reuse a graph; new keys and values are written into the cache with set_rows.

Several sequences (beam search, best-of sampling) are decoded as one batch: the self-attention
cache holds n_ctx rows per sequence (sequence s at rows s * n_ctx ..), every sequence of a batch
is at the same position, and all of them attend to the one window's cross-attention keys and
values (broadcast over the batch). reorder() rearranges the cache's sequences on the device with
a small graph (get_rows of the source rows into a scratch tensor, set_rows back), never through
the host; the capacity in sequences grows on demand (a device copy into a larger cache).

Graphs run through a metal_backend.nn.Runner: Schedulers over [device backend, CPU backend] so an
op the device cannot run falls back to the CPU (on the CPU device the list is just the CPU backend);
the weights are one nn.Weights; the layers (linear, layer_norm, conv1d, attention, mlp) are
metal_backend.nn.layers.

Attention, as measured on the CPU device:
- encoder self-attention (1500 queries, 1500 keys) uses flash_attn_ext on every device (no
  1500 x 1500 score matrices, 54 MB per layer for tiny's 6 heads, streamed through DRAM three times
  by mul_mat + soft_max_ext + mul_mat). On CPU devices it reads the keys and values as f32 views of
  the qkv product (no copy, no f16 rounding; the scores are f32 in both paths); on the others, f16
  copies, as whisper.cpp uses on Metal. Since the CPU kernel converts a head's K/V tiles once per
  (head, thread) and multiplies in AVX-512 tiles, it is the faster of the two on the CPU: tiny.en,
  one 30 s window, 2-core Xeon (AVX-512) at load 12, process CPU time per encode (best of 4, interleaved):
  float32 0.553 s against 0.594 s with "matmul" at one thread, 0.564 against 0.636 at two; int8
  0.383 against 0.442 at one, 0.401 against 0.457 at two (an earlier kernel, converting the tiles
  for every query block, was 27% slower than "matmul"). "matmul" stays selectable;
- decoder self-attention (a few queries over at most 448 cached f16 positions) uses flash_attn_ext;
- decoder cross-attention (a few queries over 1500 positions) uses mul_mat + soft_max_ext over
  f16 keys and values stored at encode time, where flash_attn_ext would convert every key and value
  tile to f32 for each query block. Keys are stored as K (1500 rows of head_dim), read in place by
  the matrix-vector products. Values: on the CPU device as V (1500 rows of head_dim), read through a
  transposed view, which the CPU's mul_mat multiplies with broadcast tiles (mul_mat_transposed.h:
  no horizontal sums, one sequential pass over V for all of a window's queries); elsewhere as V^T
  (the rows the matrix-vector products read in place): _cross_operands. Keys stored as K^T were
  tried the same way: faster with the keys in cache, but the transposed tiles read K^T in strided
  64-row pieces, which from memory ran at half the speed of K's sequential rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

import metal_backend as mb
from metal_backend import ops
from metal_backend.io.ggml_types import QuantizedTensor
from metal_backend.nn import Runner, Weights, layers
from metal_backend.nn import resolve_device as _resolve_device

from .backend_alignment import AlignmentGraphs, AlignmentModel, AlignmentOutput
from .errors import WhisperError
from .model_data import Tensor, WhisperModelData

_LN_EPS = 1e-5
# Decoder self-attention reads the cache in multiples of this many positions: few graphs, and
# little work on the masked tail.
_KV_BLOCK = 32
_ATTENTION_KINDS = ("flash", "matmul")
_TYPES_BY_ID = {t.id: t for t in mb.types}


@dataclass(frozen=True)
class BackendAudioFeatures:
    """Handle returned by encode(): the window's cross-attention keys and values stay in backend
    memory, so the handle only records which encode() call produced them."""

    window: int


@dataclass(frozen=True)
class BackendBatchFeatures:
    """Handle returned by encode_batch(): the cross-attention keys and values of `count` windows,
    encoded together, stay in backend memory."""

    window: int
    count: int


@dataclass
class _WindowBatch:
    """The tensors of a batch of windows (capacity windows): mel input, each decoder layer's
    cross-attention keys and values (capacity + 1 windows, in BackendWhisper's cross layout), the
    encoder's f16 keys and values for flash attention, and the encoder graph per count."""

    capacity: int
    buffer: mb.Buffer
    mel: mb.Tensor
    cross_keys: list
    cross_values: list
    encoder_kv: list
    graphs: dict
    selects: dict = field(default_factory=dict)  # select_window's copy graph per window slot
    moves: dict = field(default_factory=dict)  # keep_windows' copy graph per (source, target) slot
    window: int = -1  # the encode_batch() whose windows the tensors hold
    order: list = field(default_factory=list)  # order[slot]: the encode_batch() index of the window there


@dataclass
class _DecoderGraph:
    graph: mb.Graph
    tokens: mb.Tensor
    positions: mb.Tensor
    rows: mb.Tensor
    mask: mb.Tensor
    logits: mb.Tensor


@dataclass
class _ReorderGraph:
    graph: mb.Graph
    source: mb.Tensor
    target: mb.Tensor


def resolve_device(device: mb.Device | str | None) -> mb.Device:
    """A Device from a Device, a device name, or None (the best real device)."""
    try:
        return _resolve_device(device)
    except (ValueError, TypeError) as exc:
        raise WhisperError(str(exc)) from None


# The CPU workers stay awake this long after each graph (the backend option spin_us): a decoder step
# is a short graph followed by host work (logit filters, beam bookkeeping) of about a millisecond, and
# workers that slept in between start the next step on one thread. On a 16-core Xeon, tiny.en on a
# 132 s passage, beam 5: 2.1-2.4 s against 2.2-2.8 s at the default 500 us (16 threads), 3.3-3.5 s
# against 3.8-4.7 s (4 threads); greedy unchanged. The cores are busy for at most this long after
# the transcription ends. Set the option on model.compute.backend to change it.
DECODER_SPIN_US = 20_000


def _encoder_kv_type(device: mb.Device, encoder_attention: str, int8_activations: bool):
    """The type of the copies of the encoder's keys and values that flash_attn_ext reads, or None for
    f32 views of the qkv product (no copy, no rounding). GPU devices: f16. The CPU device with
    int8_activations on a host whose CPU multiplies bf16 pairs (prop bf16_dot "avx512bf16"): bf16,
    so the attention's products run on vdpbf16ps (twice the products per instruction of f32; the
    query and the softmax weights are rounded to bf16, as int8 rounds the linear layers' activations;
    the WER of each compute type is measured in README's table)."""
    if encoder_attention != "flash":
        return None
    if device.type != mb.DeviceType.CPU:
        return mb.f16
    if int8_activations and device.props.extra.get("bf16_dot") == "avx512bf16":
        return mb.bf16
    return None


class BackendWhisper:
    """Runs Whisper's network on a metal_backend device (implements WhisperCompute).

    threads sets the CPU backend's n_threads (None keeps its default). encoder_attention picks
    flash_attn_ext ("flash") or mul_mat + soft_max_ext ("matmul") for the encoder's attention;
    None picks "flash" (measured faster on the CPU device too, see the module docstring).
    max_sequences is the number of sequences the self-attention cache holds at first (it grows
    when a batch or reorder needs more). int8_activations: the linear layers with quantized weights
    quantize their activations to 8-bit blocks for every token count (mb.ops.mul_mat's
    compute_type "int8"), so the encoder's products are byte dot products too; otherwise those
    many-token products dequantize the weights and keep the activations in f32.
    """

    def __init__(self, model: WhisperModelData, device: mb.Device | str | None = None,
                 threads: int | None = None, encoder_attention: str | None = None, max_sequences: int = 5,
                 int8_activations: bool = False):
        device = resolve_device(device)
        if encoder_attention is None:
            encoder_attention = "flash"
        if encoder_attention not in _ATTENTION_KINDS:
            raise WhisperError(f"unknown attention kind {encoder_attention!r}; expected one of {_ATTENTION_KINDS}")
        if threads is not None and threads <= 0:
            raise WhisperError(f"threads must be positive (got {threads})")
        if not isinstance(max_sequences, int) or max_sequences <= 0:
            raise WhisperError(f"max_sequences must be a positive integer (got {max_sequences!r})")
        self.hp = hp = model.hparams
        self.encoder_attention = encoder_attention
        self.int8_activations = bool(int8_activations)
        self._encoder_kv_type = _encoder_kv_type(device, encoder_attention, self.int8_activations)
        self.runner = Runner(device, threads=threads, spin_us=DECODER_SPIN_US)
        self.device = self.runner.device
        self.backend = self.runner.backend
        self.backends = self.runner.backends

        self.n_head = hp.n_audio_head
        self.head_dim = hp.n_audio_state // hp.n_audio_head
        self.scale = 1.0 / math.sqrt(self.head_dim)

        # Cross-attention keys and values in the layout the device multiplies fastest (_cross_operands).
        self.values_as_rows = self.device.type == mb.DeviceType.CPU
        self.weights = Weights(self.device.buffer_type)
        self.ctx = self.weights.ctx
        self._create_weights(model)
        self.weights_buffer = self.weights.upload()
        self.w = self.weights.tensors

        d = hp.n_text_state
        self.mel = self.ctx.tensor(mb.f32, (1, hp.n_mels, 2 * hp.n_audio_ctx), name="mel")
        # Cross-attention keys and values head by head: K, and V on the CPU, V^T elsewhere.
        self.cross_keys = [self.ctx.tensor(mb.f16, (1, *self._cross_shapes()[0]), name=f"cross_keys.{i}")
                           for i in range(hp.n_text_layer)]
        self.cross_values = [self.ctx.tensor(mb.f16, (1, *self._cross_shapes()[1]), name=f"cross_values.{i}")
                             for i in range(hp.n_text_layer)]
        # The encoder's keys and values in f16 for flash_attn_ext, one pair of tensors per layer.
        self.encoder_kv = []
        if self._encoder_kv_type is not None:
            self.encoder_kv = [self.ctx.tensor(self._encoder_kv_type, (hp.n_audio_ctx, 2 * d), name=f"encoder_kv.{i}")
                               for i in range(hp.n_audio_layer)]
        self.mel.is_input = True
        self.state_buffer = mb.alloc_ctx_tensors(self.ctx, self.device.buffer_type)
        # Attention reads the cache up to a padded length, masking what is not written yet; those
        # positions must hold finite values (a NaN key or value would turn the masked term into NaN).
        self.state_buffer.clear(0)
        self.n_sequences = 0
        self.cache_buffer: mb.Buffer | None = None  # the self-attention caches and decoder inputs
        self._cache_generation = 0
        self.decoder_graphs: dict[tuple[int, int, int, int], _DecoderGraph] = {}
        self.reorder_graphs: dict[tuple[int, int], _ReorderGraph] = {}
        self.k_cache: list[mb.Tensor] = []
        self.v_cache: list[mb.Tensor] = []
        self._allocate_cache(max_sequences)

        self.encoder_scheduler = self.runner.scheduler()
        self.decoder_scheduler = self.runner.scheduler()
        # Built on first use: mb.alloc_ctx_tensors places every unallocated tensor of the Context, so a
        # graph built long before its first compute would have its nodes swept into the next buffer
        # made for new tensors (harmless once that buffer is freed: the scheduler places them again).
        self._encoder: tuple[mb.Graph, mb.Tensor] | None = None
        self._windows: _WindowBatch | None = None
        self._window = 0
        self._n_past = -1
        self._n_active = 0
        self._skips = np.zeros(0, np.int64)  # each cached sequence's padding slots (decode_batch skip)
        # Each cached sequence's origin (the sequence of the last offset-0 decode it descends from through
        # reorder) and, per origin, the cache slots all its descendants hold alike: those filled when
        # reorder first gave it a second row (the prompt, for beams and best-of samples). reorder copies
        # a row over another of the same origin from there on only.
        self._origins = np.zeros(0, np.int64)
        self._shared: dict[int, int] = {}
        self._alignment: AlignmentGraphs | None = None

    def _allocate_cache(self, n_sequences: int) -> None:
        """Self-attention caches and decoder inputs for n_sequences sequences; the cached rows of the
        sequences held so far are copied over on the device, and every graph using the old tensors
        is dropped."""
        hp = self.hp
        d, n_ctx = hp.n_text_state, hp.n_text_ctx
        rows = n_sequences * n_ctx
        tag = self._cache_generation
        self._cache_generation += 1
        k_cache = [self.ctx.tensor(mb.f16, (rows, d), name=f"k_cache.{i}.{tag}") for i in range(hp.n_text_layer)]
        v_cache = [self.ctx.tensor(mb.f16, (rows, d), name=f"v_cache.{i}.{tag}") for i in range(hp.n_text_layer)]
        # Decoder and reorder inputs, viewed at the size each graph needs.
        self.tokens_in = self.ctx.tensor(mb.i32, (rows,), name=f"tokens.{tag}")
        self.positions_in = self.ctx.tensor(mb.i32, (rows,), name=f"positions.{tag}")
        self.rows_in = self.ctx.tensor(mb.i32, (rows,), name=f"rows.{tag}")
        self.mask_in = self.ctx.tensor(mb.f16, (rows * n_ctx,), name=f"mask.{tag}")
        self.source_rows_in = self.ctx.tensor(mb.i32, (rows,), name=f"source_rows.{tag}")
        self.target_rows_in = self.ctx.tensor(mb.i32, (rows,), name=f"target_rows.{tag}")
        for t in (self.tokens_in, self.positions_in, self.rows_in, self.mask_in, self.source_rows_in,
                  self.target_rows_in):
            t.is_input = True
        buffer = self._new_buffer()
        if self.n_sequences and self._n_active:
            kept = self._n_active * n_ctx
            copies = [ops.cpy(ops.view(old, (kept, d)), ops.view(new, (kept, d)))
                      for old, new in zip(self.k_cache + self.v_cache, k_cache + v_cache)]
            self.runner.compute(mb.Graph(*copies), "BackendWhisper cache copy", self.runner.scheduler())
        self.k_cache, self.v_cache = k_cache, v_cache
        self.n_sequences = n_sequences
        self.decoder_graphs.clear()
        self.reorder_graphs.clear()
        # Only the graphs just dropped read the old caches and inputs: their memory goes back now.
        previous, self.cache_buffer = self.cache_buffer, buffer
        if previous is not None:
            previous.free()

    # ---------------------------------------------------------------- weights

    def _create_weights(self, model: WhisperModelData) -> None:
        hp = self.hp
        t = model.tensors
        w = self.weights

        def matrix(name: str, parts: list[Tensor]) -> None:
            self._new_matrix(name, parts)

        def vector(name: str, array: Tensor) -> None:
            w.add(name, np.asarray(_dense(array), dtype=np.float32))

        for conv in ("encoder.conv1", "encoder.conv2"):
            w.add(f"{conv}.weight", np.asarray(_dense(t[f"{conv}.weight"]), dtype=np.float16))
            vector(f"{conv}.bias", t[f"{conv}.bias"])
        for name in ("encoder.positional_embedding", "decoder.positional_embedding",
                     "encoder.ln_post.weight", "encoder.ln_post.bias", "decoder.ln.weight", "decoder.ln.bias"):
            vector(name, t[name])
        matrix("decoder.token_embedding.weight", [t["decoder.token_embedding.weight"]])

        d = hp.n_audio_state
        zeros = np.zeros(d, np.float32)
        blocks = [f"encoder.blocks.{i}" for i in range(hp.n_audio_layer)]
        blocks += [f"decoder.blocks.{i}" for i in range(hp.n_text_layer)]
        for p in blocks:
            attns = ("attn", "cross_attn") if p.startswith("decoder") else ("attn",)
            for attn in attns:
                a = f"{p}.{attn}"
                for norm in ("weight", "bias"):
                    vector(f"{a}_ln.{norm}", t[f"{a}_ln.{norm}"])
                q, k, v = (t[f"{a}.{x}.weight"] for x in ("query", "key", "value"))
                if attn == "attn":
                    # One product for q, k and v (a key bias would cancel in softmax: zero).
                    matrix(f"{a}.qkv.weight", [q, k, v])
                    vector(f"{a}.qkv.bias", np.concatenate([_f32(t[f"{a}.query.bias"]), zeros,
                                                             _f32(t[f"{a}.value.bias"])]))
                else:
                    # Queries come from the text; keys and values from the audio, once per window.
                    # Values stored transposed are made as V^T = mul_mat(audio, W_v), which needs
                    # W_v as the f32 operand (the bias a column); values stored as rows (the CPU's
                    # layout, _cross_operands) are a product like the keys'.
                    matrix(f"{a}.query.weight", [q])
                    vector(f"{a}.query.bias", t[f"{a}.query.bias"])
                    matrix(f"{a}.key.weight", [k])
                    if self.values_as_rows:
                        matrix(f"{a}.value.weight", [v])
                        vector(f"{a}.value.bias", t[f"{a}.value.bias"])
                    else:
                        vector(f"{a}.value.weight", v)
                        vector(f"{a}.value.bias", _f32(t[f"{a}.value.bias"]).reshape(d, 1))
                matrix(f"{a}.out.weight", [t[f"{a}.out.weight"]])
                vector(f"{a}.out.bias", t[f"{a}.out.bias"])
            for norm in ("weight", "bias"):
                vector(f"{p}.mlp_ln.{norm}", t[f"{p}.mlp_ln.{norm}"])
            for layer in ("mlp.0", "mlp.2"):
                matrix(f"{p}.{layer}.weight", [t[f"{p}.{layer}.weight"]])
                vector(f"{p}.{layer}.bias", t[f"{p}.{layer}.bias"])

    def _new_matrix(self, name: str, parts: list[Tensor]) -> mb.Tensor:
        """A weight matrix made of the parts' rows, in their stored type (float parts of mixed
        precision become f32; parts of mixed quantized types are dequantized to f32)."""
        rows = sum(p.shape[0] for p in parts)
        cols = parts[0].shape[1]
        quantized = {p.ggml_type for p in parts if isinstance(p, QuantizedTensor)}
        if len(quantized) == 1 and all(isinstance(p, QuantizedTensor) for p in parts):
            mtype = _TYPES_BY_ID[int(quantized.pop())]
            return self.weights.add_raw(name, mtype, (rows, cols), np.concatenate([p.data for p in parts]).reshape(-1))
        arrays = [_dense(p) for p in parts]
        dtype = np.float16 if all(a.dtype == np.float16 for a in arrays) else np.float32
        return self.weights.add(name, np.concatenate(arrays).astype(dtype, copy=False))

    # ---------------------------------------------------------------- graph pieces

    def _linear(self, x: mb.Tensor, name: str) -> mb.Tensor:
        weight = self.w[f"{name}.weight"]
        int8 = self.int8_activations and weight.type.is_quantized
        return layers.linear(x, weight, self.w[f"{name}.bias"], name, compute_type="int8" if int8 else "float32")

    def _product(self, weight_name: str, x: mb.Tensor) -> mb.Tensor:
        """mul_mat(weight, x) without a bias, 8-bit activations for quantized weights as in _linear."""
        weight = self.w[weight_name]
        int8 = self.int8_activations and weight.type.is_quantized
        return ops.mul_mat(weight, x, compute_type="int8" if int8 else "float32")

    def _layer_norm(self, x: mb.Tensor, name: str) -> mb.Tensor:
        return layers.layer_norm(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"], _LN_EPS, name)

    def _conv(self, data: mb.Tensor, name: str, stride: int) -> mb.Tensor:
        """Kernel-3, padding-1 convolution of data (w, c_in, t) -> time-major (w, t_out, c_out)."""
        return layers.conv1d(data, self.w[f"{name}.weight"], self.w[f"{name}.bias"], stride=stride, padding=1,
                             name=name)

    def _heads(self, x: mb.Tensor, n: int, row_elems: int, offset_elems: int) -> mb.Tensor:
        """(1, H, n, head_dim) view of the columns [offset, offset + d) of the rows of x."""
        return layers.head_view(x, self.n_head, self.head_dim, n, row_elems, offset_elems)

    def _cross_shapes(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """The stored (H, ., .) shapes of one window's cross-attention keys and values."""
        rows = (self.n_head, self.hp.n_audio_ctx, self.head_dim)
        columns = (self.n_head, self.head_dim, self.hp.n_audio_ctx)
        return rows, (rows if self.values_as_rows else columns)

    def _batch_heads(self, x: mb.Tensor, batch: int, n: int, row_elems: int, offset_elems: int,
                     sequence_rows: int) -> mb.Tensor:
        """(batch, H, n, head_dim) view of the columns [offset, offset + d) of rows of x, where
        sequence b's rows start at row b * sequence_rows."""
        return layers.head_view(x, self.n_head, self.head_dim, n, row_elems, offset_elems, batch, sequence_rows)

    def _mlp(self, x: mb.Tensor, prefix: str) -> mb.Tensor:
        # layers.mlp's graph (parts named .0, .gelu, .2), through _linear for the compute type.
        h = self._linear(self._layer_norm(x, f"{prefix}.mlp_ln"), f"{prefix}.mlp.0")
        return self._linear(layers.named(ops.gelu_erf(h), f"{prefix}.mlp.gelu"), f"{prefix}.mlp.2")

    @property
    def encoder_graph(self) -> mb.Graph:
        """The encoder graph of one window (encode())."""
        if self._encoder is None:
            self._encoder = self._encoder_graph(self.mel, 1, self.cross_keys, self.cross_values, self.encoder_kv)
        return self._encoder[0]

    def profile_encoder(self, repeat: int = 1) -> mb.Profile:
        """backend.profile of encode()'s graph, its inputs holding the last window encoded. The graph's
        intermediates are the scheduler's scratch for each encode, so they are placed here first
        (a buffer of their own, held by the nodes) for the node-by-node runs."""
        graph = self.encoder_graph
        mb.GraphAllocator(self.backend).alloc_graph(graph)
        return self.backend.profile(graph, repeat=repeat)

    @property
    def encoder_out(self) -> mb.Tensor:
        """The final encoder states of encode()'s graph."""
        self.encoder_graph
        return self._encoder[1]

    def _encoder_graph(self, mel: mb.Tensor, windows: int, cross_keys: list, cross_values: list,
                       encoder_kv: list) -> tuple[mb.Graph, mb.Tensor]:
        """The encoder over `windows` mel windows (mel (windows, n_mels, 3000)), ending with the
        cross-attention keys and values of every decoder layer copied into cross_keys /
        cross_values (the cross layout, _cross_operands)."""
        hp = self.hp
        n, d = hp.n_audio_ctx, hp.n_audio_state
        w = windows
        x = layers.named(ops.gelu_erf(self._conv(mel, "encoder.conv1", stride=1)), "encoder.conv1.gelu")  # (w, 2n, d)
        x = layers.named(ops.gelu_erf(self._conv(ops.permute(x, [0, 2, 1]), "encoder.conv2", stride=2)),
                         "encoder.conv2.gelu")  # (w, n, d)
        x = ops.reshape(ops.add(ops.reshape(x, (w, n, d)), self.w["encoder.positional_embedding"]), (w * n, d))
        for i in range(hp.n_audio_layer):
            p = f"encoder.blocks.{i}"
            qkv = self._linear(self._layer_norm(x, f"{p}.attn_ln"), f"{p}.attn.qkv")  # (w n, 3d)
            q = self._batch_heads(qkv, w, n, 3 * d, 0, n)
            if self.encoder_attention == "flash":
                if encoder_kv:  # f16 or bf16 copies of the keys and values (_encoder_kv_type)
                    kv = ops.cpy(ops.view(qkv, (w * n, 2 * d), strides=(3 * d * 4, 4), offset=d * 4), encoder_kv[i])
                    src, width, k0 = kv, 2 * d, 0
                else:  # f32 views of the qkv product
                    src, width, k0 = qkv, 3 * d, d
                a = layers.attention_flash(q, self._batch_heads(src, w, n, width, k0, n),
                                           self._batch_heads(src, w, n, width, k0 + d, n), None, self.scale,
                                           f"{p}.attn")
            else:
                v_t = ops.cont(ops.permute(self._batch_heads(qkv, w, n, 3 * d, 2 * d, n), [0, 1, 3, 2]))
                a = layers.attention_matmul(q, self._batch_heads(qkv, w, n, 3 * d, d, n), v_t, None, self.scale,
                                            f"{p}.attn")
            x = layers.named(ops.add(x, self._linear(a, f"{p}.attn.out")), f"{p}.attn.residual")
            x = layers.named(ops.add(x, self._mlp(x, p)), f"{p}.mlp.residual")
        encoded = self._layer_norm(x, "encoder.ln_post")
        outputs = [encoded]
        for i in range(hp.n_text_layer):
            p = f"decoder.blocks.{i}.cross_attn"
            # f32 activations in both compute types: 8-bit ones here cost 2-3 words in three rows of
            # the passage x5 (README, "Faster on the CPU").
            k = layers.named(ops.mul_mat(self.w[f"{p}.key.weight"], encoded), f"{p}.key")  # (w n, d)
            outputs.append(ops.cpy(self._batch_heads(k, w, n, d, 0, n), cross_keys[i]))
            weight_v = self.w[f"{p}.value.weight"]
            if self.values_as_rows:
                v = layers.named(ops.mul_mat(weight_v, encoded), f"{p}.value")  # (w n, d)
                v = layers.named(ops.add(v, self.w[f"{p}.value.bias"]), f"{p}.value.bias")
                outputs.append(ops.cpy(self._batch_heads(v, w, n, d, 0, n), cross_values[i]))
                continue
            if w == 1:
                v_t = layers.named(ops.mul_mat(encoded, weight_v), f"{p}.value")  # (d, n)
            else:
                # mul_mat cannot broadcast the weight over the windows as its second operand: the
                # values are made row-major and transposed window by window.
                v = layers.named(ops.mul_mat(weight_v, encoded), f"{p}.value")  # (w n, d)
                v_t = ops.cont(ops.permute(ops.reshape(v, (w, n, d)), [0, 2, 1]))  # (w, d, n)
            v_t = layers.named(ops.add(v_t, self.w[f"{p}.value.bias"]), f"{p}.value.bias")
            outputs.append(ops.cpy(v_t, ops.reshape(cross_values[i], v_t.shape)))
        return mb.Graph(*outputs), encoded

    def _cross_operands(self, keys: mb.Tensor, values: mb.Tensor) -> tuple[mb.Tensor, mb.Tensor]:
        """mul_mat's operands for the cross-attention scores and outputs from the stored keys and
        values (windows, H, ., .): K (., H, n_audio, hd) and V^T (., H, hd, n_audio), the values a
        transposed view of V where they are stored as rows (values_as_rows)."""
        return keys, (ops.transpose(values) if self.values_as_rows else values)

    def _build_decoder(self, batch: int, n: int, n_kv: int, windows: int = 0, padded: bool = False) -> _DecoderGraph:
        """The graph feeding n tokens to each of batch sequences, whose attention reads n_kv cache
        positions of each sequence. windows 0: every sequence attends to the single window of
        encode(); windows w > 0: the first w windows of the last encode_batch(), batch // w
        consecutive sequences each. padded: every sequence has its own self-attention mask
        (sequences whose first slots are padding, decode_batch's skip)."""
        hp = self.hp
        d, n_ctx = hp.n_text_state, hp.n_text_ctx
        m = batch * n
        tokens = ops.view(self.tokens_in, (m,))
        positions = ops.view(self.positions_in, (m,))
        rows = ops.view(self.rows_in, (m,))
        # One mask for every sequence and head (all sequences of a batch are at the same positions),
        # or one per sequence (padded), broadcast over the heads.
        if padded:
            mask = ops.reshape(ops.view(self.mask_in, (batch * n * n_kv,)), (batch, 1, n, n_kv))
        else:
            mask = ops.reshape(ops.view(self.mask_in, (n * n_kv,)), (n, n_kv))
        x = ops.add(ops.get_rows(self.w["decoder.token_embedding.weight"], tokens),
                    ops.get_rows(self.w["decoder.positional_embedding"], positions))  # (m, d)
        for i in range(hp.n_text_layer):
            p = f"decoder.blocks.{i}"
            qkv = self._linear(self._layer_norm(x, f"{p}.attn_ln"), f"{p}.attn.qkv")  # (m, 3d)
            k_new = ops.view(qkv, (m, d), strides=(3 * d * 4, 4), offset=d * 4)
            v_new = ops.view(qkv, (m, d), strides=(3 * d * 4, 4), offset=2 * d * 4)
            # Reading the cache through set_rows' result orders the attention after the writes.
            k_all = ops.set_rows(self.k_cache[i], k_new, rows)
            v_all = ops.set_rows(self.v_cache[i], v_new, rows)
            q = self._batch_heads(qkv, batch, n, 3 * d, 0, n)
            k = self._batch_heads(k_all, batch, n_kv, d, 0, n_ctx)
            v = self._batch_heads(v_all, batch, n_kv, d, 0, n_ctx)
            a = ops.reshape(ops.flash_attn_ext(q, k, v, mask, self.scale), (m, d))  # (batch, n, H, hd)
            x = ops.add(x, self._linear(a, f"{p}.attn.out"))

            h = self._layer_norm(x, f"{p}.cross_attn_ln")
            # A window's sequences are consecutive rows: their queries are rows of one product with that
            # window's keys, (w, H, per_window * n, hd), so the keys are read once per step, not once per
            # sequence (encode()'s single window: w = 1).
            w = max(windows, 1)
            q = self._batch_heads(self._linear(h, f"{p}.cross_attn.query"), w, m // w, d, 0, m // w)
            if windows == 0:
                cross_k, v_t = self._cross_operands(self.cross_keys[i], self.cross_values[i])
            else:
                keys, values = self._cross_shapes()
                cross_k, v_t = self._cross_operands(_prefix(self._windows.cross_keys[i], (windows, *keys)),
                                                    _prefix(self._windows.cross_values[i], (windows, *values)))
            scores = layers.named(ops.mul_mat(cross_k, q), f"{p}.cross_attn.kq")
            probs = ops.soft_max_ext(scores, None, self.scale, 0.0)  # (., H, ., audio)
            out = layers.named(ops.mul_mat(v_t, probs), f"{p}.cross_attn.kqv")  # (., H, ., hd)
            a = ops.reshape(ops.cont(ops.permute(out, [0, 2, 1, 3])), (m, d))
            x = ops.add(x, self._linear(a, f"{p}.cross_attn.out"))
            x = ops.add(x, self._mlp(x, p))
        last = x if n == 1 else ops.cont(ops.view(x, (batch, d), strides=(n * d * 4, 4), offset=(n - 1) * d * 4))
        logits = layers.named(self._product("decoder.token_embedding.weight", self._layer_norm(last, "decoder.ln")),
                              "decoder.logits")
        return _DecoderGraph(mb.Graph(logits), tokens, positions, rows, mask, logits)

    def _build_reorder(self, count: int) -> _ReorderGraph:
        """The graph copying count cache rows (of every layer's keys and values) from the source
        rows to the target rows, through a scratch tensor so no row is overwritten before it is read."""
        source = ops.view(self.source_rows_in, (count,))
        target = ops.view(self.target_rows_in, (count,))
        outputs = [ops.set_rows(cache, ops.get_rows(cache, source), target) for cache in self.k_cache + self.v_cache]
        return _ReorderGraph(mb.Graph(*outputs), source, target)

    # ---------------------------------------------------------------- WhisperCompute

    def encode(self, mel: np.ndarray) -> BackendAudioFeatures:
        """Runs the encoder on one (n_mels, 3000) window; keeps its cross-attention keys and values."""
        hp = self.hp
        mel = np.asarray(mel, dtype=np.float32)
        expected = (hp.n_mels, 2 * hp.n_audio_ctx)
        if mel.shape != expected:
            raise WhisperError(f"mel has shape {mel.shape}, expected {expected}")
        self.mel.set(mel[None])
        self.runner.compute(self.encoder_graph, "BackendWhisper encoder", self.encoder_scheduler)
        self._window += 1
        self._n_past = -1
        return BackendAudioFeatures(self._window)

    def encode_batch(self, mels: np.ndarray) -> BackendBatchFeatures:
        """Runs the encoder on w windows at once (mels (w, n_mels, 3000)) as one graph; keeps the
        cross-attention keys and values of all of them for decode_batch (WhisperCompute)."""
        hp = self.hp
        mels = np.asarray(mels, dtype=np.float32)
        expected = (hp.n_mels, 2 * hp.n_audio_ctx)
        if mels.ndim != 3 or mels.shape[1:] != expected or mels.shape[0] == 0:
            raise WhisperError(f"mels has shape {mels.shape}, expected (windows >= 1, {expected[0]}, {expected[1]})")
        count = mels.shape[0]
        if self._windows is None or self._windows.capacity < count:
            self._allocate_windows(count)
        batch = self._windows
        graph = batch.graphs.get(count)
        if graph is None:
            mel = _prefix(batch.mel, (count, hp.n_mels, 2 * hp.n_audio_ctx))
            cross_k = [_prefix(t, (count, *t.shape[1:])) for t in batch.cross_keys]
            cross_v_t = [_prefix(t, (count, *t.shape[1:])) for t in batch.cross_values]
            kv = [_prefix(t, (count * hp.n_audio_ctx, t.shape[1])) for t in batch.encoder_kv]
            graph = batch.graphs[count] = self._encoder_graph(mel, count, cross_k, cross_v_t, kv)[0]
        full = np.zeros((batch.capacity, *expected), np.float32)
        full[:count] = mels
        batch.mel.set(full)
        self.runner.compute(graph, "BackendWhisper batched encoder", self.encoder_scheduler)
        self._window += 1
        self._n_past = -1
        batch.window = self._window
        batch.order = list(range(count))
        return BackendBatchFeatures(self._window, count)

    def keep_windows(self, features: BackendBatchFeatures, keep: Sequence[int],
                     sequences: Sequence[int]) -> BackendBatchFeatures:
        """Drops windows whose decoding has finished from the latest encode_batch()'s batch: the
        windows keep (ascending indices into features) move to the front, the others behind them
        (their cross-attention keys and values are swapped on the device, never lost, so
        select_window still finds every window), and the cached sequences become
        [old[s] for s in sequences] (reorder: the kept windows' rows, window by window). Returns
        the features of the len(keep) windows, to decode on from the same offset."""
        batch = self._windows
        if not isinstance(features, BackendBatchFeatures) or batch is None or features.window != self._window:
            raise WhisperError("keep_windows got features that are not from the latest encode_batch()")
        order = [int(w) for w in keep]
        if not order or order != sorted(set(order)) or order[0] < 0 or order[-1] >= features.count:
            raise WhisperError(f"keep_windows needs ascending distinct window indices below {features.count} "
                               f"(got {list(keep)!r})")
        if len(sequences) % len(order):
            raise WhisperError(f"keep_windows: {len(sequences)} sequences do not split over {len(order)} windows")
        wanted = [batch.order[k] for k in order] + [w for k, w in enumerate(batch.order) if k not in order]
        for slot, window in enumerate(wanted):
            where = batch.order.index(window)
            if where != slot:
                for src, dst in ((slot, batch.capacity), (where, slot), (batch.capacity, where)):
                    self._move_window(batch, src, dst)
                batch.order[slot], batch.order[where] = window, batch.order[slot]
        self.reorder(sequences)
        return BackendBatchFeatures(self._window, len(order))

    def _move_window(self, batch: _WindowBatch, src: int, dst: int) -> None:
        """Copies window slot src's cross-attention keys and values over slot dst, on the device."""
        graph = batch.moves.get((src, dst))
        if graph is None:
            copies = []
            for whole in batch.cross_keys + batch.cross_values:
                size = whole.nelements // (batch.capacity + 1)
                view = ops.view(whole, (size,), offset=src * size * 2)
                copies.append(ops.cpy(view, ops.view(whole, (size,), offset=dst * size * 2)))
            graph = batch.moves[(src, dst)] = mb.Graph(*copies)
        self.runner.compute(graph, "BackendWhisper window move", self.decoder_scheduler)

    def select_window(self, features: BackendBatchFeatures, index: int) -> BackendAudioFeatures:
        """Window `index` (its place in the encode_batch() call, wherever keep_windows moved it)
        of the latest encode_batch() as if encode() had produced it: its
        cross-attention keys and values are copied on the device into the single window's tensors
        (for align(), so word timestamps need no second encoder run). The batch stays selectable
        until the next encode_batch(); decode_batch over it is not, after this."""
        batch = self._windows
        if not isinstance(features, BackendBatchFeatures) or batch is None or features.window != batch.window:
            raise WhisperError("select_window got features that are not from the latest encode_batch()")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(batch.order):
            raise WhisperError(f"select_window index {index!r} is outside the batch of {len(batch.order)} windows")
        slot = batch.order.index(index)  # keep_windows may have moved it
        graph = batch.selects.get(slot)
        if graph is None:
            copies = []
            for whole, one in zip(batch.cross_keys + batch.cross_values, self.cross_keys + self.cross_values):
                size = one.nelements
                flat = ops.view(whole, (size,), offset=slot * one.nbytes)
                copies.append(ops.cpy(flat, ops.view(one, (size,))))
            graph = batch.selects[slot] = mb.Graph(*copies)
        self.runner.compute(graph, "BackendWhisper window select", self.decoder_scheduler)
        self._window += 1
        self._n_past = -1
        return BackendAudioFeatures(self._window)

    def _new_buffer(self) -> mb.Buffer:
        """A zeroed buffer holding the tensors made since the last one."""
        buffer = mb.alloc_ctx_tensors(self.ctx, self.device.buffer_type)
        buffer.clear(0)
        return buffer

    def _allocate_windows(self, capacity: int) -> None:
        """Tensors for batches of up to capacity windows (replacing smaller ones, whose decoder
        graphs are dropped)."""
        hp = self.hp
        n = hp.n_audio_ctx
        tag = self._cache_generation
        self._cache_generation += 1
        mel = self.ctx.tensor(mb.f32, (capacity, hp.n_mels, 2 * n), name=f"batch.mel.{tag}")
        mel.is_input = True
        # One window more than the capacity: the spare slot through which keep_windows swaps two.
        keys, values = self._cross_shapes()
        cross_k = [self.ctx.tensor(mb.f16, (capacity + 1, *keys), name=f"batch.cross_keys.{i}.{tag}")
                   for i in range(hp.n_text_layer)]
        cross_v_t = [self.ctx.tensor(mb.f16, (capacity + 1, *values), name=f"batch.cross_values.{i}.{tag}")
                     for i in range(hp.n_text_layer)]
        kv = []
        if self._encoder_kv_type is not None:
            kv = [self.ctx.tensor(self._encoder_kv_type, (capacity * n, 2 * hp.n_audio_state),
                                  name=f"batch.encoder_kv.{i}.{tag}") for i in range(hp.n_audio_layer)]
        buffer = self._new_buffer()
        for key in [k for k in self.decoder_graphs if k[0] > 0]:
            del self.decoder_graphs[key]
        previous, self._windows = self._windows, _WindowBatch(capacity, buffer, mel, cross_k, cross_v_t, kv, {})
        if previous is not None:
            previous.buffer.free()

    def encoder_output(self) -> np.ndarray:
        """The last encode()'s final encoder states (n_audio_ctx, d), float32."""
        return self.encoder_out.get()

    def decode(self, features: BackendAudioFeatures, tokens: Sequence[int], offset: int) -> np.ndarray:
        """Feeds tokens at positions offset.. of one sequence and returns the logits of the last one
        (WhisperCompute)."""
        return self.decode_batch(features, [tokens], offset)[0]

    def decode_batch(self, features: BackendAudioFeatures, tokens: Sequence[Sequence[int]],
                     offset: int, skip: Sequence[int] | None = None) -> np.ndarray:
        """Feeds tokens[s] to sequence s at positions offset.. (every row the same length) and returns
        the logits of each sequence's last token, (len(tokens), n_vocab) float32 (WhisperCompute).
        offset 0 starts len(tokens) new sequences; otherwise the batch continues the cached ones.

        skip (offset 0 only): for each new sequence, how many of its first tokens are padding: a
        sequence with skip k holds its real tokens from slot k on, at positions 0, 1, .. and no
        token attends to its padding (a padded slot sees only itself), so prompts of different
        lengths, left-padded to one length, decode as each would alone. reorder and keep_windows
        carry every sequence's skip along."""
        hp = self.hp
        batch = len(tokens)
        if batch == 0:
            raise WhisperError("decode needs at least one sequence")
        n = len(tokens[0])
        if n == 0:
            raise WhisperError("decode needs at least one token")
        if any(len(row) != n for row in tokens):
            raise WhisperError(f"every sequence of a batch must feed the same number of tokens "
                               f"(got {sorted({len(row) for row in tokens})})")
        windows = 0
        if isinstance(features, BackendBatchFeatures):
            windows = features.count
            if batch % windows:
                raise WhisperError(f"decode of {batch} sequences over {windows} windows: every window needs "
                                   f"the same number of sequences")
        elif not isinstance(features, BackendAudioFeatures):
            raise WhisperError(f"decode got {type(features).__name__}, not features of encode() or encode_batch()")
        if features.window != self._window:
            raise WhisperError("decode got features that are not from the latest encode() or encode_batch()")
        if offset != 0 and offset != self._n_past:
            raise WhisperError(f"decode at offset {offset} does not continue the cached sequence "
                               f"({max(self._n_past, 0)} tokens)")
        if offset != 0 and batch != self._n_active:
            raise WhisperError(f"decode of {batch} sequences does not continue the {self._n_active} cached ones")
        end = offset + n
        if end > hp.n_text_ctx:
            raise WhisperError(f"text context of {hp.n_text_ctx} exceeded ({offset} + {n})")
        try:
            ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError, OverflowError):
            raise WhisperError("token ids must be integers") from None
        if ids.min() < 0 or ids.max() >= hp.n_vocab:
            raise WhisperError(f"token ids must be in 0..{hp.n_vocab - 1} (got {ids.min()}..{ids.max()})")
        if skip is not None:
            if offset != 0:
                raise WhisperError(f"decode skip is for new sequences (offset 0), got offset {offset}")
            try:
                skips = np.asarray([int(k) for k in skip], dtype=np.int64)
            except (TypeError, ValueError):
                raise WhisperError(f"decode skip must be integers (got {skip!r})") from None
            if skips.size != batch or skips.min() < 0 or skips.max() >= n:
                raise WhisperError(f"decode skip needs one count in 0..{n - 1} per sequence for {batch} sequences "
                                   f"of {n} tokens (got {skips.tolist()})")
        elif offset == 0:
            skips = np.zeros(batch, np.int64)
        else:
            skips = self._skips
        if batch > self.n_sequences:
            self._n_active = 0
            self._allocate_cache(batch)

        padded = bool(skips.any())
        g = self.decoder_graph(batch, n, offset, windows, padded)
        g.tokens.set(ids.astype(np.int32))
        slots = np.arange(offset, end, dtype=np.int32)
        g.positions.set(np.maximum(slots[None, :] - skips[:, None], 0).astype(np.int32).reshape(-1))
        g.rows.set((np.arange(batch, dtype=np.int32)[:, None] * hp.n_text_ctx + slots[None, :]).reshape(-1))
        # Token i sits in slot offset + i and sees slots 0 .. offset + i (from its sequence's skip
        # on; a padding slot sees itself, so every row of the attention has a key).
        columns = np.arange(g.mask.shape[-1])[None, None, :]
        rows = (offset + np.arange(n))[None, :, None]
        visible = columns <= rows
        if padded:
            first = skips[:, None, None]
            visible = (visible & (columns >= first)) | ((rows < first) & (columns == rows))
        g.mask.set(np.where(visible, 0.0, -np.inf).astype(np.float16).reshape(g.mask.shape))
        self.runner.compute(g.graph, "BackendWhisper decoder", self.decoder_scheduler)
        self._n_past = end
        self._n_active = batch
        self._skips = skips
        if offset == 0:
            self._origins = np.arange(batch, dtype=np.int64)
            self._shared = {}
        return _read_logits(g.logits)

    def reorder(self, sequences: Sequence[int]) -> None:
        """Makes the cached sequences [old[s] for s in sequences] (WhisperCompute): beam search keeps
        the beams it continues, a batch grows from one prompt (reorder([0] * beams)) or drops
        finished sequences. The rows are copied on the device."""
        if self._n_past <= 0:
            raise WhisperError("reorder needs cached sequences (decode first)")
        try:
            order = [int(s) for s in sequences]
        except (TypeError, ValueError):
            raise WhisperError(f"reorder needs sequence indices (got {sequences!r})") from None
        if not order:
            raise WhisperError("reorder needs at least one sequence")
        bad = [s for s in order if not 0 <= s < self._n_active]
        if bad:
            raise WhisperError(f"reorder index {bad[0]} is outside the {self._n_active} cached sequences")
        if len(order) > self.n_sequences:
            self._allocate_cache(len(order))
        self._skips = self._skips[order]
        held, origins = self._origins, self._origins[order]
        for origin in set(origins[np.bincount(origins)[origins] > 1].tolist()) - set(self._shared):
            self._shared[origin] = self._n_past  # its first second row: every slot filled so far alike
        self._origins = origins
        n_ctx = self.hp.n_text_ctx
        length = min(-(-self._n_past // _KV_BLOCK) * _KV_BLOCK, n_ctx)
        # A row copied over one of its own origin skips the slots they share.
        moved = [(dst, src, self._shared.get(int(origins[dst]), 0) if dst < held.size and held[dst] == origins[dst]
                  else 0) for dst, src in enumerate(order) if dst != src]
        moved = [(dst, src, first) for dst, src, first in moved if first < length]
        if moved:
            # Graphs are keyed by the padded row count; padding entries copy row 0 of a moved
            # sequence onto itself.
            total = sum(length - first for _, _, first in moved)
            count = -(-total // (_KV_BLOCK * 4)) * _KV_BLOCK * 4
            targets = np.concatenate([dst * n_ctx + np.arange(first, length, dtype=np.int32)
                                      for dst, _, first in moved])
            sources = np.concatenate([src * n_ctx + np.arange(first, length, dtype=np.int32)
                                      for _, src, first in moved])
            pad = count - targets.size
            g = self.reorder_graphs.get(count)
            if g is None:
                g = self.reorder_graphs[count] = self._build_reorder(count)
            g.source.set(np.concatenate([sources, np.full(pad, sources[0], np.int32)]))
            g.target.set(np.concatenate([targets, np.full(pad, targets[0], np.int32)]))
            self.runner.compute(g.graph, "BackendWhisper reorder", self.decoder_scheduler)
        self._n_active = len(order)

    def decoder_graph(self, batch: int, n: int, offset: int, windows: int = 0, padded: bool = False) -> _DecoderGraph:
        """The graph that feeds n tokens to each of batch sequences at positions offset.. (built on
        first use, then reused); windows and padded as in _build_decoder."""
        n_kv = min(-(-(offset + n) // _KV_BLOCK) * _KV_BLOCK, self.hp.n_text_ctx)
        key = (windows, batch, n, n_kv, padded)
        graph = self.decoder_graphs.get(key)
        if graph is None:
            graph = self.decoder_graphs[key] = self._build_decoder(batch, n, n_kv, windows, padded)
        return graph

    def placements(self) -> dict[str, dict[str, int]]:
        """Nodes per backend name of the encoder graph and of every decoder graph built so far."""
        graphs = {"encoder": (self.encoder_scheduler, self.encoder_graph)}
        graphs.update({f"decoder[{b},{n},{n_kv}]" + (f"[{w} windows]" if w else "") + (" padded" if padded else ""):
                       (self.decoder_scheduler, g.graph)
                       for (w, b, n, n_kv, padded), g in self.decoder_graphs.items()})
        if self._windows is not None:
            graphs.update({f"encoder[{w} windows]": (self.encoder_scheduler, g)
                           for w, g in self._windows.graphs.items()})
        graphs.update({f"reorder[{count}]": (self.decoder_scheduler, g.graph)
                       for count, g in self.reorder_graphs.items()})
        return {name: Runner.placements(scheduler, graph) for name, (scheduler, graph) in graphs.items()}

    def align(self, features: BackendAudioFeatures, tokens: Sequence[int], heads: Sequence[tuple[int, int]],
              n_audio: int) -> AlignmentOutput:
        """The alignment pass of word timestamps (WhisperCompute): one decoder run over tokens (a
        whole sequence from <|startoftranscript|>) of the latest encoded window, giving the
        cross-attention probabilities of the (layer, head) pairs in heads, each a softmax over the
        first n_audio encoder positions, and the logits at every position (backend_alignment.py).
        It leaves the decoder's cached sequences as they were."""
        if not isinstance(features, BackendAudioFeatures) or features.window != self._window:
            raise WhisperError("align got features that are not from the latest encode()")
        if self._alignment is None:
            hp = self.hp
            self._alignment = AlignmentGraphs(AlignmentModel(
                hp=hp, runner=self.runner, weights=self.weights, cross_keys=self.cross_keys,
                cross_values=self.cross_values, values_as_rows=self.values_as_rows,
                n_head=hp.n_text_head, head_dim=hp.n_text_state // hp.n_text_head))
        return self._alignment.run(tokens, heads, n_audio)


def _read_logits(logits: mb.Tensor) -> np.ndarray:
    """A copy of the logits, made in one pass from a host-visible buffer (Tensor.get fills a
    zeroed staging copy first: three passes, 1.7 ms against 0.7 ms for 40 rows of 51,864 on the
    CPU device); Tensor.get where the buffer is not host-visible."""
    try:
        return np.array(logits.numpy())
    except mb.InvalidArgumentError:
        return logits.get()


def _prefix(t: mb.Tensor, shape: tuple[int, ...]) -> mb.Tensor:
    """A contiguous view of shape over the first elements of the contiguous tensor t."""
    strides = [t.nb[0]]
    for size in reversed(shape[1:]):
        strides.append(strides[-1] * size)
    return ops.view(t, shape, strides=tuple(reversed(strides)))


def _dense(tensor: Tensor) -> np.ndarray:
    """A float array of a stored tensor (quantized ones dequantized to f32)."""
    if isinstance(tensor, QuantizedTensor):
        qtype = _TYPES_BY_ID[int(tensor.ggml_type)]
        return mb.dequantize(tensor.data.reshape(-1), qtype, tensor.shape)
    return np.asarray(tensor)


def _f32(tensor: Tensor) -> np.ndarray:
    return np.asarray(_dense(tensor), dtype=np.float32)
