"""The table of ops (shaders/op_table.h) against every consumer that is not generated from it.

The enum, op names, families, the view and element-wise sets, the one-argument bindings and the
shader's unary ids are expanded from the table at build time; this checks the rest: every row is
bound in mb.ops and in the stub, has its math on both devices (unary rows: a case in the CPU kernel
and in unary.metal), has a family descriptor on both devices, and has conformance cases; and the
embedded Metal library carries the table and the kargs layout asserts.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import metal_backend as mb
from metal_backend import _core
from op_cases import CASES

ROOT = Path(__file__).resolve().parents[2]
TABLE = _core.op_table()
ROWS = [r for r in TABLE if r[0] != "NONE"]


def test_table_matches_the_source_rows():
    text = (ROOT / "shaders" / "op_table.h").read_text()
    rows = re.findall(r"^MB_(?:OP|UNARY|GLU)\((\w+),", text, re.M)
    assert rows == [r[0] for r in TABLE], "the built table differs from shaders/op_table.h: rebuild"
    assert len(set(rows)) == len(rows)
    py = [r[3] for r in ROWS]
    assert len(set(py)) == len(py), "two ops share a Python name"


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_row_is_bound_and_stubbed(row):
    name, family, kind, py = row
    assert callable(getattr(mb.ops, py, None)), f"{name}: mb.ops.{py} missing"
    stub = (ROOT / "metal_backend" / "ops.pyi").read_text()
    assert re.search(rf"^def {py}\(", stub, re.M), f"{name}: ops.pyi has no stub for {py}"


@pytest.mark.parametrize("row", [r for r in ROWS if r[2] == "MAP"], ids=[r[0] for r in ROWS if r[2] == "MAP"])
def test_map_row_builds_its_op(row):
    name, _, _, py = row
    a = mb.Context().tensor(mb.f32, (2, 3))
    assert getattr(mb.ops, py)(a).op == name


@pytest.mark.parametrize("row", [r for r in ROWS if r[1] == "Unary"], ids=[r[0] for r in ROWS if r[1] == "Unary"])
def test_unary_row_has_both_math_bodies(row):
    name = row[0]
    cpu = (ROOT / "src" / "cpu" / "kernels" / "unary.cpp").read_text()
    msl = (ROOT / "shaders" / "unary.metal").read_text()
    assert f"case Op::{name}:" in cpu, f"{name}: no case in src/cpu/kernels/unary.cpp"
    assert f"case MB_UNARY_{name}:" in msl, f"{name}: no case in shaders/unary.metal"


@pytest.mark.parametrize("row", [r for r in ROWS if r[1] == "Glu"], ids=[r[0] for r in ROWS if r[1] == "Glu"])
def test_glu_row_has_both_math_bodies(row):
    name = row[0]
    cpu = (ROOT / "src" / "cpu" / "kernels" / "glu.cpp").read_text()
    msl = (ROOT / "shaders" / "glu.metal").read_text()
    assert f"case Op::{name}:" in cpu, f"{name}: no case in src/cpu/kernels/glu.cpp"
    assert f"case MB_GLU_{name}:" in msl, f"{name}: no case in shaders/glu.metal"
    assert callable(getattr(mb.ops, row[3] + "_split", None)) or name == "SWIGLU_OAI"


def test_every_family_has_a_descriptor_on_both_devices():
    cpu = (ROOT / "src" / "cpu" / "cpu_ops.cpp").read_text()
    metal = (ROOT / "src" / "metal" / "ops" / "ops.cpp").read_text()
    for family in sorted({r[1] for r in ROWS if r[1] != "None"}):
        assert f"case OpFamily::{family}: return &k{family};" in cpu, f"CPU has no descriptor for {family}"
        assert f"case OpFamily::{family}: return &k{family};" in metal, f"Metal has no descriptor for {family}"


def test_every_computing_row_has_conformance_cases():
    ops = {c.op for c in CASES}
    missing = [r[0] for r in ROWS if r[2] != "VIEW" and r[0] not in ops]
    assert not missing, f"no conformance cases for {missing}"


@pytest.mark.build  # runs cmake/EmbedShaders.cmake over the source tree
@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_embedded_library_has_the_table_and_the_layout_asserts(tmp_path):
    # The source string Apple's compiler builds the library from (cmake/EmbedShaders.cmake).
    out = tmp_path / "metal_library.cpp"
    subprocess.run(["cmake", f"-DSHADER_DIR={ROOT / 'shaders'}", f"-DOUTPUT={out}", "-P",
                    str(ROOT / "cmake" / "EmbedShaders.cmake")], check=True, capture_output=True)
    lib = out.read_text()
    for r in ROWS:
        if r[1] == "Unary":
            assert f"MB_UNARY({r[0]}," in lib
    kargs = (ROOT / "shaders" / "kargs.h").read_text()
    for name in re.findall(r"\} (mb_kargs_\w+);", kargs):
        assert f"MB_KARGS_SIZE({name}, " in lib, f"{name}: no layout assert in the shader library"
    assert "static_assert(__builtin_offsetof(" in lib
