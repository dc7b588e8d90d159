"""Shared fixtures: every test that takes `device` runs once per device in the registry."""
from __future__ import annotations

import pytest

import metal_backend as mb


def compute_targets():
    """(device, backend params, id): every device, and MetalSim once more under the run-ahead schedule,
    which exposes missing threadgroup barriers that lockstep hides, and once under racecheck (a data race
    or a read of unwritten threadgroup memory in a kernel raises mb.DeviceError)."""
    out = []
    for d in mb.devices():
        out.append((d, "", d.name))
        if d.name == "MetalSim":
            out.append((d, "schedule=1", "MetalSim-runahead"))
            out.append((d, "racecheck=1", "MetalSim-racecheck"))
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" in metafunc.fixturenames:
        targets = compute_targets()
        metafunc.parametrize("target", [(d, p) for d, p, _ in targets], ids=[i for _, _, i in targets])
    if "device" in metafunc.fixturenames:
        devs = mb.devices()
        metafunc.parametrize("device", devs, ids=[d.name for d in devs])
    if "buft" in metafunc.fixturenames:
        pairs = [(d, b) for d in mb.devices() for b in d.buffer_types]
        metafunc.parametrize("buft", [b for _, b in pairs], ids=[f"{d.name}-{b.name}" for d, b in pairs])
