"""Shared fixtures: every test that takes `device` runs once per device in the registry."""
from __future__ import annotations

import pytest

import metal_backend as mb


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        devs = mb.devices()
        metafunc.parametrize("device", devs, ids=[d.name for d in devs])
    if "buft" in metafunc.fixturenames:
        pairs = [(d, b) for d in mb.devices() for b in d.buffer_types]
        metafunc.parametrize("buft", [b for _, b in pairs], ids=[f"{d.name}-{b.name}" for d, b in pairs])
