"""The MSL executor's own tests (tests/native/), built from scratch and run, and the kernel lint.

The native suite covers what the Python API cannot reach directly: a kernel with a missing
threadgroup_barrier that lockstep hides and the run-ahead schedule exposes, divergent barriers and
simdgroup operations reported as errors, and invalid dispatches (too many threads, too much
threadgroup memory, unbound buffers, args structs too small) rejected instead of crashing.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

needs_posix_compiler = pytest.mark.skipif(
    sys.platform == "win32" or shutil.which(os.environ.get("CXX", "c++")) is None,
    reason="needs a C++ compiler on PATH",
)


@needs_posix_compiler
def test_native_executor_suite(tmp_path):
    out = subprocess.run(["sh", str(ROOT / "tests/native/build.sh"), str(tmp_path / "build")],
                         capture_output=True, text=True, timeout=1200)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-4000:]
    m = re.search(r"(\d+) checks, (\d+) failed", log)
    assert m, log[-2000:]
    assert int(m.group(1)) > 100 and int(m.group(2)) == 0, m.group(0)
    assert "missing barrier: lockstep hides it, run-ahead exposes it" in log
    assert "divergent barriers and simdgroup operations are errors" in log
    assert "kernels needing simd reductions or matrices fail on a GPU without them" in log


def test_shaders_pass_the_portability_lint():
    out = subprocess.run([sys.executable, str(ROOT / "tools/metalsim/metal_lint.py"), *sorted(map(str, (ROOT / "shaders").glob("*.metal")))],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_lint_catches_non_portable_msl(tmp_path):
    bad = tmp_path / "bad.metal"
    bad.write_text(
        "#include <metal_stdlib>\n"
        "using namespace metal;\n"
        "kernel void kernel_bad(device float * x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    threadgroup float tmp[32];\n"
        "    double d = x[i];\n"
        "    x[i] = d * 1.0;\n"
        "}\n")
    out = subprocess.run([sys.executable, str(ROOT / "tools/metalsim/metal_lint.py"), str(bad)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert "bad.metal:4" in out.stdout + out.stderr and "bad.metal:5" in out.stdout + out.stderr
