#!/usr/bin/env python3
"""Keeps .metal kernels in the portable subset that both Apple's compiler and the MSL
executor (src/metal/sim/msl_shim.h, tools/metalsim/metal_sim_gen.py) accept with the same meaning.

    metal_lint.py [FILE.metal | DIR ...] [-I DIR ...]      (default: shaders/)

Prints file:line: message for each problem; exit status 1 if there is any. A line
containing "metal-lint: ignore" is exempt, and so is host-only code of shared headers
(#ifndef __METAL_VERSION__). Checks the .metal files and the local headers they include:
  - no double (and no unsuffixed floating literal: 1.0 is a double in C++)
  - no std::, no C library or C++ runtime constructs (printf, malloc, new, throw, ...)
  - no recursion (direct or through other functions)
  - no threadgroup variable declared inside a function body
  - no multi-letter swizzles (v.xy, v.rgb)
  - no unsupported builtins (thread_elements, quad_*)
  - system includes only <metal_*> in .metal files
  - kernel parameters: one known binding attribute each; pointers and references in
    the device, constant or threadgroup address space; [[threadgroup(N)]] a pointer
  - function constants declared in .metal files only, and no program-scope constant
    computed from one (a C++ global would be initialised once, before any dispatch)
  - everything tools/metalsim/metal_sim_gen.py needs to read (instantiations, attributes)
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import metal_sim_gen as gen
import msl_parse as mp

SKIP_HEADERS = {"msl_shim.h"}

FORBIDDEN_WORDS = {
    "double": "double is not supported by Metal",
    "printf": "printf is not available in MSL",
    "malloc": "no dynamic allocation in MSL",
    "free": None,  # common word: only flagged as a call, see below
    "new": "no dynamic allocation in MSL",
    "delete": "no dynamic allocation in MSL",
    "throw": "no exceptions in MSL",
    "try": "no exceptions in MSL",
    "catch": "no exceptions in MSL",
    "virtual": "no virtual functions in MSL",
    "dynamic_cast": "no RTTI in MSL",
    "typeid": "no RTTI in MSL",
    "thread_local": "not MSL",
    "thread_elements": "thread_elements() is not supported by the executor (each simdgroup matrix lives in lane 0)",
}
FORBIDDEN_CALLS = {
    "memcpy": "memcpy is not available in MSL",
    "memset": "memset is not available in MSL",
    "free": "no dynamic allocation in MSL",
    "erf": "MSL has no erf; write an approximation",
    "erff": "MSL has no erf; write an approximation",
}

FLOAT_LITERAL = re.compile(r"(?<![\w.])(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?(?![\w.])|(?<![\w.])\d+[eE][+-]?\d+(?![\w.])")
SWIZZLE = re.compile(r"\.\s*(?:[xyzw]{2,4}|[rgba]{2,4})\b")
THREADGROUP_VAR = re.compile(r"\bthreadgroup\s+([^;=(){}\[\]]*?)\b([A-Za-z_]\w*)\s*(\[|;|=|\{)")
ADDRESS_SPACE = re.compile(r"\b(device|constant|threadgroup)\b")


METAL_IF = re.compile(r"#\s*(?:ifdef\s+__METAL_VERSION__|if\s+defined\s*\(?\s*__METAL_VERSION__)")
HOST_IF = re.compile(r"#\s*(?:ifndef\s+__METAL_VERSION__|if\s+!\s*defined\s*\(?\s*__METAL_VERSION__)")
_host_only_cache: dict[str, set[int]] = {}


def host_only_lines(src: mp.Source) -> set[int]:
    """Lines that Apple's compiler never sees: #ifndef __METAL_VERSION__ blocks and the
    #else of #ifdef __METAL_VERSION__ (a header shared with the host, like kargs.h)."""
    if src.path in _host_only_cache:
        return _host_only_cache[src.path]
    out: set[int] = set()
    stack: list[tuple[str, bool]] = []  # (kind, host-only now) per #if level
    for i, raw in enumerate(src.masked.split("\n"), start=1):
        d = raw.strip()
        if d.startswith("#"):
            if HOST_IF.match(d):
                stack.append(("host", True))
            elif METAL_IF.match(d):
                stack.append(("metal", False))
            elif re.match(r"#\s*if", d):
                stack.append(("other", False))
            elif re.match(r"#\s*else", d) and stack:
                kind, host = stack[-1]
                stack[-1] = (kind, not host if kind != "other" else host)
            elif re.match(r"#\s*endif", d) and stack:
                stack.pop()
        if any(host for _, host in stack):
            out.add(i)
    _host_only_cache[src.path] = out
    return out


