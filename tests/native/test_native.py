"""The native C++ tests (tests/native/CMakeLists.txt), configured, built and run through CTest.

What they cover that the Python suite reaches only through one thread count and one path per shape:
- `mul_mat_*`: the CPU MUL_MAT kernel over every weight type and many shapes (odd K, rows and tokens
  either side of every blocking and path switch, broadcast matrices, strided activations) against a
  float64 reference, with sentinel bytes after dst and the scratch; built with the SIMD kernels this
  CPU has (and run once more capped to AVX2 on an AVX-512 machine) and portable (-DMB_NO_SIMD).
- `kernels_*`, `types`: the other CPU kernel families and the f16/bf16/quantized conversions.
- `scratch`: the CPU backend's guarded scratch (a write past a node's declared work_size is caught).
- `checked_runtime`: every dispatch and blit check of the Metal device's checked runtime.
- `executor`: the MSL executor (a missing threadgroup_barrier that lockstep hides and run-ahead
  exposes, divergent barriers and simdgroup operations reported as errors, invalid dispatches refused).
- `racecheck`: MetalSim's racecheck on the planted races of tests/kernels/races.metal (threadgroup
  read-write race, missing barrier, unordered simdgroup lanes, two threadgroups writing the same device
  bytes, an uninitialised threadgroup read, two concurrent dispatches touching the same bytes), each
  caught with both threads and .metal lines named, and each race-free twin passing.
- On an x86-64 host with an arm64 cross compiler and qemu-user (CI installs g++-aarch64-linux-gnu and
  qemu-user), the CPU tests are built again for arm64 (cmake/aarch64-linux-gnu.cmake) and run under
  qemu-aarch64: the NEON dot products and GEMM tile that Apple-silicon users run, checked on Linux.

Each binary ends with "NAME: N checks, M failed" (tests/native/check.h); a test here passes when CTest
does and the binary made at least its expected number of checks.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CMAKE = shutil.which("cmake")
CXX = os.environ.get("CXX", "c++")
JOBS = str(max(2, os.cpu_count() or 2))

pytestmark = pytest.mark.skipif(sys.platform == "win32" or CMAKE is None or shutil.which(CXX) is None,
                                reason="needs cmake and a C++ compiler on PATH")

CXX_ARM64 = "aarch64-linux-gnu-g++"
HAVE_ARM64 = (sys.platform != "win32" and os.uname().machine in ("x86_64", "AMD64")
              and shutil.which(CXX_ARM64) is not None and shutil.which("qemu-aarch64") is not None)

# The fewest checks each binary must make: a run that silently skips its cases fails.
MIN_CHECKS = {"mul_mat": 100_000, "kernels": 500, "types": 100_000, "checked_runtime": 50, "executor": 100,
             "racecheck": 100, "scratch": 30}


def configure_and_build(build: Path, *args: str) -> Path:
    for cmd in ([CMAKE, "-S", str(ROOT / "tests/native"), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", *args],
                [CMAKE, "--build", str(build), "-j", JOBS]):
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{(out.stdout + out.stderr)[-6000:]}"
    return build


def ctest_names(build: Path) -> list[str]:
    out = subprocess.run([str(Path(CMAKE).with_name("ctest")), "-N", "--test-dir", str(build)],
                         capture_output=True, text=True, timeout=60)
    return re.findall(r"Test\s+#\d+: (\S+)", out.stdout)


def run_ctest(build: Path, name: str) -> str:
    ctest = str(Path(CMAKE).with_name("ctest"))
    out = subprocess.run([ctest, "--test-dir", str(build), "-R", f"^{name}$", "-V", "--timeout", "900"],
                         capture_output=True, text=True, timeout=1000)
    log = out.stdout + out.stderr
    assert out.returncode == 0 and "100% tests passed" in log, log[-6000:]
    m = re.search(r"(\w+): (\d+) checks, (\d+) failed", log)
    assert m, log[-3000:]
    family = name.split("_simd")[0].split("_portable")[0]
    assert int(m.group(3)) == 0 and int(m.group(2)) >= MIN_CHECKS[family], m.group(0)
    return log


@pytest.fixture(scope="session")
def host_build(tmp_path_factory) -> Path:
    return configure_and_build(tmp_path_factory.mktemp("native"))


@pytest.fixture(scope="session")
def arm64_build(tmp_path_factory) -> Path:
    return configure_and_build(tmp_path_factory.mktemp("native-arm64"),
                               f"-DCMAKE_TOOLCHAIN_FILE={ROOT / 'cmake/aarch64-linux-gnu.cmake'}",
                               "-DMB_NATIVE_CPU_ONLY=ON")


HOST_TESTS = ["mul_mat_simd", "mul_mat_portable", "kernels_simd", "kernels_portable", "types", "scratch",
              "checked_runtime", "executor", "racecheck"]


@pytest.mark.parametrize("name", HOST_TESTS)
def test_native(host_build, name):
    log = run_ctest(host_build, name)
    if name == "executor":
        assert "missing barrier: lockstep hides it, run-ahead exposes it" in log
        assert "divergent barriers and simdgroup operations are errors" in log
        assert "kernels needing simd reductions or matrices fail on a GPU without them" in log
    if name == "racecheck":
        for part in ("threadgroup read-write race", "missing barrier in a reduction",
                     "lanes of a simdgroup ordered by simdgroup_barrier",
                     "two threadgroups write the same device bytes",
                     "initcheck: a threadgroup read no thread wrote",
                     "two dispatches of a concurrent pass, no barrier between them"):
            assert part in log, part


def test_native_registers_every_test(host_build):
    """CTest holds exactly the tests this file runs (plus the AVX2-capped run on AVX-512 machines)."""
    names = set(ctest_names(host_build))
    assert set(HOST_TESTS) <= names and names - set(HOST_TESTS) <= {"mul_mat_simd_avx2"}, names


def test_native_mul_mat_capped_to_avx2(host_build):
    """On an AVX-512 machine, the SIMD build once more under MB_CPU_MAX_ISA=avx2 (both x86 tiles)."""
    if "mul_mat_simd_avx2" not in ctest_names(host_build):
        pytest.skip("this CPU has no AVX-512: the SIMD build already runs the AVX2 tile")
    run_ctest(host_build, "mul_mat_simd_avx2")


@pytest.mark.skipif(not HAVE_ARM64, reason=f"needs an x86-64 host with {CXX_ARM64} and qemu-aarch64 "
                    "(apt: g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)")
@pytest.mark.parametrize("name", ["mul_mat_simd", "mul_mat_portable", "kernels_simd", "types"])
def test_native_arm64_under_qemu(arm64_build, name):
    """The arm64 build (NEON wherever __ARM_NEON is set, which every arm64 target is) under qemu."""
    run_ctest(arm64_build, name)
