"""The mat-vec tiles' two row orders (vec_dot.h: VecTileOrder): the four rows of a tile side by side
(interleaved) or one after the other (rows), chosen once per process by the CPU's vendor or by
MB_VEC_TILE_ORDER. Both must give the same bits: the same multiply-adds per row in the same order.
Each order runs in a child process (the order is read once), over the pairings whose tiles have the
two orders (f32, f16 and bf16 weights against f32 activations; q4_0, q4_1, q5_0, q5_1 and q8_0 weights
against 8-bit activations, under both compute types), token counts that take the one- and two-token
tiles (1, 2, 3) and a wide-tile count (5, whose wide part always reads side by side), lengths with
tails, row counts not a multiple of 4; the results are compared byte for byte and against numpy in
float64.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import metal_backend as mb

CHILD = r"""
import sys
import numpy as np
import metal_backend as mb

cpu = mb.device("CPU")
out = {"order": np.array(cpu.props.extra["vec_tile_order"])}
rng = np.random.default_rng(7)
for wtype in ("f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"):
    quant = wtype.startswith("q")
    for k in ((32, 384, 416, 4128) if quant else (7, 16, 385, 4100)):
        m = 4 * 5 + 3
        w = rng.standard_normal((m, k)).astype(np.float32)
        if wtype == "f16":
            raw = w.astype(np.float16).tobytes()
        elif wtype == "bf16":
            raw = (w.view(np.uint32) >> 16).astype(np.uint16).tobytes()
        elif quant:
            raw = bytes(mb.quantize(w, getattr(mb, wtype)))
        else:
            raw = w.tobytes()
        for n in (1, 2, 3, 5):
            x = rng.standard_normal((n, k)).astype(np.float32)
            for compute_type in (("float32", "int8") if quant else ("float32",)):
                for threads in (1, 2):
                    ctx = mb.Context()
                    tw = ctx.tensor(getattr(mb, wtype), (m, k))
                    tx = ctx.tensor(mb.f32, (n, k))
                    y = mb.ops.mul_mat(tw, tx, compute_type=compute_type)
                    backend = cpu.init_backend(f"n_threads={threads}")
                    buf = mb.alloc_ctx_tensors(ctx, backend)
                    tw.set(raw)
                    tx.set(x)
                    backend.graph_compute(mb.Graph(y))
                    key = f"{wtype}_{k}_{n}_{compute_type}_{threads}"
                    out[key] = y.get().copy()
                    out[key + "_w"] = np.frombuffer(raw, np.uint8)
                    out[key + "_x"] = x
np.savez(sys.argv[1], **out)
"""


def _run(tmp_path, order: str | None) -> dict[str, np.ndarray]:
    path = tmp_path / f"{order}.npz"
    env = dict(os.environ)
    env.pop("MB_VEC_TILE_ORDER", None)
    if order is not None:
        env["MB_VEC_TILE_ORDER"] = order
    subprocess.run([sys.executable, "-c", CHILD, str(path)], env=env, check=True, timeout=600)
    with np.load(path) as z:
        return {key: z[key] for key in z.files}


def _dequantized(wtype: str, raw: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    if wtype == "f32":
        return raw.view(np.float32).reshape(shape).astype(np.float64)
    if wtype == "f16":
        return raw.view(np.float16).reshape(shape).astype(np.float64)
    if wtype == "bf16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape).astype(np.float64)
    return np.asarray(mb.dequantize(raw.tobytes(), getattr(mb, wtype), shape[0] * shape[1]),
                      dtype=np.float64).reshape(shape)


@pytest.fixture(scope="module")
def both_orders(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tile_order")
    return _run(tmp, "interleaved"), _run(tmp, "rows")


def test_the_env_picks_the_order(both_orders):
    interleaved, rows = both_orders
    assert str(interleaved["order"]) == "interleaved"
    assert str(rows["order"]) == "rows"


def test_default_order_follows_the_vendor():
    order = mb.device("CPU").props.extra["vec_tile_order"]
    if os.environ.get("MB_VEC_TILE_ORDER") in ("rows", "interleaved"):
        assert order == os.environ["MB_VEC_TILE_ORDER"]
        return
    amd = False
    if sys.platform.startswith("linux") and os.uname().machine in ("x86_64", "AMD64"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            amd = "AuthenticAMD" in f.read()
    assert order == ("rows" if amd else "interleaved")


def test_an_unknown_order_keeps_the_default(tmp_path):
    want = _run(tmp_path, None)["order"]
    assert str(_run(tmp_path, "diagonal")["order"]) == str(want)


def test_both_orders_give_the_same_bits_and_match_numpy(both_orders):
    interleaved, rows = both_orders
    keys = [key for key in interleaved if key != "order" and not key.endswith(("_w", "_x"))]
    # every pairing, length, token count (and compute type) at 1 and 2 threads
    assert len(keys) == 3 * 4 * 4 * 2 + 5 * 4 * 4 * 2 * 2
    for key in keys:
        a, b = interleaved[key], rows[key]
        assert a.tobytes() == b.tobytes(), f"{key}: the orders differ, max {np.max(np.abs(a - b))}"
        parts = key.split("_")
        wtype = "_".join(parts[:2]) if key.startswith("q") else parts[0]
        x = interleaved[key + "_x"].astype(np.float64)
        n, k = x.shape
        w = _dequantized(wtype, interleaved[key + "_w"], (a.shape[1], k))
        ref = x @ w.T
        tol = 4.0 * k * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(w).T) + 1e-6
        if wtype.startswith("q"):
            # 8-bit activations (the quantized pairings' kernels under both compute types): each
            # element rounded to its 32-block's largest / 127, an error of at most half a step.
            amax = np.repeat(np.abs(x).reshape(n, k // 32, 32).max(axis=2), 32, axis=1)
            tol += 1.01 * (amax / 254.0) @ np.abs(w).T
        assert np.all(np.abs(a - ref) <= tol), f"{key}: {np.max(np.abs(a - ref) - tol)} over the bound"
