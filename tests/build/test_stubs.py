"""The type stubs of the native module (metal_backend/_core.pyi, ops.pyi) against the module itself:
mypy's stubtest imports metal_backend and reports every name, signature or type the stubs get wrong or
leave out. What it reports of pybind11's own machinery is listed, with reasons, in
stubtest_allowlist.txt next to this file."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ALLOWLIST = Path(__file__).with_name("stubtest_allowlist.txt")


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="needs mypy (in the test extra)")
def test_stubs_match_the_native_module(tmp_path):
    # Run outside the checkout so that the installed package, not the source folder, is what is checked.
    proc = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--concise", "--allowlist", str(ALLOWLIST),
                           "metal_backend._core", "metal_backend.ops"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
