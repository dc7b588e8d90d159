"""tests/ops/: every op against float64 numpy on every device. Cases at Whisper's own sizes (their
names end in /whisper_*) take seconds each and are marked slow."""
from __future__ import annotations

import pytest

import metal_backend as mb


def pytest_itemcollected(item: pytest.Item) -> None:
    if "/whisper_" in item.name:
        item.add_marker(pytest.mark.slow)


@pytest.fixture(params=[2, 1, 0], ids=["avx512", "avx2", "portable"])
def isa_cap(request):
    """The CPU's max_isa for one test (a cap above the hardware's level runs its widest kernels)."""
    cpu = mb.device("CPU")
    before = int(cpu.props.extra["max_isa"])
    cpu.set_prop("max_isa", request.param)
    yield request.param
    cpu.set_prop("max_isa", before)
