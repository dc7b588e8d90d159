"""A small, careful reader of the portable MSL subset (see src/metal/sim/msl_shim.h).

Shared by tools/metalsim/metal_sim_gen.py and tools/metalsim/metal_lint.py. It does not parse C++: it
masks comments and literals, finds top-level braced blocks (functions, kernels,
structs, initialisers; namespaces are entered), kernel parameter lists with their
attributes, `template [[host_name(...)]]` instantiations, function constant
declarations and #define macros. That is enough because kernels follow the subset.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

IDENT = re.compile(r"[A-Za-z_]\w*")

# Builtins after which a GPU thread may have to wait for others. Any identifier that
# starts with simd_ or quad_ counts too (conservatively: simd_vote as well).
SYNC_BUILTINS = frozenset(
    {
        "threadgroup_barrier",
        "simdgroup_barrier",
        "simdgroup_load",
        "simdgroup_store",
        "simdgroup_multiply",
        "simdgroup_multiply_accumulate",
    }
)

# Kernel parameter attribute -> binding type of mb::sim::bind (msl_shim.h).
BUILTIN_ATTRIBUTES = {
    "thread_position_in_grid": "ThreadPositionInGrid",
    "thread_position_in_threadgroup": "ThreadPositionInThreadgroup",
    "threadgroup_position_in_grid": "ThreadgroupPositionInGrid",
    "threads_per_threadgroup": "ThreadsPerThreadgroup",
    "dispatch_threads_per_threadgroup": "ThreadsPerThreadgroup",
    "threadgroups_per_grid": "ThreadgroupsPerGrid",
    "threads_per_grid": "ThreadsPerGrid",
    "thread_index_in_threadgroup": "ThreadIndexInThreadgroup",
    "thread_index_in_simdgroup": "ThreadIndexInSimdgroup",
    "simdgroup_index_in_threadgroup": "SimdgroupIndexInThreadgroup",
    "threads_per_simdgroup": "ThreadsPerSimdgroup",
    "thread_execution_width": "ThreadsPerSimdgroup",
    "simdgroups_per_threadgroup": "SimdgroupsPerThreadgroup",
}

FC_DEFINED = re.compile(r"\bis_function_constant_defined\s*\(\s*\w+\s*\)")


class SourceError(Exception):
    """A construct outside the supported subset, with its location."""

    def __init__(self, path: str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.message = message


def mask(text: str) -> str:
    """Blanks comments and the contents of string/char literals, keeping offsets and
    newlines, so that searches never match inside them."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if text[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def directive_spans(masked: str) -> list[tuple[int, int]]:
    """(start, end) of every preprocessor directive, continuation lines included."""
    spans = []
    for m in re.finditer(r"^[ \t]*#", masked, re.M):
        end = m.start()
        while True:
            nl = masked.find("\n", end)
            if nl < 0:
                end = len(masked)
                break
            if masked[nl - 1] == "\\":
                end = nl + 1
                continue
            end = nl
            break
        spans.append((m.start(), end))
    return spans


def blank_spans(masked: str, spans: list[tuple[int, int]]) -> str:
    out = list(masked)
    for a, b in spans:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def matching(masked: str, pos: int) -> int:
    """Index of the bracket closing the one at pos (-1 when unbalanced)."""
    pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
    open_c = masked[pos]
    close_c = pairs[open_c]
    depth = 0
    for i in range(pos, len(masked)):
        c = masked[i]
        if c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return i
    return -1


def split_top_level(text: str, offset: int = 0) -> list[tuple[str, int]]:
    """Splits at commas outside (), [], {} and <> (template arguments); returns
    (piece, absolute offset) pairs."""
    pieces, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "," and depth == 0:
            pieces.append((text[start:i], offset + start))
            start = i + 1
    if text[start:].strip():
        pieces.append((text[start:], offset + start))
    return pieces


@dataclass
class Block:
    kind: str  # "function", "kernel", "struct", "macro", "other"
    name: str | None
    names: set[str]
    start: int  # header start
    body_start: int  # the "{" (or the macro body)
    end: int  # the "}" (or end of the macro)
    header: str
    idents: set[str] = field(default_factory=set)
    fc_idents: set[str] = field(default_factory=set)  # without is_function_constant_defined(x)
    is_template: bool = False
    path: str = ""


