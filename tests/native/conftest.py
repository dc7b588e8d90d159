"""tests/native/: the C++ tests, built with CMake and run through CTest."""
from __future__ import annotations

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.native)
    item.add_marker(pytest.mark.slow)
