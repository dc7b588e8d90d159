"""tests/ops/: every op against float64 numpy on every device. Cases at Whisper's own sizes (their
names end in /whisper_*) take seconds each and are marked slow."""
from __future__ import annotations

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    if "/whisper_" in item.name:
        item.add_marker(pytest.mark.slow)
