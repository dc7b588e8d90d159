#!/usr/bin/env python3
"""Checks that every C++ source and header includes the standard headers it uses itself, instead of
getting them through other headers: standard libraries differ in what they include transitively
(gcc 13's libstdc++ dropped several such includes), so a file that leans on them breaks with the
next compiler. It knows the standard names this project uses (std::name -> header, plus the
fixed-width integer and size_t typedefs) and reports each file's missing headers.

    python3 tools/include_check.py [--fix] [PATH...]    (default: src/ and shaders/*.h)

--fix inserts the missing headers into each file's first block of <...> includes (kept sorted).
Exit status 1 when a file misses a header (0 after --fix)."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HEADERS = {
    "algorithm": "min max minmax clamp sort stable_sort find find_if fill fill_n copy copy_n reverse unique count "
                 "count_if any_of all_of none_of min_element max_element lower_bound upper_bound remove_if "
                 "transform equal nth_element partial_sort",
    "array": "array",
    "atomic": "atomic atomic_thread_fence memory_order memory_order_relaxed memory_order_acquire "
              "memory_order_release memory_order_acq_rel memory_order_seq_cst",
    "chrono": "chrono",
    "cmath": "sqrt exp log fabs floor ceil isnan isinf isfinite pow tanh erf cos sin round lround nearbyint fmax "
             "fmin fma trunc ldexp frexp signbit copysign log2 exp2 tan atan atan2 hypot modf nextafter fmod rint "
             "lrint cbrt expm1 log1p",
    "condition_variable": "condition_variable",
    "cstddef": "ptrdiff_t nullptr_t max_align_t byte",
    "cstdint": "int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t",
    "cstdio": "snprintf printf fprintf fopen fclose FILE fread fwrite fflush sscanf",
    "cstdlib": "strtol strtoll strtoul strtoull strtod strtof getenv malloc free aligned_alloc abort exit atoi "
               "calloc realloc",
    "cstring": "memcpy memset memmove memcmp strlen strchr strrchr strcmp strncmp strerror strstr",
    "deque": "deque",
    "exception": "exception exception_ptr current_exception rethrow_exception terminate",
    "functional": "function hash ref cref invoke reference_wrapper",
    "initializer_list": "initializer_list",
    "limits": "numeric_limits",
    "map": "map multimap",
    "memory": "unique_ptr shared_ptr make_unique make_shared weak_ptr enable_shared_from_this dynamic_pointer_cast "
              "static_pointer_cast",
    "mutex": "mutex lock_guard unique_lock scoped_lock once_flag call_once recursive_mutex",
    "new": "bad_alloc nothrow launder align_val_t",
    "numeric": "iota accumulate gcd lcm",
    "optional": "optional nullopt",
    "set": "set",
    "sstream": "ostringstream istringstream stringstream",
    "stdexcept": "runtime_error invalid_argument out_of_range logic_error length_error overflow_error range_error",
    "string": "string to_string stoi stol stoll stoul stoull stof stod getline",
    "string_view": "string_view",
    "system_error": "system_error errc error_code generic_category system_category",
    "thread": "thread this_thread",
    "tuple": "tuple tie make_tuple",
    "type_traits": "is_same is_same_v enable_if enable_if_t is_integral is_integral_v is_floating_point "
                   "is_floating_point_v conditional conditional_t decay_t remove_reference_t remove_cv_t "
                   "is_trivially_copyable is_trivially_copyable_v underlying_type_t integral_constant bool_constant "
                   "true_type false_type is_arithmetic_v is_pointer_v is_reference_v is_standard_layout_v "
                   "is_signed_v is_unsigned_v make_unsigned_t",
    "unordered_map": "unordered_map",
    "unordered_set": "unordered_set",
    "utility": "move forward pair make_pair swap exchange declval index_sequence make_index_sequence",
    "vector": "vector",
}
HEADER_OF = {name: h for h, names in HEADERS.items() for name in names.split()}
# Headers the standard guarantees to come with another one.
IMPLIED = {"sstream": {"string"}}
# std::size_t is declared by each of these.
SIZE_T_HEADERS = {"cstddef", "cstdio", "cstdlib", "cstring", "ctime", "cwchar"}
UNQUALIFIED = re.compile(r"(?<![\w:.>])(u?int(?:8|16|32|64|ptr)_t|size_t)\b")
INCLUDE = re.compile(r'^\s*#\s*include\s*<([^>]+)>', re.M)


def strip(code: str) -> str:
    """The code without comments and string/char literals."""
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.S)
    code = re.sub(r"//[^\n]*", "", code)
    code = re.sub(r'R"(\w*)\(.*?\)\1"', '""', code, flags=re.S)
    code = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', code)
    return re.sub(r"'(?:\\.|[^'\\\n])'", "''", code)


def missing(text: str) -> dict[str, set[str]]:
    """Header -> the names this file uses from it without including it."""
    code = strip(text)
    have = set(INCLUDE.findall(text))
    for h in list(have):
        have |= IMPLIED.get(h, set())
    need: dict[str, set[str]] = {}
    for name in re.findall(r"\bstd::(\w+)", code):
        h = HEADER_OF.get(name)
        if h:
            need.setdefault(h, set()).add("std::" + name)
    for name in UNQUALIFIED.findall(code):
        if name == "size_t":
            if not have & SIZE_T_HEADERS:
                need.setdefault("cstddef", set()).add(name)
        else:
            need.setdefault("cstdint", set()).add(name)
    return {h: names for h, names in need.items() if h not in have}


def is_std_include(line: str) -> bool:
    m = INCLUDE.match(line)
    return bool(m) and "/" not in m.group(1) and "." not in m.group(1)


def insert(text: str, headers: set[str], path: Path) -> str:
    """text with `headers` added to its first block of standard includes (kept sorted), or in a new
    block: after a .cpp's own header, after a header's #pragma once, else before the first include."""
    lines = text.split("\n")
    new = [f"#include <{h}>" for h in sorted(headers)]
    first_std = next((i for i, l in enumerate(lines) if is_std_include(l)), None)
    if first_std is not None:
        end = first_std
        while end + 1 < len(lines) and is_std_include(lines[end + 1]):
            end += 1
        block = sorted(set(lines[first_std:end + 1]) | set(new))
        return "\n".join(lines[:first_std] + block + lines[end + 1:])
    for i, l in enumerate(lines):
        m = re.match(r'\s*#\s*include\s*"([^"]+)"', l)
        if l.startswith("#pragma once") or (m and Path(m.group(1)).stem == path.stem and path.suffix != ".h"):
            return "\n".join(lines[:i + 1] + [""] + new + lines[i + 1:])
        if m or INCLUDE.match(l):
            return "\n".join(lines[:i] + new + [""] + lines[i:])
    return "\n".join(new + [""] + lines)


def sources(paths: list[str]) -> list[Path]:
    if not paths:
        found = sorted((ROOT / "src").rglob("*"))
        found += sorted((ROOT / "shaders").glob("*.h"))
    else:
        found = []
        for p in map(Path, paths):
            found += sorted(p.rglob("*")) if p.is_dir() else [p]
    return [p for p in found if p.suffix in (".cpp", ".h", ".mm")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fix", action="store_true", help="insert the missing includes")
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args()
    bad = 0
    for path in sources(args.paths):
        text = path.read_text()
        miss = missing(text)
        if not miss:
            continue
        if args.fix:
            path.write_text(insert(text, set(miss), path))
            continue
        bad += 1
        rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"{rel}: " + "; ".join(f"<{h}> for {', '.join(sorted(n))}" for h, n in sorted(miss.items())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
