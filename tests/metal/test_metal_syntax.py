"""Checks of the Apple-only Metal code that run where no Mac exists.

- The Objective-C++ runtime and registry type-check with clang (ARC) against GNUstep's Foundation and
  tools/metal_api/Metal/Metal.h (tools/metal_syntax_check.sh). On macOS the module build itself
  compiles them against Apple's SDK, so there the check is skipped.
- The embedded shader library (cmake/EmbedShaders.cmake) is one self-contained source per shader
  family (shaders/<family>.metal, compiled by Metal as a library of its own): no include of our own
  headers, together every kernel of every .metal file and every kernel the op encoders name, each
  family exactly its file's kernels, function constant indices unique within a family, and each
  family compiles as a translation unit of its own through the MSL executor's shim.

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


@pytest.mark.skipif(sys.platform == "darwin",
                    reason="on macOS the module build compiles the .mm files with Apple's SDK")
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
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each family's embedded source, read back from the generated C++ (so its literal is checked too)."""
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
        "#include <cstring>\n"
        '#include "metal/apple/embedded_shaders.h"\n'
        "int main(int argc, char** argv) {\n"
        "    for (size_t i = 0; i < mb::metal::kMetalShaderFamilyCount; ++i) {\n"
        "        const auto& f = mb::metal::kMetalShaderFamilies[i];\n"
        "        if (argc == 1) std::printf(\"%s\\n\", f.name);\n"
        "        else if (std::strcmp(argv[1], f.name) == 0) return std::fputs(f.source, stdout) < 0;\n"
        "    }\n"
        "    return argc == 1 ? 0 : 2;\n"
        "}\n"
    )
    exe = out / "dump"
    subprocess.run([_cxx(), "-std=c++17", "-I", str(ROOT / "src"), str(main), str(cpp), "-o", str(exe)], check=True,
                   timeout=300)
    names = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    sources = {}
    for name in names:
        source = out / f"{name}.library.metal"
        source.write_text(subprocess.run([str(exe), name], check=True, capture_output=True, text=True).stdout)
        sources[name] = source
    return sources


def test_one_library_per_shader_file(libraries):
    assert sorted(libraries) == sorted(p.stem for p in SHADERS.glob("*.metal"))


def _kernel_names(path: Path) -> set[str]:
    src = mp.load(str(path))
    names = {inst.host_name for inst in mp.instantiations(src)}
    for block in src.blocks:
        if block.kind == "kernel" and not block.is_template:
            k = mp.parse_kernel(src, block)
            names.add(k.host_name or k.name)
    return names


def test_library_includes_none_of_our_headers(libraries):
    ours = {p.name for p in SHADERS.iterdir()}
    for family, path in libraries.items():
        text = path.read_text()
        included = re.findall(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', text, re.M)
        assert included, f"{family}: expected the system includes (<metal_stdlib>) to stay"
        assert not [name for name in included if os.path.basename(name) in ours], family
        assert not re.search(r'^[ \t]*#[ \t]*include[ \t]*"', text, re.M), family
        assert not re.search(r"^[ \t]*#[ \t]*pragma[ \t]+once", text, re.M), family
        for header in ("kargs.h", "quants.h", "quant_blocks.h", "block_reduce.h"):
            assert text.count(f'#line 1 "{header}"') <= 1, (family, header)  # inlined at most once
        assert "msl_shim" not in text
    assert libraries["mul_mat"].read_text().count('#line 1 "kargs.h"') == 1


def test_library_holds_every_kernel(libraries):
    for family, path in libraries.items():
        assert _kernel_names(path) == _kernel_names(SHADERS / f"{family}.metal"), family
    assert all(_kernel_names(path) for path in libraries.values())


def test_library_holds_every_kernel_the_encoders_name(libraries):
    names = set().union(*(_kernel_names(path) for path in libraries.values()))
    literals = set()
    for cpp in sorted((ROOT / "src" / "metal").rglob("*.cpp")):
        literals |= set(re.findall(r'"(kernel_\w*)"', cpp.read_text()))
    assert literals
    # A literal ending in "_" is the stem of a name the encoder completes (kernel_cpy_ + types).
    missing = [lit for lit in sorted(literals) if not (lit in names if not lit.endswith("_") else
                                                        any(n.startswith(lit) for n in names))]
    assert not missing, f"kernels the encoders ask for but the library lacks: {missing}"


def test_function_constant_indices_are_unique_in_each_library(libraries):
    # A library holds its family's function constants; Metal matches constant values by index, so two
    # constants sharing an index in one library is a trap.
    constants = 0
    for family, path in libraries.items():
        text = path.read_text()
        defines = dict(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\d+)[ \t]*$", text, re.M))
        by_index: dict[int, list[str]] = {}
        for fc in mp.function_constants(mp.load(str(path))):
            expr = re.sub(r"[A-Za-z_]\w*", lambda m: defines.get(m.group(0), m.group(0)), fc.index_expr)
            assert re.fullmatch(r"[\d\s()+*-]+", expr), f"cannot evaluate the index of {fc.name}: {fc.index_expr}"
            by_index.setdefault(eval(expr), []).append(fc.name)  # digits and + - * ( ) only
        shared = {i: names for i, names in by_index.items() if len(names) > 1}
        assert not shared, f"{family}: function constant indices used more than once: {shared}"
        constants += len(by_index)
    assert constants


def test_each_library_compiles_as_a_translation_unit(libraries, tmp_path):
    # The MSL executor's generator and shim compile each family's library as C++: a name defined
    # twice in one (a header's two copies) fails here as it would in Apple's compiler.
    cxx = _cxx()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    flags = (["-Wno-unknown-attributes", "-Xclang", "-ffloat16-excess-precision=none"] if "clang" in version
             else ["-Wno-attributes"])
    for family, path in libraries.items():
        gen = tmp_path / f"{family}.metal.cpp"
        subprocess.run(
            [sys.executable, str(ROOT / "tools" / "metalsim" / "metal_sim_gen.py"), str(path), "-o", str(gen), "-I",
             str(SHADERS)],
            check=True, timeout=300,
        )
        proc = subprocess.run(
            [cxx, "-std=c++17", "-fsyntax-only", *flags, "-fsigned-char", "-fno-strict-aliasing", "-fwrapv",
             "-I", str(SHADERS), "-I", str(ROOT / "src"), str(gen)],
            capture_output=True, text=True, timeout=600,
        )
        assert proc.returncode == 0, family + ": " + proc.stderr[-6000:]
