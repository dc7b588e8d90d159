"""The source layout's one hard rule: the Metal device is split at the runtime wall (src/metal/runtime.h).

Above the wall (src/metal/*.cpp|h and src/metal/ops/) is portable C++ that decides what the GPU does;
below it, src/metal/apple/ (real Metal) and src/metal/sim/ (the MSL executor) implement runtime.h.
Only runtime.h is included across the wall. The one place a runtime meets the device built over it is
a registry file (apple/metal_registry.mm, sim/metalsim_registry.cpp), which may also include
metal_device.h. Shaders include only their own headers, never src/.

The includes are read as text, so this runs without a build.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
BELOW = ("metal/apple/", "metal/sim/")
REGISTRIES = {"metal/apple/metal_registry.mm", "metal/sim/metalsim_registry.cpp"}
INCLUDE = re.compile(r'^\s*#\s*(?:include|import)\s*"([^"]+)"', re.M)


def includes(path: Path) -> list[str]:
    return INCLUDE.findall(path.read_text(encoding="utf-8"))


def sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in {".cpp", ".h", ".mm", ".metal"})


def below(rel: str) -> str | None:
    return next((side for side in BELOW if rel.startswith(side)), None)


def test_the_tree_has_both_sides_of_the_wall():
    for folder in ("metal/ops", "metal/apple", "metal/sim"):
        assert any((SRC / folder).iterdir()), folder
    assert (SRC / "metal/runtime.h").is_file()


def crossings(src: Path) -> list[str]:
    """Each include under `src` that crosses the wall other than through runtime.h."""
    found = []
    for path in sources(src):
        rel = path.relative_to(src).as_posix()
        side = below(rel)
        for inc in includes(path):
            if not inc.startswith("metal/"):
                continue  # core/, cpu/, kargs.h: not the Metal device's own files
            inc_side = below(inc)
            if side is None:
                ok = inc_side is None  # above the wall (or core/cpu/bindings): never below it
            elif inc_side is not None:
                ok = inc_side == side  # below: its own folder, never the other runtime's
            else:
                ok = inc == "metal/runtime.h" or (rel in REGISTRIES and inc == "metal/metal_device.h")
            if not ok:
                found.append(f"{rel} includes {inc}")
    return found


def test_only_runtime_h_is_included_across_the_wall():
    found = crossings(SRC)
    assert not found, "includes across the runtime wall:\n" + "\n".join(found)


def test_shaders_include_only_shader_headers():
    shaders = ROOT / "shaders"
    own = {p.name for p in shaders.iterdir()}
    bad = [f"{p.name} includes {inc}" for p in sources(shaders) for inc in includes(p) if inc not in own]
    assert not bad, bad


def test_the_rule_catches_each_kind_of_crossing(tmp_path):
    files = {
        "metal/metal_backend.cpp": '#include "metal/runtime.h"\n#include "metal/sim/executor.h"\n',
        "metal/ops/binary.cpp": '#include "metal/ops/ops.h"\n#include "metal/apple/runtime_metal.h"\n',
        "metal/sim/runtime_sim.cpp": '#include "metal/runtime.h"\n#include "metal/ops/ops.h"\n',
        "metal/apple/runtime_metal.mm": '#import "metal/sim/fiber.h"\n',
        "metal/sim/metalsim_registry.cpp": '#include "metal/metal_device.h"\n#include "metal/sim/runtime_sim.h"\n',
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert crossings(tmp_path) == [
        "metal/apple/runtime_metal.mm includes metal/sim/fiber.h",
        "metal/metal_backend.cpp includes metal/sim/executor.h",
        "metal/ops/binary.cpp includes metal/apple/runtime_metal.h",
        "metal/sim/runtime_sim.cpp includes metal/ops/ops.h",
    ]


def test_every_kargs_field_has_its_offset_asserted():
    # shaders/kargs_layout.h, generated from kargs.h by tools/kargs_layout.py, pins the size of each
    # args struct and the offset of each field; kargs.h includes it, so the host compiler and Apple's
    # Metal compiler both check it. A struct or field added without regenerating is caught here.
    kargs = (ROOT / "shaders" / "kargs.h").read_text()
    layout = (ROOT / "shaders" / "kargs_layout.h").read_text()
    assert '#include "kargs_layout.h"' in kargs
    structs = re.findall(r"typedef struct \{(.*?)\} (mb_kargs_\w+);", kargs, re.S)
    assert len(structs) >= 15
    missing = []
    for body, name in structs:
        if f"MB_KARGS_SIZE({name}, " not in layout:
            missing.append(f"sizeof({name})")
        for decl in re.sub(r"//[^\n]*", "", body).split(";"):
            if not decl.strip():
                continue
            for field in decl.strip().split(None, 1)[1].split(","):
                field = re.match(r"\s*(\w+)", field).group(1)
                if f"MB_KARGS_AT({name}, {field}, " not in layout:
                    missing.append(f"{name}.{field}")
    assert not missing, missing
    fresh = subprocess.run([sys.executable, str(ROOT / "tools" / "kargs_layout.py"), "--check"],
                           capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stderr
