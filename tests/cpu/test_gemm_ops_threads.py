"""The CPU's GEMM-based ops other than mul_mat (OUT_PROD, CONV_2D, CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D),
and CONV_2D_DW (rows split among threads, each row in SIMD vectors that overlap at its end), at thread
counts the conformance suite does not use: their threads pack shared operands between
barriers (out_prod per k block into two alternating buffers, conv_2d the kernel once, its implicit
GEMM also each image's padded copy) or split the
output channels, so an uneven split (3, 7 threads; more threads than work) must give the same bits
as one thread, and match the float64 reference. The shapes cross the GEMM's block edges (k blocks,
tiles, pixel blocks, column blocks)."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import metal_backend as mb
from op_cases import conv_2d_dw_ref, conv_2d_ref, conv_transpose_1d_ref, conv_transpose_2d_ref, out_prod_ref

CPU = mb.device("CPU")


def _out_prod(ctx, rng):
    a = rng.standard_normal((1, 2, 530, 37)).astype(np.float32)
    b = rng.standard_normal((2, 2, 530, 101)).astype(np.float32)
    ta, tb = ctx.tensor(mb.f32, a.shape), ctx.tensor(mb.f32, b.shape)
    return [ta, tb], [a, b], mb.ops.out_prod(ta, tb), out_prod_ref(a.astype(np.float64), b.astype(np.float64))


def _conv_2d(ctx, rng, s1=1):
    # s1 = 1: the implicit GEMM on AVX2 / AVX-512 (the packed-panel GEMM elsewhere); s1 = 2: the
    # packed-panel GEMM everywhere
    geo = (1, s1, 1, 1, 1, 1)
    k = (rng.standard_normal((7, 30, 3, 3)) * 0.2).astype(np.float32)
    x = rng.standard_normal((2, 30, 9, 40)).astype(np.float32)
    tk, tx = ctx.tensor(mb.f32, k.shape), ctx.tensor(mb.f32, x.shape)
    ref = conv_2d_ref(k.astype(np.float64), x.astype(np.float64), *geo)
    return [tk, tx], [k, x], mb.ops.conv_2d_direct(tk, tx, *geo), ref


def _conv_2d_dw(ctx, rng):
    # 70-wide rows: edge vectors at both ends (padding 3, dilation 2 over a 5-wide filter), a last
    # vector overlapping the one before; 2 x 8 x 20 rows of 15 taps give the op several threads
    k = (rng.standard_normal((8, 1, 3, 5)) * 0.2).astype(np.float32)
    x = rng.standard_normal((2, 8, 20, 70)).astype(np.float32)
    tk, tx = ctx.tensor(mb.f32, k.shape), ctx.tensor(mb.f32, x.shape)
    ref = conv_2d_dw_ref(k.astype(np.float64), x.astype(np.float64), 1, 1, 3, 1, 2, 1)
    return [tk, tx], [k, x], mb.ops.conv_2d_dw_direct(tk, tx, 1, 1, 3, 1, 2, 1), ref


def _conv_t_1d(ctx, rng):
    k = (rng.standard_normal((20, 7, 5)) * 0.2).astype(np.float32)
    x = rng.standard_normal((2, 20, 130)).astype(np.float32)
    tk, tx = ctx.tensor(mb.f32, k.shape), ctx.tensor(mb.f32, x.shape)
    ref = conv_transpose_1d_ref(k.astype(np.float64), x.astype(np.float64), 2, 1, 1)
    return [tk, tx], [k, x], mb.ops.conv_transpose_1d(tk, tx, 2, 1, 1), ref


def _conv_t_2d(ctx, rng):
    k = (rng.standard_normal((12, 19, 3, 5)) * 0.2).astype(np.float32)
    x = rng.standard_normal((2, 12, 11, 10)).astype(np.float32)
    tk, tx = ctx.tensor(mb.f32, k.shape), ctx.tensor(mb.f32, x.shape)
    ref = conv_transpose_2d_ref(k.astype(np.float64), x.astype(np.float64), 2)
    return [tk, tx], [k, x], mb.ops.conv_transpose_2d_p0(tk, tx, 2), ref


@pytest.mark.parametrize("build", [_out_prod, _conv_2d, functools.partial(_conv_2d, s1=2), _conv_2d_dw, _conv_t_1d,
                                   _conv_t_2d],
                         ids=["out_prod", "conv_2d", "conv_2d_s1_2", "conv_2d_dw", "conv_transpose_1d",
                              "conv_transpose_2d"])
def test_same_bits_at_every_thread_count_and_close_to_float64(build):
    rng = np.random.default_rng(7)
    ctx = mb.Context()
    inputs, values, out, ref = build(ctx, rng)
    buf = mb.alloc_ctx_tensors(ctx, CPU)
    for t, v in zip(inputs, values):
        t.set(v)
    graph = mb.Graph(out)
    first = None
    for n_threads in (1, 2, 3, 7, 33):
        backend = CPU.init_backend(f"n_threads={n_threads}")
        backend.graph_compute(graph)
        got = out.get()
        if first is None:
            first = got
            err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
            assert got.shape == ref.shape
            assert err < 1e-5, f"relative error {err:.2e} against float64"
        else:
            np.testing.assert_array_equal(got, first, err_msg=f"{n_threads} threads differ from 1")
    del buf
