"""Address spaces checked as Apple's compiler checks them (tools/metalsim/strict_compile.py).

The MetalSim build erases `device`, `constant` and `threadgroup`; the strict check keeps them apart
under clang. Every shaders/*.metal file must pass it; kernels that convert a pointer or reference
between address spaces, implicitly or by a cast (or write constant memory, or use atomics or
simdgroup matrix loads where MSL does not declare them) must fail it at the offending line, and the
forms MSL allows must pass.

A missing clang skips on a developer machine and fails when CI is "true" on Linux (.ci/run and the
Linux jobs install clang-19). On macOS it skips when no clang >= 18 is there (Apple's clang is older):
Apple's own Metal compiler builds every kernel there, which is what this check stands in for.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Needs compilers: clang-19 compiles every kernel with MSL's address spaces.
pytestmark = pytest.mark.native

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "metalsim" / "strict_compile.py"
sys.path.insert(0, str(SCRIPT.parent))
import strict_compile as sc  # noqa: E402


def _must_run() -> bool:
    """Whether a missing or unusable clang fails the test: in Linux CI, where no Apple compiler exists."""
    return os.environ.get("CI") == "true" and sys.platform != "darwin"


def _clang() -> str:
    clang = os.environ.get("CLANG") or shutil.which("clang-19") or shutil.which("clang")
    if clang is None:
        if _must_run():
            pytest.fail("CI is missing clang-19 (the strict address-space check needs it)", pytrace=False)
        pytest.skip("clang (>= 18) not installed: the strict address-space check needs it (apt-get install clang-19)")
    return clang


def _run(clang: str, *files: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--clang", clang, *map(str, files)],
        capture_output=True, text=True, timeout=900,
    )
    if proc.returncode == 2:
        if _must_run():
            pytest.fail(f"strict check's compiler unusable in CI: {proc.stderr.strip()}", pytrace=False)
        pytest.skip(proc.stderr.strip())
    return proc


def _sections(output: str) -> dict[str, str]:
    """The strict check's output per file: file name -> its status ("clean"/"FAILED") and diagnostics."""
    sections = {}
    for part in re.split(r"^== ", output, flags=re.M)[1:]:
        path, rest = part.split(": ", 1)
        sections[os.path.basename(path)] = rest
    return sections


def test_every_kernel_file_passes_the_strict_check():
    proc = _run(_clang())
    metal = sorted(p.name for p in (ROOT / "shaders").glob("*.metal"))
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-2000:]
    assert f"strict_compile: {len(metal)} of {len(metal)} files clean" in proc.stdout
    sections = _sections(proc.stdout)
    assert sorted(sections) == metal
    for name in metal:
        assert sections[name].startswith("clean"), sections[name]
        assert "warning:" not in sections[name], sections[name]


PRELUDE = """#include <metal_stdlib>
using namespace metal;

typedef struct {
    float a;
    int b;
} pair_t;

"""

