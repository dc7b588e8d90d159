#!/usr/bin/env python3
"""Turns a .metal file into a C++ source that the MSL executor can run.

    metal_sim_gen.py shaders/foo.metal -o build/foo.metal.cpp [-I dir ...] [--depfile f.d]

The output includes src/metal/sim/msl_shim.h, then the .metal text rewritten line for line
(so compiler messages and __builtin_LINE() name .metal lines), then a table that
registers every kernel with the executor (src/metal/sim/kernel_abi.h):
  - `template [[host_name("x")]] kernel T f<args>;` lines are blanked; each becomes
    a kernel named x that calls f<args>; plain `kernel void f(...)` definitions are
    registered under f (or their [[host_name]])
  - kernel parameter attributes are removed (so that [[threadgroup(N)]] survives the
    `threadgroup` macro) and become bindings: [[buffer(N)]] -> buffer slot N,
    [[threadgroup(N)]] -> threadgroup slot N, position attributes -> the thread's ids
  - `constant T x [[function_constant(i)]];` becomes a global the executor sets per
    dispatch, plus x_mbsim_defined for is_function_constant_defined(x)
  - half literals (1.0h) become half(1.0f)
  - a kernel that can never reach a barrier, simd_* or simdgroup matrix operation
    (name-based, through the functions and macros of the file and its local headers)
    is marked so that its threads run as a plain loop, without fibers
  - compiled with MB_SIM_RACECHECK defined (cmake/MetalSimKernels.cmake's racecheck build, instrumented
    with -fsanitize=thread), everything after src/metal/sim/racecheck_prelude.h is inside namespace
    mbsim_racecheck and the kernels register as racecheck kernels (src/metal/sim/racecheck.h); nothing
    per kernel, so every .metal file gets a racecheck build
"""

from __future__ import annotations

import argparse
import os
import sys

import msl_parse as mp

SHIM = "msl_shim.h"


def bindings(path: str, kernel: mp.Kernel) -> list[str]:
    out = []
    for p in kernel.params:
        names = [a.name for a in p.attributes]
        optional = "function_constant" in names
        kinds = [a for a in p.attributes if a.name != "function_constant"]
        if len(kinds) != 1:
            raise mp.SourceError(path, p.line, f"kernel parameter '{p.text}' needs exactly one binding attribute")
        a = kinds[0]
        if a.name == "buffer":
            out.append(f"Buffer<{a.arg}, true>" if optional else f"Buffer<{a.arg}>")
        elif a.name == "threadgroup":
            out.append(f"Threadgroup<{a.arg}>")
        elif a.name in mp.BUILTIN_ATTRIBUTES and a.arg is None:
            out.append(mp.BUILTIN_ATTRIBUTES[a.name])
        else:
            raise mp.SourceError(path, p.line, f"unsupported kernel parameter attribute [[{a.name}]]")
    return out


def c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def keep_lines(old: str, new: str) -> str:
    """new, padded with the newlines of old so that line numbers do not move."""
    return new + "\n" * (old.count("\n") - new.count("\n"))