def _idents(masked_body: str) -> tuple[set[str], set[str]]:
    all_ids = set(IDENT.findall(masked_body))
    fc_ids = set(IDENT.findall(FC_DEFINED.sub(" ", masked_body)))
    return all_ids, fc_ids


def _function_name(header: str) -> tuple[str | None, int]:
    """Name before the first parenthesis at depth 0 of a function header, skipping
    attributes and template parameter lists; returns (name, index of "(")."""
    depth_angle = 0
    i = 0
    while i < len(header):
        c = header[i]
        if header.startswith("[[", i):
            j = header.find("]]", i)
            i = len(header) if j < 0 else j + 2
            continue
        if c == "<":
            depth_angle += 1
        elif c == ">":
            depth_angle -= 1
        elif c == "(" and depth_angle == 0:
            m = re.search(r"([A-Za-z_]\w*)\s*$", header[:i])
            return (m.group(1) if m else None), i
        i += 1
    return None, -1


def parse_blocks(masked: str, path: str = "", lo: int = 0, hi: int | None = None) -> list[Block]:
    """Top-level blocks of masked[lo:hi] (directives must already be blanked)."""
    hi = len(masked) if hi is None else hi
    blocks: list[Block] = []
    seg = lo
    i = lo
    paren = 0
    while i < hi:
        c = masked[i]
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        elif c == ";" and paren == 0:
            seg = i + 1
        elif c == "{" and paren == 0:
            end = matching(masked, i)
            if end < 0:
                raise SourceError(path, line_of(masked, i), "unbalanced braces")
            header = masked[seg:i]
            h = header.strip()
            if re.search(r"(^|\s)namespace(\s+\w+)?\s*$", h):
                blocks.extend(parse_blocks(masked, path, i + 1, end))
            else:
                blocks.append(_make_block(masked, path, seg, i, end, header))
            i = end + 1
            seg = i
            continue
        i += 1
    return blocks


def _make_block(masked: str, path: str, start: int, body_start: int, end: int, header: str) -> Block:
    body = masked[body_start : end + 1]
    all_ids, fc_ids = _idents(body)
    h = header.strip()
    is_template = bool(re.match(r"template\s*<", h))
    sm = re.search(r"\b(struct|class|union|enum)\s+(?:\[\[[^\]]*\]\]\s*)?([A-Za-z_]\w*)[^()]*$", h)
    if sm:
        names = {sm.group(2)}
        for inner in parse_blocks(masked, path, body_start + 1, end):
            names |= inner.names
        return Block("struct", sm.group(2), names, start, body_start, end, header, all_ids, fc_ids, is_template, path)
    name, paren = _function_name(header)
    if name and paren >= 0:
        kind = "kernel" if re.search(r"\bkernel\b", header[:paren]) else "function"
        return Block(kind, name, {name}, start, body_start, end, header, all_ids, fc_ids, is_template, path)
    return Block("other", None, set(), start, body_start, end, header, all_ids, fc_ids, is_template, path)


def macro_blocks(masked: str, path: str = "") -> list[Block]:
    blocks = []
    for a, b in directive_spans(masked):
        m = re.match(r"[ \t]*#\s*define\s+([A-Za-z_]\w*)", masked[a:b])
        if m:
            body = masked[a + m.end() : b]
            all_ids, fc_ids = _idents(body)
            blocks.append(Block("macro", m.group(1), {m.group(1)}, a, a + m.end(), b, "", all_ids, fc_ids, False, path))
    return blocks


def local_includes(masked: str, text: str) -> list[tuple[str, int]]:
    """(name, line) of every #include "name"."""
    out = []
    for a, b in directive_spans(masked):
        m = re.match(r'[ \t]*#\s*include\s*"([^"]*)"', text[a:b])
        if m:
            out.append((m.group(1), line_of(text, a)))
    return out


def resolve_include(name: str, including: str, include_dirs: list[str]) -> str | None:
    for d in [os.path.dirname(os.path.abspath(including))] + include_dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return os.path.abspath(p)
    return None


