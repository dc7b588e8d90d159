"""Layer functions: the pieces networks are built of, as metal_backend graph ops.

Every function takes and returns mb.Tensors of one Context (numpy-order shapes) and adds nodes to
the graph being built; nothing is computed until a graph runs. `name`, where given, names the
result (profiles and graph dumps show it).
"""

from __future__ import annotations

from typing import Callable, Optional

import metal_backend as mb
from metal_backend import ops


def named(t: mb.Tensor, name: Optional[str]) -> mb.Tensor:
    """t, named `name` when one is given."""
    if name:
        t.name = name
    return t


def linear(x: mb.Tensor, weight: mb.Tensor, bias: Optional[mb.Tensor] = None,
           name: Optional[str] = None, compute_type: str = "float32") -> mb.Tensor:
    """x @ weight.T + bias: x (..., in), weight (out, in) in any stored type, bias (out,) -> (..., out).
    compute_type: mb.ops.mul_mat's ("int8" for quantized weights: 8-bit activations at any token count)."""
    y = named(ops.mul_mat(weight, x, compute_type=compute_type), name)
    if bias is None:
        return y
    return named(ops.add(y, bias), f"{name}.bias" if name else None)


def layer_norm(x: mb.Tensor, weight: Optional[mb.Tensor], bias: Optional[mb.Tensor], eps: float = 1e-5,
               name: Optional[str] = None) -> mb.Tensor:
    """Normalises each row of x (the last axis) to zero mean and unit variance, then * weight + bias."""
    y = named(ops.norm(x, eps), f"{name}.norm" if name else None)
    if weight is not None:
        y = ops.mul(y, weight)
    if bias is not None:
        y = ops.add(y, bias)
    return named(y, name)


def conv1d(x: mb.Tensor, weight: mb.Tensor, bias: Optional[mb.Tensor] = None, stride: int = 1,
           padding: int = 0, dilation: int = 1, name: Optional[str] = None, matrix: Optional[mb.Tensor] = None,
           compute_type: str = "float32") -> mb.Tensor:
    """1-D convolution (cross-correlation, as PyTorch's Conv1d) of x (N, C, L) with weight (OC, C, K)
    and bias (OC,), zero padding on both sides -> time-major (N, OL, OC), OL = (L + 2 padding -
    dilation (K - 1) - 1) // stride + 1.

    The result is time-major (channels innermost) because that is what the product gives without a
    copy; ops.permute(y, [0, 2, 1]) is the (N, OC, OL) view, which the next conv1d can take as is.
    x may be a permuted view. Built as im2col (N, OL, C K) and one matrix product.

    matrix, when given, is the product's weight instead of weight reshaped: (OC, C K) in im2col's
    column order (channel-major, kernel tap fastest: weight[oc].reshape(-1)), in any stored type, e.g.
    q8_0 with compute_type "int8" (mb.ops.mul_mat's); weight then only gives the kernel's shape.
    """
    if len(x.shape) != 3 or len(weight.shape) != 3:
        raise mb.InvalidArgumentError(f"[conv1d] x must be (N, C, L) and weight (OC, C, K) "
                                      f"(got {tuple(x.shape)} and {tuple(weight.shape)})")
    c_out, c_in, width = weight.shape
    if x.shape[1] != c_in:
        raise mb.InvalidArgumentError(f"[conv1d] x has {x.shape[1]} channels, weight expects {c_in}")
    if stride < 1 or padding < 0 or dilation < 1:
        raise mb.InvalidArgumentError(f"[conv1d] stride {stride} and dilation {dilation} must be >= 1, "
                                      f"padding {padding} >= 0")
    if x.shape[2] + 2 * padding < dilation * (width - 1) + 1:
        raise mb.InvalidArgumentError(f"[conv1d] input of length {x.shape[2]} (padding {padding}) is shorter "
                                      f"than the kernel ({width}, dilation {dilation})")
    cols = named(ops.im2col(weight, x, stride, 0, padding, 0, dilation, 0, False, mb.f32),
                 f"{name}.im2col" if name else None)
    if matrix is None:
        matrix = ops.reshape(weight, (c_out, c_in * width))
    elif tuple(matrix.shape) != (c_out, c_in * width):
        raise mb.InvalidArgumentError(f"[conv1d] matrix must be ({c_out}, {c_in * width}) for weight "
                                      f"{tuple(weight.shape)} (got {tuple(matrix.shape)})")
    y = named(ops.mul_mat(matrix, cols, compute_type=compute_type), name)
    if bias is None:
        return y
    return named(ops.add(y, bias), f"{name}.bias" if name else None)


def head_view(x: mb.Tensor, n_head: int, head_dim: int, rows: int, row_elems: int, offset_elems: int = 0,
              batch: int = 1, sequence_rows: Optional[int] = None) -> mb.Tensor:
    """The (batch, n_head, rows, head_dim) view of the head_dim n_head columns starting at column
    offset_elems of the rows of x (rows of row_elems elements), where sequence b's rows start at
    row b * sequence_rows (default rows). No copy."""
    if x.type not in (mb.f32, mb.f16, mb.bf16):
        raise mb.InvalidArgumentError(f"[head_view] x must be f32, f16 or bf16 (got {x.type.name})")
    if offset_elems + n_head * head_dim > row_elems:
        raise mb.InvalidArgumentError(f"[head_view] columns {offset_elems}..{offset_elems + n_head * head_dim} "
                                      f"do not fit rows of {row_elems}")
    es = 4 if x.type == mb.f32 else 2
    if sequence_rows is None:
        sequence_rows = rows
    return ops.view(x, (batch, n_head, rows, head_dim),
                    strides=(sequence_rows * row_elems * es, head_dim * es, row_elems * es, es),
                    offset=offset_elems * es)


