"""The CPU MUL_MAT kernel's native test (tests/native/test_mul_mat.cpp), built and run twice: with
the SIMD kernels this CPU has (AVX2 one-row and four-row dot products, the AVX2 GEMM and its token
packing, the AVX-512 GEMM tile where the CPU has it, run once more capped to AVX2; NEON on arm64)
and with -DMB_NO_SIMD (the portable paths). On an x86-64 host with an arm64 cross compiler and
qemu-user (CI installs g++-aarch64-linux-gnu and qemu-user), it is built a third time for arm64 and
run under qemu-aarch64: the NEON dot products and GEMM tile that Apple-silicon users run, checked
on Linux. It checks every weight type
over many shapes (odd K, rows and tokens either side of every blocking and path switch, broadcast
matrices, strided activations) against a float64 reference, with sentinel bytes after dst and the
scratch, which the Python suite reaches only through one thread count and one path per shape.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import metal_backend as mb

ROOT = Path(__file__).resolve().parents[1]
CXX = os.environ.get("CXX", "c++")
SOURCES = [
    "tests/native/test_mul_mat.cpp",
    "src/cpu/kernels/mul_mat.cpp",
    "src/cpu/kernels/vec_dot.cpp",
    "src/cpu/kernels/vec_dot_rows.cpp",
    "src/cpu/kernels/gemm_f32.cpp",
    "src/cpu/thread_pool.cpp",
    "src/cpu/cache_sizes.cpp",
    "src/core/types.cpp",
    "src/core/tensor.cpp",
    "src/core/op.cpp",
    "src/core/buffer.cpp",
    "src/core/storage.cpp",
    "src/core/buffer_type.cpp",
    "src/core/device.cpp",
]

pytestmark = pytest.mark.skipif(sys.platform == "win32" or shutil.which(CXX) is None,
                                reason="needs a C++ compiler on PATH")

# The arm64 build: a cross compiler and a user-mode emulator, where this host is not arm64 itself.
CXX_ARM64 = os.environ.get("CXX_ARM64", "aarch64-linux-gnu-g++")
QEMU_ARM64 = os.environ.get("QEMU_ARM64", "qemu-aarch64")
HAVE_ARM64 = (os.uname().machine in ("x86_64", "AMD64") and shutil.which(CXX_ARM64) is not None
              and shutil.which(QEMU_ARM64) is not None) if sys.platform != "win32" else False


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    """Both variants compiled in parallel: {name: path}."""
    out_dir = tmp_path_factory.mktemp("native_mul_mat")
    # name: (compiler, extra flags)
    variants = {"simd": (CXX, []), "portable": (CXX, ["-DMB_NO_SIMD"])}
    if HAVE_ARM64:
        # Static, so that qemu needs no arm64 libraries installed.
        variants["neon"] = (CXX_ARM64, ["-static"])
    procs = {}
    for name, (cxx, flags) in variants.items():
        exe = out_dir / f"test_mul_mat_{name}"
        cmd = [cxx, "-O2", "-std=c++17", "-pthread", f"-I{ROOT / 'src'}", f"-I{ROOT / 'shaders'}", *flags,
               *(str(ROOT / s) for s in SOURCES), "-o", str(exe)]
        procs[name] = (exe, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    built = {}
    for name, (exe, proc) in procs.items():
        log, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name} build failed:\n{log[-4000:]}"
        built[name] = exe
    return built


# (binary, MB_CPU_MAX_ISA): the SIMD build runs once per instruction set the machine has.
RUNS = [("simd", None), ("portable", None)]
if mb.device("CPU").props.extra.get("isa_hardware") == "avx512":
    RUNS.insert(1, ("simd", "avx2"))


def run_native(exe, cap=None, runner=()):
    env = dict(os.environ)
    env.pop("MB_CPU_MAX_ISA", None)
    if cap:
        env["MB_CPU_MAX_ISA"] = cap
    out = subprocess.run([*runner, str(exe)], capture_output=True, text=True, timeout=600, env=env)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-4000:]
    m = re.search(r"(\d+) passed, (\d+) failed", log)
    assert m, log[-2000:]
    assert int(m.group(1)) > 100_000 and int(m.group(2)) == 0, m.group(0)


@pytest.mark.parametrize("variant,cap", RUNS, ids=[f"{v}-{c}" if c else v for v, c in RUNS])
def test_native_mul_mat(binaries, variant, cap):
    run_native(binaries[variant], cap)


@pytest.mark.skipif(not HAVE_ARM64, reason=f"needs an x86-64 host with {CXX_ARM64} and {QEMU_ARM64} "
                    "(apt: g++-aarch64-linux-gnu qemu-user)")
def test_native_mul_mat_neon_under_qemu(binaries):
    """The arm64 build (NEON kernels; the build defines MB_SIMD_NEON wherever __ARM_NEON is set, which
    every arm64 target is) under user-mode emulation."""
    run_native(binaries["neon"], runner=(QEMU_ARM64,))
