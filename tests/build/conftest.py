"""tests/build/: checks of the source tree and the build (layout, includes, exported symbols)."""
from __future__ import annotations

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.build)
