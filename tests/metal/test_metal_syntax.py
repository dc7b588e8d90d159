"""Checks of the Apple-only Metal code that run where no Mac exists.

- The Objective-C++ runtime and registry type-check with clang (ARC) against GNUstep's Foundation and
  tools/metal_api/Metal/Metal.h (tools/metal_syntax_check.sh). On macOS the module build itself
  compiles them against Apple's SDK, so there the check is skipped.
- The embedded shader library (cmake/EmbedShaders.cmake) is one self-contained source: no include of
  our own headers, every kernel of every .metal file and every kernel the op encoders name, function
  constant indices unique across it, and it compiles as one translation unit through the MSL
  executor's shim, so no two files define the same thing.

A missing tool skips on a developer machine and fails when CI is "true", so CI cannot test less.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Needs compilers: clang-19 and GNUstep for the .mm files; a C++ compiler for the embedded library.
pytestmark = pytest.mark.native

ROOT = Path(__file__).resolve().parents[2]
SHADERS = ROOT / "shaders"
sys.path.insert(0, str(ROOT / "tools" / "metalsim"))
import msl_parse as mp  # noqa: E402


def require(available: bool, what: str) -> None:
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI is missing {what}", pytrace=False)
    pytest.skip(f"missing {what}")


@pytest.mark.skipif(sys.platform == "darwin", reason="on macOS the module build compiles the .mm files with Apple's SDK")
def test_objcxx_sources_type_check():
    proc = subprocess.run(
        ["bash", str(ROOT / "tools" / "metal_syntax_check.sh")], capture_output=True, text=True, timeout=600
    )
    require(proc.returncode != 2, f"the syntax check's tools: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "metal_syntax_check: clean" in proc.stdout


def _cxx() -> str:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    require(cxx is not None, "a C++ compiler")
    return cxx


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded library's source, read back from the generated C++ (so its literal is checked too)."""
    cmake = shutil.which("cmake")
    require(cmake is not None, "cmake")
    out = tmp_path_factory.mktemp("metal_library")
    cpp = out / "metal_library.cpp"
    subprocess.run(
        [cmake, f"-DSHADER_DIR={SHADERS}", f"-DOUTPUT={cpp}", "-P", str(ROOT / "cmake" / "EmbedShaders.cmake")],
        check=True, capture_output=True, text=True, timeout=120,
    )
    main = out / "main.cpp"
    main.write_text(
        "#include <cstdio>\n"
        "namespace mb::metal { extern const char kMetalLibrarySource[]; }\n"
        "int main() { return std::fputs(mb::metal::kMetalLibrarySource, stdout) < 0; }\n"
    )
    exe = out / "dump"
    subprocess.run([_cxx(), "-std=c++17", str(main), str(cpp), "-o", str(exe)], check=True, timeout=300)
    source = out / "library.metal"
    source.write_text(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)
    return source


def _kernel_names(path: Path) -> set[str]:
    src = mp.load(str(path))
    names = {inst.host_name for inst in mp.instantiations(src)}
    for block in src.blocks:
        if block.kind == "kernel" and not block.is_template:
            k = mp.parse_kernel(src, block)
            names.add(k.host_name or k.name)
    return names


def test_library_includes_none_of_our_headers(library):
    text = library.read_text()
    ours = {p.name for p in SHADERS.iterdir()}
    included = re.findall(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', text, re.M)
    assert included, "expected the system includes (<metal_stdlib>) to stay"
    assert not [name for name in included if os.path.basename(name) in ours]
    assert not re.search(r'^[ \t]*#[ \t]*include[ \t]*"', text, re.M)
    assert not re.search(r"^[ \t]*#[ \t]*pragma[ \t]+once", text, re.M)
    for header in ("kargs.h", "quants.h", "quant_blocks.h", "block_reduce.h"):
        assert text.count(f'#line 1 "{header}"') == 1, header  # inlined exactly once
    assert "msl_shim" not in text


def test_library_holds_every_kernel(library):
    per_file = set()
    for shader in sorted(SHADERS.glob("*.metal")):
        per_file |= _kernel_names(shader)
    assert per_file
    assert _kernel_names(library) == per_file


def test_library_holds_every_kernel_the_encoders_name(library):
    names = _kernel_names(library)
    literals = set()
    for cpp in sorted((ROOT / "src" / "metal").rglob("*.cpp")):
        literals |= set(re.findall(r'"(kernel_\w*)"', cpp.read_text()))
    assert literals
    # A literal ending in "_" is the stem of a name the encoder completes (kernel_cpy_ + types).
    missing = [lit for lit in sorted(literals) if not (lit in names if not lit.endswith("_") else
                                                        any(n.startswith(lit) for n in names))]
    assert not missing, f"kernels the encoders ask for but the library lacks: {missing}"


def test_function_constant_indices_are_unique_in_the_library(library):
    # One library holds every family's function constants; Metal matches constant values by index,
    # so two constants sharing an index in one library is a trap.
    text = library.read_text()
    defines = dict(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\d+)[ \t]*$", text, re.M))
    by_index: dict[int, list[str]] = {}
    for fc in mp.function_constants(mp.load(str(library))):
        expr = re.sub(r"[A-Za-z_]\w*", lambda m: defines.get(m.group(0), m.group(0)), fc.index_expr)
        assert re.fullmatch(r"[\d\s()+*-]+", expr), f"cannot evaluate the index of {fc.name}: {fc.index_expr}"
        by_index.setdefault(eval(expr), []).append(fc.name)  # digits and + - * ( ) only
    shared = {i: names for i, names in by_index.items() if len(names) > 1}
    assert by_index and not shared, f"function constant indices used more than once: {shared}"


def test_library_compiles_as_one_translation_unit(library):
    # The MSL executor's generator and shim compile the whole library as C++: a name defined by
    # two .metal files (or two headers' copies) fails here as it would in Apple's compiler.
    gen = library.with_suffix(".metal.cpp")
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "metalsim" / "metal_sim_gen.py"), str(library), "-o", str(gen), "-I", str(SHADERS)],
        check=True, timeout=300,
    )
    cxx = _cxx()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    flags = (["-Wno-unknown-attributes", "-Xclang", "-ffloat16-excess-precision=none"] if "clang" in version
             else ["-Wno-attributes"])
    proc = subprocess.run(
        [cxx, "-std=c++17", "-fsyntax-only", *flags, "-fsigned-char", "-fno-strict-aliasing", "-fwrapv",
         "-I", str(SHADERS), "-I", str(ROOT / "src"), str(gen)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