# Each kernel breaks one address-space rule at the line marked BAD; Apple's compiler rejects each.
BAD = {
    "device_to_thread_param": """
static void scale(thread float * p) { p[0] *= 2.0f; }
kernel void k(device float * dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    scale(dst + i); // BAD
}
""",
    "thread_to_device_param": """
static void put(device float * p, float v) { p[0] = v; }
kernel void k(device float * dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float tmp[4];
    put(tmp, float(i)); // BAD
    dst[i] = tmp[0];
}
""",
    "threadgroup_to_device_assign": """
kernel void k(device float * dst [[buffer(0)]], threadgroup float * shmem [[threadgroup(0)]],
              uint i [[thread_position_in_grid]]) {
    device float * p = dst;
    p = shmem; // BAD
    p[i] = 1.0f;
}
""",
    "device_to_threadgroup_init": """
kernel void k(device float * dst [[buffer(0)]], threadgroup float * shmem [[threadgroup(0)]],
              uint i [[thread_position_in_grid]]) {
    threadgroup float * t = dst; // BAD
    t[i] = shmem[i];
}
""",
    "constant_to_device_param": """
static float first(device const float * p) { return p[0]; }
kernel void k(constant float * c [[buffer(0)]], device float * dst [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    dst[i] = first(c); // BAD
}
""",
    "constant_pointer_written": """
kernel void k(constant float * c [[buffer(0)]], device float * dst [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    dst[i] = c[i];
    c[i] = 0.0f; // BAD
}
""",
    "constant_struct_field_written": """
kernel void k(constant pair_t & args [[buffer(0)]], device float * dst [[buffer(1)]],
              uint i [[thread_position_in_grid]]) {
    args.b = 3; // BAD
    dst[i] = args.a;
}
""",
    "constant_struct_assigned": """
kernel void k(constant pair_t & args [[buffer(0)]], device pair_t * src [[buffer(1)]],
              uint i [[thread_position_in_grid]]) {
    args = src[i]; // BAD
}
""",
    "constant_vector_written": """
kernel void k(constant float4 * c [[buffer(0)]], device float4 * dst [[buffer(1)]],
              uint i [[thread_position_in_grid]]) {
    dst[i] = c[i];
    c[i] += dst[i]; // BAD
}
""",
    "constant_reference_to_thread_reference": """
static float get_a(thread const pair_t & p) { return p.a; }
kernel void k(constant pair_t & args [[buffer(0)]], device float * dst [[buffer(1)]],
              uint i [[thread_position_in_grid]]) {
    dst[i] = get_a(args); // BAD
}
""",
    "device_vector_reference_to_thread_reference": """
static void bump(thread float4 & v) { v += 1.0f; }
kernel void k(device float4 * dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    bump(dst[i]); // BAD
}
""",
    "threadgroup_pointer_returned_as_device": """
static device float * pick(threadgroup float * t) { return t; } // BAD
kernel void k(device float * dst [[buffer(0)]], threadgroup float * shmem [[threadgroup(0)]],
              uint i [[thread_position_in_grid]]) {
    pick(shmem)[i] = dst[i];
}
""",
    "threadgroup_cast_to_device": """
kernel void k(device float * dst [[buffer(0)]], threadgroup float * shmem [[threadgroup(0)]],
              uint i [[thread_position_in_grid]]) {
    device float * p = (device float *) shmem; // BAD
    p[i] = dst[i];
}
""",
    "device_cast_to_thread": """
kernel void k(device float * dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float * p = (float *) (dst + i); // BAD
    p[0] = 1.0f;
}
""",
    "device_cast_to_constant": """
static float get(constant float * c) { return c[0]; }
kernel void k(device float * dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    dst[i] = get((constant float *) dst + i); // BAD
}
""",
    "atomic_in_thread_memory": """
kernel void k(device int * dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    atomic_int counter;
    atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed); // BAD
    dst[i] = 0;
}
""",
    "simdgroup_load_from_thread_memory": """
kernel void k(device float * dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float tile[64];
    for (int j = 0; j < 64; ++j) { tile[j] = float(j); }
    simdgroup_float8x8 m;
    simdgroup_load(m, tile, 8); // BAD
    simdgroup_store(m, dst, 8);
}
""",
    "simdgroup_load_from_constant_memory": """
kernel void k(constant float * c [[buffer(0)]], device float * dst [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    simdgroup_float8x8 m;
    simdgroup_load(m, c, 8); // BAD
    simdgroup_store(m, dst, 8);
}
""",
    "simdgroup_store_to_constant_memory": """
kernel void k(constant float * c [[buffer(0)]], device float * dst [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    simdgroup_float8x8 m;
    simdgroup_load(m, dst, 8);
    simdgroup_store(m, c, 8); // BAD
}
""",
}

# Kernel parameters in the wrong address space: the error names the rule, not the kernel's line (the
# check runs where the generated registration table binds the parameters).
BAD_PARAMETERS = {
    "buffer_parameter_in_thread_space": (
        """
kernel void k(float * dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    dst[i] = 1.0f;
}
""",
        "[[buffer(N)]] parameter must point to or refer to device or constant memory",
    ),
    "buffer_parameter_in_threadgroup_space": (
        """
kernel void k(threadgroup float * dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    dst[i] = 1.0f;
}
""",
        "[[buffer(N)]] parameter must point to or refer to device or constant memory",
    ),
    "threadgroup_parameter_in_device_space": (
        """
kernel void k(device float * dst [[buffer(0)]], device float * t [[threadgroup(0)]],
              uint i [[thread_position_in_grid]]) {
    dst[i] = t[i];
}
""",
        "[[threadgroup(N)]] parameter must point to threadgroup memory",
    ),
}