class Linter:
    def __init__(self, include_dirs: list[str]):
        self.include_dirs = include_dirs
        self.messages: list[tuple[str, int, str]] = []
        self.done: set[str] = set()

    def report(self, src: mp.Source, pos_or_line: int, message: str, is_line: bool = False) -> None:
        line = pos_or_line if is_line else mp.line_of(src.text, pos_or_line)
        lines = src.text.split("\n")
        if 0 < line <= len(lines) and "metal-lint: ignore" in lines[line - 1]:
            return
        if line in host_only_lines(src):
            return
        self.messages.append((src.path, line, message))

    def lint_file(self, path: str) -> None:
        path = os.path.abspath(path)
        try:
            sources = mp.load_with_includes(path, self.include_dirs, skip=SKIP_HEADERS)
        except mp.SourceError as e:
            self.messages.append((e.path, e.line, e.message))
            return
        except OSError as e:
            self.messages.append((path, 0, str(e)))
            return
        graph = mp.Graph(sources)
        for src in sources:
            if src.path in self.done:
                continue
            self.done.add(src.path)
            self.lint_source(src, is_metal=src.path == path)
        self.lint_recursion(sources)
        try:
            gen.generate(path, self.include_dirs)
        except mp.SourceError as e:
            self.messages.append((e.path, e.line, e.message))
        self.lint_kernels(sources[0])
        self.lint_constants(sources, graph)

    def lint_source(self, src: mp.Source, is_metal: bool) -> None:
        code = src.code
        for m in re.finditer(r"\b[A-Za-z_]\w*\b", code):
            word = m.group(0)
            msg = FORBIDDEN_WORDS.get(word)
            if msg:
                self.report(src, m.start(), msg)
            if word in FORBIDDEN_CALLS and re.match(r"\s*\(", code[m.end() :]):
                self.report(src, m.start(), FORBIDDEN_CALLS[word])
            if word.startswith("quad_"):
                self.report(src, m.start(), f"{word}: quadgroup functions are not supported by the executor")
        for m in re.finditer(r"\bstd\s*::", code):
            self.report(src, m.start(), "std:: is not available in MSL")
        for m in FLOAT_LITERAL.finditer(src.masked):
            if not self.in_directive_condition(src, m.start()):
                self.report(src, m.start(), f"{m.group(0)} is a double in C++: write {m.group(0)}f (or h for half)")
        for m in SWIZZLE.finditer(code):
            self.report(src, m.start(),
                        f"swizzle '{m.group(0).strip()}' is not supported: use .x .y .z .w or a constructor")
        for b in src.blocks:
            if b.kind not in ("function", "kernel"):
                continue
            body = code[b.body_start : b.end + 1]
            for m in THREADGROUP_VAR.finditer(body):
                if "*" in m.group(1) or "&" in m.group(1):
                    continue
                self.report(
                    src,
                    b.body_start + m.start(),
                    f"threadgroup variable '{m.group(2)}' declared in a function body: "
                    "pass a [[threadgroup(N)]] buffer",
                )
        for a, b in mp.directive_spans(src.masked):
            d = src.text[a:b]
            m = re.match(r"[ \t]*#\s*include\s*<([^>]*)>", d)
            if m and is_metal and not m.group(1).startswith("metal_"):
                self.report(src, a, f"#include <{m.group(1)}>: only <metal_*> headers in .metal files")
        if not is_metal:
            for fc in mp.function_constants(src):
                self.report(src, fc.span[0],
                            f"function constant {fc.name} declared in a header: declare it in the .metal file")

    @staticmethod
    def in_directive_condition(src: mp.Source, pos: int) -> bool:
        line_start = src.masked.rfind("\n", 0, pos) + 1
        return bool(re.match(r"[ \t]*#\s*(if|elif|line|pragma)\b", src.masked[line_start:pos]))

    def lint_recursion(self, sources: list[mp.Source]) -> None:
        funcs: dict[str, list[tuple[mp.Source, mp.Block]]] = {}
        for src in sources:
            for b in src.blocks:
                if b.kind in ("function", "kernel") and b.name:
                    funcs.setdefault(b.name, []).append((src, b))
        # Only names with one non-template definition: overloads and templates calling
        # a namesake are usually different functions.
        unique = {n: v[0] for n, v in funcs.items() if len(v) == 1 and not v[0][1].is_template}
        edges = {n: sorted(x for x in b.idents if x in unique and not (x == n and b.kind == "kernel"))
                 for n, (_, b) in unique.items()}
        state: dict[str, int] = {}
        reported: set[str] = set()

        def visit(n: str, path: list[str]) -> None:
            state[n] = 1
            for m in edges[n]:
                if state.get(m) == 1:
                    cycle = path[path.index(m) :] + [m] if m in path else [n, m]
                    if m not in reported:
                        reported.add(m)
                        src, b = unique[m]
                        self.report(src, b.start + len(b.header) - len(b.header.lstrip()),
                                    "recursion: " + " -> ".join(cycle))
                elif state.get(m) is None:
                    visit(m, path + [m])
            state[n] = 2

        for n in sorted(unique):
            if n not in state:
                visit(n, [n])

    def lint_kernels(self, src: mp.Source) -> None:
        for b in src.blocks:
            if b.kind != "kernel":
                continue
            try:
                k = mp.parse_kernel(src, b)
            except mp.SourceError as e:
                self.messages.append((e.path, e.line, e.message))
                continue
            for p in k.params:
                decl = p.text
                for a, bb in p.attr_spans:
                    decl = decl.replace(src.code[a:bb], " ")
                is_indirect = "*" in decl or "&" in decl
                kinds = [a.name for a in p.attributes if a.name != "function_constant"]
                if is_indirect and not ADDRESS_SPACE.search(decl):
                    self.report(src, p.line,
                                f"kernel parameter '{' '.join(decl.split())}' needs an address space "
                                "(device, constant or threadgroup)", is_line=True)
                if "threadgroup" in kinds and "*" not in decl:
                    self.report(src, p.line, "[[threadgroup(N)]] parameters must be pointers", is_line=True)
                if "buffer" in kinds and not is_indirect:
                    self.report(src, p.line, "[[buffer(N)]] parameters must be pointers or references", is_line=True)

    def lint_constants(self, sources: list[mp.Source], graph: mp.Graph) -> None:
        src = sources[0]
        names = {fc.name for s in sources for fc in mp.function_constants(s)}
        if not names:
            return
        for m in re.finditer(r"\bconstant\s+[\w:<>, ]+?\s+([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*=\s*([^;]*);", src.code):
            used = set(mp.IDENT.findall(mp.FC_DEFINED.sub(" ", m.group(2))))
            used = graph.reachable_idents(used, fc_only=True) & names
            if used:
                self.report(
                    src,
                    m.start(),
                    f"program-scope constant {m.group(1)} is computed from function constant(s) "
                    f"{', '.join(sorted(used))}: compute it inside the kernel",
                )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*")
    ap.add_argument("-I", dest="include_dirs", action="append", default=[])
    args = ap.parse_args(argv)
    paths = args.paths or [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shaders")]
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".metal"))
        else:
            files.append(p)
    linter = Linter([os.path.abspath(d) for d in args.include_dirs])
    for f in files:
        linter.lint_file(f)
    seen = set()
    for path, line, message in sorted(linter.messages):
        key = (path, line, message)
        if key in seen:
            continue
        seen.add(key)
        print(f"{os.path.relpath(path)}:{line}: {message}")
    return 1 if linter.messages else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