def generate(path: str, include_dirs: list[str]) -> tuple[str, list[str]]:
    """Returns (C++ source, files read)."""
    path = os.path.abspath(path)
    sources = mp.load_with_includes(path, include_dirs, skip={SHIM})
    src = sources[0]
    graph = mp.Graph(sources)
    edits: list[tuple[int, int, str]] = []

    for a, b in mp.directive_spans(src.masked):
        if src.text[a:b].lstrip().startswith("#") and "<metal_" in src.text[a:b] and "include" in src.text[a:b]:
            edits.append((a, b, ""))

    constants = mp.function_constants(src)
    fc_index = {fc.name: i for i, fc in enumerate(constants)}
    for fc in constants:
        a, b = fc.span
        decl = f"static {fc.type} {fc.name}; static bool {fc.name}_mbsim_defined;"
        edits.append((a, b, keep_lines(src.text[a:b], decl)))

    insts = mp.instantiations(src)
    for inst in insts:
        a, b = inst.span
        edits.append((a, b, keep_lines(src.text[a:b], "")))

    kernels = {}
    for block in src.blocks:
        if block.kind != "kernel":
            continue
        k = mp.parse_kernel(src, block)
        for p in k.params:
            for a, b in p.attr_spans:
                edits.append((a, b, keep_lines(src.text[a:b], "")))
        for a, b in k.header_attr_spans:
            edits.append((a, b, keep_lines(src.text[a:b], "")))
        kernels.setdefault(k.name, []).append(k)

    for m in mp.HALF_LITERAL.finditer(src.code):
        edits.append((m.start(), m.end(), f"static_cast<half>({m.group(1)}f)"))

    # (host name, function expression, kernel, extra identifiers, line)
    entries: list[tuple[str, str, mp.Kernel, set[str], int]] = []
    for inst in insts:
        defs = [k for k in kernels.get(inst.function, []) if k.block.is_template]
        if len(defs) != 1:
            raise mp.SourceError(
                path,
                inst.line,
                f"no single kernel template named {inst.function} in this file (define kernels in .metal files)",
            )
        extra = set(mp.IDENT.findall(inst.template_args))
        entries.append((inst.host_name, inst.expr, defs[0], extra, inst.line))
    for name, defs in kernels.items():
        for k in defs:
            if not k.block.is_template:
                entries.append((k.host_name or k.name, k.name, k, set(), mp.line_of(src.code, k.block.start)))

    seen: dict[str, int] = {}
    for host, _, _, _, line in entries:
        if host in seen:
            raise mp.SourceError(path, line, f"kernel name {host} already used at line {seen[host]}")
        seen[host] = line

    text = src.text
    last = -1
    for a, b, new in sorted(edits, key=lambda e: e[0]):
        if a < last:
            raise mp.SourceError(path, mp.line_of(text, a), "overlapping rewrites (unsupported construct)")
        last = b
    for a, b, new in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:a] + new + text[b:]

    gen_name = os.path.basename(path) + ".cpp"
    out = [
        f"// Generated by tools/metalsim/metal_sim_gen.py from {os.path.basename(path)}; do not edit.",
        # The racecheck build of the same kernels (MB_SIM_RACECHECK: compiled once more with memory
        # accesses instrumented, src/metal/sim/racecheck.h): everything inside a namespace of its
        # own, so that no inline function or template of one build stands in for the other's.
        "#if defined(MB_SIM_RACECHECK)",
        '#include "metal/sim/racecheck_prelude.h"',
        "namespace mbsim_racecheck {",
        "namespace mb::sim { namespace abi = ::mb::sim::abi; }",
        "#endif",
        f'#include "metal/sim/{SHIM}"',
        f'#line 1 {c_string(path)}',
        text if text.endswith("\n") else text + "\n",
    ]
    # "#line N" numbers the line after it; it is itself line (lines so far + 1).
    lines_so_far = "\n".join(out).count("\n") + 1
    out.append(f"#line {lines_so_far + 2} {c_string(gen_name)}")
    out += [
        "#undef kernel",
        "#undef device",
        "#undef thread",
        "#undef threadgroup",
        "#undef constant",
        "#undef is_function_constant_defined",
        "#if defined(MB_SIM_RACECHECK)",
        "#define MB_SIM_RACECHECK_BUILD true",
        "#else",
        "#define MB_SIM_RACECHECK_BUILD false",
        "#endif",
        "namespace {",
        "using namespace mb::sim::bind;",
    ]
    if constants:
        out.append("const mb::sim::abi::FcDecl mbsim_constants[] = {")
        for fc in constants:
            out.append(
                f"    function_constant(static_cast<uint32_t>({fc.index_expr}), {c_string(fc.name)}, "
                f"&{fc.name}, &{fc.name}_mbsim_defined),"
            )
        out.append("};")
    else:
        out.append("const mb::sim::abi::FcDecl* const mbsim_constants = nullptr;")

    rows = []
    for i, (host, expr, k, extra, line) in enumerate(entries):
        binds = bindings(path, k)
        body_fc = graph.reachable_idents(k.block.fc_idents | extra, fc_only=True)
        required = sorted(fc_index[n] for n in body_fc if n in fc_index)
        may_sync = graph.may_sync(graph.reachable_idents(k.block.idents | extra))
        if required:
            out.append(f"const uint16_t mbsim_required_{i}[] = {{{', '.join(map(str, required))}}};")
            req = f"mbsim_required_{i}, {len(required)}"
        else:
            req = "nullptr, 0"
        targs = ", ".join([f"&{expr}"] + binds)
        rows.append(
            f"    make_kernel<{targs}>({c_string(host)}, {c_string(os.path.basename(path))}, "
            f"{'true' if may_sync else 'false'}, {k.max_threads or 1024}, mbsim_constants, {len(constants)}, {req}),"
        )
    if rows:
        out.append("const mb::sim::abi::KernelInfo mbsim_kernels[] = {")
        out.extend(rows)
        out.append("};")
        out.append(
            "[[maybe_unused]] const int mbsim_registered = "
            f"(mb::sim::abi::register_kernels(mbsim_kernels, {len(rows)}, MB_SIM_RACECHECK_BUILD), 0);"
        )
    out.append("}  // namespace")
    out.append("#if defined(MB_SIM_RACECHECK)")
    out.append("}  // namespace mbsim_racecheck")
    out.append("#endif")
    return "\n".join(out) + "\n", [s.path for s in sources]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("-I", dest="include_dirs", action="append", default=[])
    ap.add_argument("--depfile")
    args = ap.parse_args(argv)
    try:
        code, deps = generate(args.input, [os.path.abspath(d) for d in args.include_dirs])
    except mp.SourceError as e:
        print(f"{e}", file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(code)
    if args.depfile:
        with open(args.depfile, "w", encoding="utf-8") as f:
            f.write(args.output.replace(" ", "\\ ") + ": " + " ".join(d.replace(" ", "\\ ") for d in deps) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
