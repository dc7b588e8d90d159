"""The MSL portability lint (tools/metalsim/metal_lint.py): every shader passes it, and it catches what
it is for (threadgroup variables inside kernel bodies, double)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

def test_shaders_pass_the_portability_lint():
    shaders = sorted(map(str, (ROOT / "shaders").glob("*.metal")))
    out = subprocess.run([sys.executable, str(ROOT / "tools/metalsim/metal_lint.py"), *shaders],
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
    out = subprocess.run([sys.executable, str(ROOT / "tools/metalsim/metal_lint.py"), str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "bad.metal:4" in out.stdout + out.stderr and "bad.metal:5" in out.stdout + out.stderr
