"""Models on the backend: where graphs run, how weights get there, and the layers networks use.

- Runner: a device, its backends (the CPU as fallback for ops the device lacks), schedulers, and
  compute() that raises ComputeError when a graph does not complete; threads and spin options.
- Weights: a model's named tensors in one Context, uploaded to the device at once (optionally
  quantized).
- layers: linear, layer_norm, conv1d (stride, padding, dilation), attention_flash /
  attention_matmul, head_view / merge_heads, mlp, lstm_cell / lstm_input_gates.

Whisper (metal_backend.whisper) and Silero VAD (metal_backend.vad) are built on these.
"""

from . import layers
from .runner import ComputeError, Runner, resolve_device
from .weights import Weights

__all__ = ["ComputeError", "Runner", "Weights", "layers", "resolve_device"]
