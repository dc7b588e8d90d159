#!/usr/bin/env python3
"""Compiles every shaders/*.metal file with the MSL address spaces kept apart, as Apple's compiler
keeps them, so that a kernel passing a pointer from one address space to another fails here and
not first on a Mac.

    strict_compile.py [--clang CLANG] [-j N] [FILE.metal ...]

Each file goes through tools/metalsim/metal_sim_gen.py as for the MetalSim build, then clang
checks it (-fsyntax-only, nothing is built) with MB_MSL_STRICT_ADDRESS_SPACES, under which
src/metal/sim/msl_shim.h makes `device`, `constant` and `threadgroup` distinct clang address
spaces (`thread` is the default one). Clang then rejects, as Apple's compiler does:
  - a pointer or reference converted implicitly between address spaces (a device pointer passed
    where a thread one is expected, a threadgroup pointer assigned to a device one, ...)
  - a write through a `constant` pointer or reference
  - an explicit pointer cast from one address space to another
  - atomics and simdgroup matrix loads and stores on memory that MSL does not allow for them, and
    [[buffer(N)]] / [[threadgroup(N)]] kernel parameters outside device or constant / threadgroup

The .metal files and their headers are read through copies in a temporary folder in which every
struct gets MB_SIM_STRUCT_MEMBERS (copy from and assignment in every address space, as MSL copies
structs) and the operand of every pointer cast `(T *) x` goes through mb::sim::msl::same_space<T *>
(C++ casts convert address spaces silently; MSL allows no such cast). Lines do not move, and
diagnostics name the original files. Casts written inside #define bodies are not rewritten.

Exit status: 0 clean, 1 diagnostics, 2 clang missing or too old. CLANG=... overrides the compiler.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

import metal_sim_gen
import msl_parse as mp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHADERS = os.path.join(ROOT, "shaders")
SRC = os.path.join(ROOT, "src")

FLAGS = [
    "-std=c++23",  # explicit object parameters (`this Self&`): members callable in every address space
    "-fsyntax-only",
    "-DMB_MSL_STRICT_ADDRESS_SPACES",
    "-Wno-unknown-attributes",
    "-Xclang",
    "-ffloat16-excess-precision=none",
    "-fsigned-char",
    "-fno-strict-aliasing",
    "-fwrapv",
    "-fno-diagnostics-color",
]

STRUCT = re.compile(r"\b(typedef\s+)?struct\s+(?:([A-Za-z_]\w*)\s*)?\{")


def with_struct_members(text: str) -> str:
    """text with MB_SIM_STRUCT_MEMBERS(name) before the closing brace of every named struct (an
    anonymous `typedef struct {...} name;` is given its typedef name as tag); no line moves."""
    masked = mp.blank_spans(mp.mask(text), mp.directive_spans(mp.mask(text)))
    edits: list[tuple[int, str]] = []
    for m in STRUCT.finditer(masked):
        close = mp.matching(masked, m.end() - 1)
        if close < 0:
            continue
        name = m.group(2)
        if name is None:
            after = re.match(r"\s*([A-Za-z_]\w*)\s*;", masked[close + 1 :])
            if not m.group(1) or not after:
                continue  # an unnamed struct type of a variable: nothing copies it by name
            name = after.group(1)
            edits.append((m.end() - 1, f"{name} "))
        edits.append((close, f" MB_SIM_STRUCT_MEMBERS({name}) "))
    for pos, new in sorted(edits, reverse=True):
        text = text[:pos] + new + text[pos:]
    return text


# A parenthesised pointer type, `(device const T *)`, `(threadgroup char*)`, `(float *)`, followed by
# the start of an operand: a C-style cast unless a name (a call, sizeof) or a bracket precedes it.
POINTER_CAST = re.compile(
    r"\(\s*((?:[A-Za-z_][\w:]*(?:\s*<[^()<>;]*>)?\s+)*[A-Za-z_][\w:]*(?:\s*<[^()<>;]*>)?\s*\*+)\s*\)(?=\s*[A-Za-z_(&])"
)
# Words after which a parenthesis starts an expression, not a call's arguments.
EXPRESSION_KEYWORDS = frozenset({"return", "case", "else", "do"})


def with_checked_casts(text: str) -> str:
    """text with `(T *) x` rewritten as `(T *) (mb::sim::msl::same_space<T *>) x`; no line moves."""
    masked = mp.blank_spans(mp.mask(text), mp.directive_spans(mp.mask(text)))
    edits = []
    for m in POINTER_CAST.finditer(masked):
        before = masked[: m.start()].rstrip()
        word = re.search(r"\w+$", before)
        if before.endswith((")", "]")) or (word and word.group(0) not in EXPRESSION_KEYWORDS):
            continue
        type_text = " ".join(text[m.start(1) : m.end(1)].split())
        edits.append((m.end(), f" (mb::sim::msl::same_space<{type_text}>)"))
    for pos, new in sorted(edits, reverse=True):
        text = text[:pos] + new + text[pos:]
    return text


def prepare(shader_dir: str, out_dir: str) -> None:
    """Copies the .metal files and headers of shader_dir into out_dir, structs and casts rewritten."""
    for name in sorted(os.listdir(shader_dir)):
        if name.endswith((".metal", ".h")):
            with open(os.path.join(shader_dir, name), encoding="utf-8") as f:
                text = f.read()
            with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
                f.write(with_checked_casts(with_struct_members(text)))


def clang_version(clang: str) -> int | None:
    """The major version of clang at that path, or None when it is missing or not clang."""
    try:
        out = subprocess.run([clang, "--version"], capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return None
    m = re.search(r"clang version (\d+)", out)
    return int(m.group(1)) if m else None


def check(clang: str, metal: str, work: str, shader_dir: str) -> tuple[bool, str]:
    """(clean, diagnostics) of one .metal file; work holds the rewritten copies of shader_dir."""
    name = os.path.basename(metal)
    try:
        code, _ = metal_sim_gen.generate(os.path.join(work, name), [work])
    except mp.SourceError as e:
        return False, str(e).replace(work, shader_dir) + "\n"
    cpp = os.path.join(work, name + ".cpp")
    with open(cpp, "w", encoding="utf-8") as f:
        f.write(code)
    proc = subprocess.run(
        [clang, *FLAGS, "-I", work, "-I", SRC, cpp], capture_output=True, text=True, timeout=600
    )
    return proc.returncode == 0, (proc.stdout + proc.stderr).replace(work + os.sep, shader_dir + os.sep)


def main(argv: list[str]) -> int:
    """Checks the files named in argv (or every shaders/*.metal); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="the .metal files (default: every shaders/*.metal)")
    ap.add_argument(
        "--clang", default=os.environ.get("CLANG") or shutil.which("clang-19") or shutil.which("clang") or "clang-19"
    )
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)

    version = clang_version(args.clang)
    if version is None or version < 18:
        # Explicit object parameters (deducing this) arrived in clang 18.
        print(f"strict_compile: needs clang >= 18 (apt-get install clang-19); {args.clang}: "
              f"{'not found' if version is None else f'version {version}'}", file=sys.stderr)
        return 2

    files = [os.path.abspath(f) for f in args.files] or [
        os.path.join(SHADERS, n) for n in sorted(os.listdir(SHADERS)) if n.endswith(".metal")
    ]
    dirs = {os.path.dirname(f) for f in files}
    if len(dirs) != 1:
        print("strict_compile: give .metal files of one folder", file=sys.stderr)
        return 2
    shader_dir = dirs.pop()

    with tempfile.TemporaryDirectory(prefix="msl_strict_") as work:
        prepare(shader_dir, work)
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            results = list(pool.map(lambda f: check(args.clang, f, work, shader_dir), files))
    status = 0
    for f, (clean, out) in zip(files, results):
        print(f"== {os.path.relpath(f, ROOT) if f.startswith(ROOT) else f}: {'clean' if clean else 'FAILED'}")
        if out:
            print(out, end="" if out.endswith("\n") else "\n")
        if not clean:
            status = 1
    print(f"strict_compile: {sum(c for c, _ in results)} of {len(files)} files clean")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