@dataclass
class Source:
    """A .metal file or header: its text, masked text and top-level blocks."""

    path: str
    text: str
    masked: str  # comments and literals blanked
    code: str  # masked, directives blanked too
    blocks: list[Block]


def load(path: str) -> Source:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    masked = mask(text)
    code = blank_spans(masked, directive_spans(masked))
    blocks = parse_blocks(code, path) + macro_blocks(masked, path)
    return Source(path, text, masked, code, blocks)


def load_with_includes(path: str, include_dirs: list[str], skip: set[str] | None = None) -> list[Source]:
    """The file and, recursively, the local headers it includes (each once)."""
    skip = skip or set()
    seen: set[str] = set()
    out: list[Source] = []

    def visit(p: str) -> None:
        p = os.path.abspath(p)
        if p in seen:
            return
        seen.add(p)
        src = load(p)
        out.append(src)
        for name, line in local_includes(src.masked, src.text):
            if os.path.basename(name) in skip:
                continue
            q = resolve_include(name, p, include_dirs)
            if q is None:
                raise SourceError(p, line, f'#include "{name}" not found')
            visit(q)

    visit(path)
    return out


# ---------------------------------------------------------------- kernels


@dataclass
class Attribute:
    name: str
    arg: str | None


@dataclass
class KernelParam:
    text: str
    line: int
    attributes: list[Attribute]
    attr_spans: list[tuple[int, int]]  # absolute spans of the [[...]] to remove


@dataclass
class Kernel:
    name: str  # C++ function name
    host_name: str | None  # [[host_name("...")]] on a non-template definition
    block: Block
    params: list[KernelParam]
    max_threads: int | None
    header_attr_spans: list[tuple[int, int]]


def parse_attributes(inner: str) -> list[Attribute]:
    attrs = []
    for piece, _ in split_top_level(inner):
        piece = piece.strip()
        m = re.match(r"([A-Za-z_]\w*)\s*(?:\((.*)\))?\s*$", piece, re.S)
        if not m:
            attrs.append(Attribute(piece, None))
        else:
            attrs.append(Attribute(m.group(1), m.group(2).strip() if m.group(2) is not None else None))
    return attrs


def attribute_spans(masked: str, lo: int, hi: int) -> list[tuple[int, int]]:
    spans = []
    i = masked.find("[[", lo, hi)
    while i >= 0:
        j = masked.find("]]", i, hi)
        if j < 0:
            break
        spans.append((i, j + 2))
        i = masked.find("[[", j + 2, hi)
    return spans


def parse_kernel(src: Source, block: Block) -> Kernel:
    masked = src.code
    header_lo, header_hi = block.start, block.body_start
    header = masked[header_lo:header_hi]
    _, paren = _function_name(header)
    open_pos = header_lo + paren
    close_pos = matching(masked, open_pos)
    if close_pos < 0 or close_pos > header_hi:
        raise SourceError(src.path, line_of(masked, open_pos), f"cannot read the parameters of {block.name}")
    params = []
    for piece, off in split_top_level(masked[open_pos + 1 : close_pos], open_pos + 1):
        spans = attribute_spans(masked, off, off + len(piece))
        attrs: list[Attribute] = []
        for a, b in spans:
            attrs.extend(parse_attributes(masked[a + 2 : b - 2]))
        params.append(KernelParam(piece.strip(), line_of(masked, off + len(piece) - len(piece.lstrip())), attrs, spans))
    head_spans = attribute_spans(masked, header_lo, open_pos)
    host_name = None
    max_threads = None
    for a, b in head_spans:
        for attr in parse_attributes(masked[a + 2 : b - 2]):
            if attr.name == "host_name":
                m = re.search(r'"([^"]*)"', src.text[a:b])
                host_name = m.group(1) if m else None
            elif attr.name == "max_total_threads_per_threadgroup" and attr.arg:
                try:
                    max_threads = int(attr.arg, 0)
                except ValueError:
                    raise SourceError(
                        src.path, line_of(masked, a), "max_total_threads_per_threadgroup needs an integer literal"
                    ) from None
    return Kernel(block.name, host_name, block, params, max_threads, head_spans)


