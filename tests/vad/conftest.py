"""Fixtures of the VAD tests: the onnxruntime reference and one SileroVad per device."""

from __future__ import annotations

import pytest

import metal_backend as mb
from metal_backend.vad import SileroVad
from vad_testing import ONNX, OnnxSilero, require

# CPU and MetalSim (and Metal where present): the devices the VAD's graphs must run on.
DEVICES = [d.name for d in mb.devices()]


@pytest.fixture(scope="session")
def onnx_silero() -> OnnxSilero:
    require(ONNX.is_file(), f"{ONNX} (see tests/assets/vad/README.md)")
    return OnnxSilero()


@pytest.fixture(scope="session", params=DEVICES)
def vad(request: pytest.FixtureRequest) -> SileroVad:
    return SileroVad.load(device=request.param)


@pytest.fixture(scope="session")
def cpu_vad() -> SileroVad:
    return SileroVad.load(device="CPU")
