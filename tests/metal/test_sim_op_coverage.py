"""MetalSim runs every conformance case itself, but for the refusals listed here with their reasons.

test_conformance lets a device refuse a case (the refusal must then hold at compute time), so a Metal
kernel that is missing, or narrower than the CPU's, passes there unnoticed. Here every node of every
case must be supported by MetalSim, which compiles the same .metal sources Apple's Metal does, so the
ops ggml-metal handles (issue 21's list below) are on all three devices and each has conformance cases.
A case refused on purpose is named in REFUSED with the reason; one named there that MetalSim now runs
fails too, so the list stays exact.
"""
from __future__ import annotations

import pytest

import metal_backend as mb
from op_cases import CASES

SIM = [d for d in mb.devices() if d.name == "MetalSim"]
pytestmark = pytest.mark.skipif(not SIM, reason="MetalSim not built")

VIEW_OPS = {"NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"}

# The ops ggml-metal 0.5.1 (the seed's backend) handles that metal_backend lacked when issue 21 was
# filed, and ggml's unary and GLU members.
ISSUE_21_OPS = [
    "ACC", "ADD_ID", "ARANGE", "ARGSORT", "CONV_TRANSPOSE_1D", "REGLU", "GEGLU", "SWIGLU", "GEGLU_ERF",
    "GEGLU_QUICK", "SWIGLU_OAI", "GROUP_NORM", "L2_NORM", "LEAKY_RELU", "MUL_MAT_ID", "PAD_REFLECT_1D",
    "POOL_2D", "RWKV_WKV6", "RWKV_WKV7", "SSM_CONV", "SSM_SCAN", "TIMESTEP_EMBEDDING", "UPSCALE",
    # ggml's enum ggml_unary_op, every member
    "ABS", "SGN", "NEG", "STEP", "TANH", "ELU", "RELU", "SIGMOID", "GELU", "GELU_QUICK", "SILU", "HARDSWISH",
    "HARDSIGMOID", "EXP", "EXPM1", "SOFTPLUS", "GELU_ERF", "XIELU", "FLOOR", "CEIL", "ROUND", "TRUNC",
]


_QUANT_TARGETS = "f32 to a k-quant, iq4_nl, iq4_xs or mxfp4: quantizing on the GPU is not offered (nor by ggml-metal)"
REFUSED = {
    "argsort/f32/long_asc": "rows over 1024 values: the bitonic sort is one threadgroup per row (as ggml-metal 0.5.1)",
    "argsort/f32/long_desc": "rows over 1024 values: the bitonic sort is one threadgroup per row (as ggml-metal 0.5.1)",
    "soft_max/f32/transposed": "the kernel reads packed rows; the Scheduler runs a strided one on the CPU",
    "mul_mat/f32xf32/transposed_b": "the kernels read packed activation rows",
    "flash_attn_ext/bf16/d33_softcap": "head size 33: the Metal kernels take 40, 64, 80, 96, 112, 128, 192, 256 (the "
                                       "CPU's odd-size bf16 pairs are what this case checks)",
    **{f"cpy/f32_{t}/contiguous": _QUANT_TARGETS for t in ("q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl",
                                                          "iq4_xs", "mxfp4")},
}


def test_issue_21_ops_are_rows_with_cases():
    table = {name for name, _, _, _ in mb._core.op_table()}
    with_cases = {c.op for c in CASES}
    assert not [op for op in ISSUE_21_OPS if op not in table], "ops missing from shaders/op_table.h"
    assert not [op for op in ISSUE_21_OPS if op not in with_cases], "ops without conformance cases"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_metalsim_supports_every_node(case):
    ctx = mb.Context()
    tensors = [ctx.tensor(spec.type, spec.shape, name=f"in{i}") for i, spec in enumerate(case.inputs)]
    graph = mb.Graph(case.build(*tensors))
    refused = [n.op for n in graph.nodes if n.op not in VIEW_OPS and not SIM[0].supports_op(n)]
    if case.name in REFUSED:
        assert refused, f"{case.name}: MetalSim now runs it; drop it from REFUSED ({REFUSED[case.name]})"
    else:
        assert not refused, f"{case.name}: MetalSim refuses {refused}"