@dataclass
class Instantiation:
    host_name: str
    typedef: str
    function: str  # base name of the kernel template
    expr: str  # e.g. kernel_add<float>
    template_args: str
    line: int
    span: tuple[int, int]


INSTANTIATION = re.compile(
    r"\btemplate\s*\[\[\s*host_name\s*\(\s*\"[^\"\n]*\"\s*\)\s*\]\]\s*kernel\s+([A-Za-z_][\w:]*)\s+([^;]*);"
)
ANY_HOST_NAME_TEMPLATE = re.compile(r"\btemplate\s*\[\[\s*host_name\b")


def instantiations(src: Source) -> list[Instantiation]:
    out = []
    covered = set()
    for m in INSTANTIATION.finditer(src.code):
        expr = " ".join(m.group(2).split())
        fm = IDENT.match(expr)
        if not fm or "<" not in expr or not expr.endswith(">"):
            raise SourceError(src.path, line_of(src.code, m.start()), f"cannot read the instantiation '{expr}'")
        hm = re.search(r'host_name\s*\(\s*"([^"]*)"', src.text[m.start() : m.end()])
        args = expr[expr.index("<") + 1 : -1]
        out.append(Instantiation(hm.group(1), m.group(1), fm.group(0), expr, args, line_of(src.code, m.start()),
                                 (m.start(), m.end())))
        covered.add(m.start())
    for m in ANY_HOST_NAME_TEMPLATE.finditer(src.code):
        if m.start() not in covered:
            raise SourceError(
                src.path,
                line_of(src.code, m.start()),
                "instantiate kernels as: template [[host_name(\"name\")]] kernel <typedef> <kernel><args>;",
            )
    return out


@dataclass
class FunctionConstantDecl:
    type: str
    name: str
    index_expr: str
    line: int
    span: tuple[int, int]


FUNCTION_CONSTANT = re.compile(
    r"\bconstant\s+([A-Za-z_][\w:]*)\s+([A-Za-z_]\w*)\s*\[\[\s*function_constant\s*\((.*?)\)\s*\]\]\s*;", re.S
)


def function_constants(src: Source) -> list[FunctionConstantDecl]:
    return [
        FunctionConstantDecl(m.group(1), m.group(2), " ".join(m.group(3).split()), line_of(src.code, m.start()),
                             (m.start(), m.end()))
        for m in FUNCTION_CONSTANT.finditer(src.code)
    ]


HALF_LITERAL = re.compile(r"(?<![\w.])((?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)[hH](?![\w.])")


# ---------------------------------------------------------------- analyses


def is_sync_ident(name: str) -> bool:
    return name in SYNC_BUILTINS or name.startswith("simd_") or name.startswith("quad_")


class Graph:
    """Which names (functions, structs, macros) may synchronise, and which names reach
    which: a conservative, name-based call graph over a file and its local headers."""

    def __init__(self, sources: list[Source]):
        self.blocks = [b for s in sources for b in s.blocks if b.kind != "other" or b.names]
        self.by_name: dict[str, list[Block]] = {}
        for b in self.blocks:
            for n in b.names:
                self.by_name.setdefault(n, []).append(b)
        self.sync_names: set[str] = set()
        changed = True
        syncing: set[int] = set()
        while changed:
            changed = False
            for i, b in enumerate(self.blocks):
                if i in syncing:
                    continue
                if any(is_sync_ident(x) or x in self.sync_names for x in b.idents):
                    syncing.add(i)
                    self.sync_names |= b.names
                    changed = True

    def may_sync(self, idents: set[str]) -> bool:
        return any(is_sync_ident(x) or x in self.sync_names for x in idents)

    def reachable_idents(self, idents: set[str], fc_only: bool = False) -> set[str]:
        """All identifiers used by these and, transitively, by the blocks they name."""
        seen_blocks: set[int] = set()
        out = set(idents)
        todo = list(idents)
        while todo:
            name = todo.pop()
            for b in self.by_name.get(name, []):
                if id(b) in seen_blocks:
                    continue
                seen_blocks.add(id(b))
                new = (b.fc_idents if fc_only else b.idents) - out
                out |= new
                todo.extend(new)
        return out