# What MSL allows across address spaces: copies of scalars, vectors and structs out of and into any
# space, indexing and compound assignment in place, values from memory into functions and simd_*.
GOOD = """
static float sum4(float4 v) { return v.x + v.y + v.z + v.w; }
static void fill(device float4 * p, float v) { p[0] = float4(v); }
static float first(threadgroup const float * t) { return t[0]; }
static float field(constant pair_t & p) { return p.a; }

kernel void k(constant pair_t & args [[buffer(0)]],
              device const float4 * src [[buffer(1)]],
              device float4 * dst [[buffer(2)]],
              device pair_t * pairs [[buffer(3)]],
              constant float4 * table [[buffer(4)]],
              device atomic_int * counter [[buffer(5)]],
              device const half4 * hsrc [[buffer(6)]],
              threadgroup float * shmem [[threadgroup(0)]],
              threadgroup atomic_uint * tcount [[threadgroup(1)]],
              uint i [[thread_position_in_grid]],
              ushort tiisg [[thread_index_in_simdgroup]]) {
    float4 v = src[i];
    float4 w = table[i % 4] + v * src[i + 1];
    v += table[0];
    dst[i] = v;
    dst[i] += w;
    dst[i][2] = src[i][1] * 2.0f;
    dst[i].x = max(src[i].x, table[1].y);
    const float d = dot(src[i], table[2]) + sum4(src[i]) + length(table[3]);
    const float4 m = max(src[i], table[0]);
    const float4 h = float4(hsrc[i]);
    shmem[tiisg] = d + m.w + h.y;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const float s = simd_sum(shmem[tiisg]) + simd_max(shmem[0]) + first(shmem);
    pair_t p = pairs[i];
    p.a += s + args.a + field(args);
    pairs[i] = p;
    pairs[i + 1] = pairs[i];
    pair_t q = args;
    pairs[i + 2] = args;
    pairs[i + 3].b = q.b + int(as_type<uint>(src[i].z));
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(tcount, 1u, memory_order_relaxed);
    const int seen = atomic_load_explicit(counter, memory_order_relaxed);
    fill(dst + 1, float(seen));
    device const float * f = (device const float *) src;
    threadgroup float * t = shmem + 1;
    simdgroup_float8x8 a;
    simdgroup_load(a, f, 8);
    simdgroup_load(a, t, 8);
    simdgroup_store(a, (device float *) dst, 8);
    simdgroup_store(a, shmem, 8);
    const float4 parts = float4(src[i].x, shmem[1], table[0].z, hsrc[i].w);
    const float4 picked = select(src[i], table[1], src[i] > table[2]) + clamp(src[i], 0.0f, 1.0f);
    dst[i + 2] = any(src[i] != table[3]) ? parts : picked;
    const float sh = simd_shuffle_down(shmem[tiisg], 1) + simd_broadcast_first(src[i].y);
    const float4 sv = simd_sum(src[i]) + simd_shuffle_xor(table[0], 1);
    dst[i + 3] = sv * sh;
    device float4x4 * mats = (device float4x4 *) (pairs + 64);
    const float4x4 mt = mats[0];
    mats[1] = mt;
    mats[1][2] = mats[0] * src[i];
}
"""


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict[str, int]]:
    """One strict check over every snippet (a compile each): the result and the BAD line per file."""
    clang = _clang()
    folder = tmp_path_factory.mktemp("msl_strict")
    lines = {}
    files = []
    for name, body in [*BAD.items(), *((n, b) for n, (b, _) in BAD_PARAMETERS.items()), ("good", GOOD)]:
        text = PRELUDE + body.lstrip("\n")
        path = folder / f"{name}.metal"
        path.write_text(text)
        files.append(path)
        marked = [n for n, line in enumerate(text.splitlines(), 1) if "// BAD" in line]
        lines[name] = marked[0] if marked else 0
    return _run(clang, *files), lines


@pytest.mark.parametrize("name", sorted(BAD))
def test_strict_check_rejects_address_space_violation(checked, name):
    proc, lines = checked
    assert proc.returncode == 1, proc.stdout[-4000:]
    section = _sections(proc.stdout)[f"{name}.metal"]
    assert section.startswith("FAILED"), section
    assert re.search(r"^\S+: error: ", section, re.M), section
    # The marked line is named (as the error, or as where a shim function rejecting its operand
    # was called from), and no other line of the kernel is in error.
    assert f"{name}.metal:{lines[name]}:" in section, section
    at = {int(n) for n in re.findall(rf"^\S*{name}\.metal:(\d+):\d+: error: ", section, re.M)}
    assert at <= {lines[name]}, section


@pytest.mark.parametrize("name", sorted(BAD_PARAMETERS))
def test_strict_check_rejects_kernel_parameter_in_wrong_space(checked, name):
    proc, _ = checked
    section = _sections(proc.stdout)[f"{name}.metal"]
    assert section.startswith("FAILED"), section
    assert re.search(r"^\S+: error: static assertion failed.*" + re.escape(BAD_PARAMETERS[name][1]),
                     section, re.M), section


def test_strict_check_accepts_what_msl_allows(checked):
    proc, _ = checked
    section = _sections(proc.stdout)["good.metal"]
    assert section.startswith("clean"), section
    assert "warning:" not in section, section


def test_cast_rewrite_wraps_pointer_casts_only():
    text = (
        "x = (device const T *) (a + 1) + (threadgroup float*)shmem;\n"
        "n = sizeof(device float *) * 4 + f(a) * (b) + (c * d);\n"
        "// (device float *) p in a comment\n"
        "#define P(x) ((device float *) x)\n"
        "return (device char *) p;\n"
    )
    out = sc.with_checked_casts(text)
    assert out.splitlines()[0] == (
        "x = (device const T *) (mb::sim::msl::same_space<device const T *>) (a + 1) + "
        "(threadgroup float*) (mb::sim::msl::same_space<threadgroup float*>)shmem;"
    )
    assert out.splitlines()[1:4] == text.splitlines()[1:4]
    assert out.splitlines()[4] == "return (device char *) (mb::sim::msl::same_space<device char *>) p;"
