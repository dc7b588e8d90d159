"""Expert ids outside their range (MUL_MAT_ID, ADD_ID) raise OutOfRangeError naming the op and the id,
on the CPU at compute and on MetalSim at synchronize (the GPU writes them to the error record)."""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb


def _run(device, build, arrays):
    ctx = mb.Context()
    tensors = [ctx.tensor(t, a.shape) for t, a in arrays]
    out = build(*tensors)
    backend = device.init_backend()
    mb.alloc_ctx_tensors(ctx, backend)
    for t, (_, a) in zip(tensors, arrays):
        t.set(a)
    backend.graph_compute(mb.Graph(out))
    return out


CASES = {
    "MUL_MAT_ID": (mb.ops.mul_mat_id, [(mb.f32, np.ones((3, 4, 32), np.float32)),
                                       (mb.f32, np.ones((2, 1, 32), np.float32)),
                                       (mb.i32, np.array([[0, 1], [2, 7]], np.int32))]),
    "ADD_ID": (mb.ops.add_id, [(mb.f32, np.ones((2, 3, 8), np.float32)), (mb.f32, np.ones((2, 8), np.float32)),
                               (mb.i32, np.array([[0, 1, 1], [5, 0, 1]], np.int32))]),
}


@pytest.mark.parametrize("op", sorted(CASES))
@pytest.mark.parametrize("device_name", [d.name for d in mb.devices()])
def test_bad_id_raises(op, device_name):
    build, arrays = CASES[op]
    with pytest.raises(mb.OutOfRangeError) as info:
        _run(mb.device(device_name), build, arrays)
    msg = str(info.value)
    assert op in msg and ("7" in msg or "5" in msg), msg