def merge_heads(out: mb.Tensor) -> mb.Tensor:
    """(B, H, n, hd) -> (B n, H hd): heads side by side again, as rows."""
    b, h, n, hd = out.shape
    return ops.reshape(ops.cont(ops.permute(out, [0, 2, 1, 3])), (b * n, h * hd))


def attention_flash(q: mb.Tensor, k: mb.Tensor, v: mb.Tensor, mask: Optional[mb.Tensor], scale: float,
                    name: Optional[str] = None) -> mb.Tensor:
    """softmax(q k^T scale + mask) v with flash_attn_ext: q (B, H, n, hd), k and v (B, H_kv, m, hd)
    (f16 k/v stream fastest), mask (n, m) f16 or None -> (B n, H hd)."""
    out = named(ops.flash_attn_ext(q, k, v, mask, scale), f"{name}.flash" if name else None)  # (B, n, H, hd)
    b, h, n, hd = q.shape
    return ops.reshape(out, (b * n, h * hd))


def attention_matmul(q: mb.Tensor, k: mb.Tensor, v_t: mb.Tensor, mask: Optional[mb.Tensor], scale: float,
                     name: Optional[str] = None) -> mb.Tensor:
    """softmax(q k^T scale + mask) v with two matrix products: q (B, H, n, hd), k (B, H, m, hd),
    values transposed v_t (B, H, hd, m), mask (n, m) or None -> (B n, H hd). No f16 rounding of
    the scores; for long f32 sequences on the CPU it is the faster of the two."""
    scores = named(ops.mul_mat(k, q), f"{name}.kq" if name else None)  # (B, H, n, m)
    probs = named(ops.soft_max_ext(scores, mask, scale, 0.0), f"{name}.softmax" if name else None)
    out = named(ops.mul_mat(v_t, probs), f"{name}.kqv" if name else None)  # (B, H, n, hd)
    return merge_heads(out)


def mlp(x: mb.Tensor, w1: mb.Tensor, b1: Optional[mb.Tensor], w2: mb.Tensor, b2: Optional[mb.Tensor],
        activation: Callable[[mb.Tensor], mb.Tensor] = ops.gelu_erf, name: Optional[str] = None,
        act_name: str = "act") -> mb.Tensor:
    """linear(activation(linear(x, w1, b1)), w2, b2); the parts are named name.0, name.<act_name>
    and name.2."""
    h = linear(x, w1, b1, f"{name}.0" if name else None)
    h = named(activation(h), f"{name}.{act_name}" if name else None)
    return linear(h, w2, b2, f"{name}.2" if name else None)


def lstm_cell(gates_x: mb.Tensor, h: mb.Tensor, c: mb.Tensor, weight_hh: mb.Tensor,
              name: Optional[str] = None) -> tuple[mb.Tensor, mb.Tensor]:
    """One step of an LSTM cell (PyTorch's LSTMCell, gates in the order i, f, g, o).

    gates_x (1, 4 H) is the input's share of the gates, x @ weight_ih.T + bias_ih + bias_hh (for a
    sequence, one product over every step: lstm_input_gates); h and c (1, H) the state; weight_hh
    (4 H, H). Returns (h', c'):
        gates = gates_x + h @ weight_hh.T;  i, f, o = sigmoid(gates parts);  g = tanh(gates part)
        c' = f * c + i * g;  h' = o * tanh(c')
    """
    hidden = h.shape[-1]
    if tuple(weight_hh.shape) != (4 * hidden, hidden) or gates_x.shape[-1] != 4 * hidden:
        raise mb.InvalidArgumentError(f"[lstm_cell] weight_hh {tuple(weight_hh.shape)} and gates_x "
                                      f"{tuple(gates_x.shape)} do not fit a hidden size of {hidden}")
    gates = named(ops.add(gates_x, ops.mul_mat(weight_hh, h)), f"{name}.gates" if name else None)
    # One sigmoid over all four parts (the g part's is unused): fewer nodes than three small ones.
    s = ops.sigmoid(gates)
    es = 4

    def part(t: mb.Tensor, k: int) -> mb.Tensor:
        return ops.view(t, (1, hidden), offset=k * hidden * es)

    g = ops.tanh(part(gates, 2))
    c_new = named(ops.add(ops.mul(part(s, 1), c), ops.mul(part(s, 0), g)), f"{name}.c" if name else None)
    h_new = named(ops.mul(part(s, 3), ops.tanh(c_new)), f"{name}.h" if name else None)
    return h_new, c_new


def lstm_input_gates(x: mb.Tensor, weight_ih: mb.Tensor, bias: Optional[mb.Tensor],
                     name: Optional[str] = None) -> mb.Tensor:
    """The input's share of an LSTM's gates for every step at once: x (T, in) @ weight_ih.T + bias
    (bias = bias_ih + bias_hh, (4 H,)) -> (T, 4 H)."""
    return linear(x, weight_ih, bias, name)
