"""The checked runtime's native test (tests/native/test_checked_runtime.cpp), built and run: every
dispatch and blit check of src/metal/checked_runtime.cpp over a recording runtime, including those no
encoder reaches from Python (args size, binding offsets, grid limits, blit bounds)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CXX = os.environ.get("CXX", "c++")


@pytest.mark.skipif(sys.platform == "win32" or shutil.which(CXX) is None, reason="needs a C++ compiler on PATH")
def test_native_checked_runtime(tmp_path):
    exe = tmp_path / "test_checked_runtime"
    build = subprocess.run(
        [CXX, "-O1", "-std=c++17", "-Wall", "-Wextra", "-Wno-unused-parameter", f"-I{ROOT / 'src'}",
         f"-I{ROOT / 'shaders'}", str(ROOT / "tests/native/test_checked_runtime.cpp"),
         str(ROOT / "src/metal/checked_runtime.cpp"), "-o", str(exe)],
        capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    log = out.stdout + out.stderr
    m = re.search(r"(\d+) checks, (\d+) failed", log)
    assert m, log[-2000:]
    assert out.returncode == 0 and int(m.group(2)) == 0, log[-4000:]
    assert int(m.group(1)) >= 50, m.group(0)
