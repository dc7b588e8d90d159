"""The linters CI runs: ruff over every Python file of the repository (its settings are [tool.ruff] in
pyproject.toml), and a 120-column limit on the C++ and Objective-C++ sources (the same limit as
ruff's line-length, and a clang-format ColumnLimit of 120).

The C++ check is plain Python: it needs no clang-format, and it checks line length only. shaders/ is left out on
purpose: tools/metalsim/ parses those files, so they are wrapped only with that parser in mind."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COLUMN_LIMIT = 120  # [tool.ruff] line-length; ColumnLimit for clang-format
CPP_SUFFIXES = (".cpp", ".h", ".mm")


def _ruff() -> str | None:
    try:
        from ruff.__main__ import find_ruff_bin  # the pip package ships the binary
    except ImportError:
        return shutil.which("ruff")
    try:
        return str(find_ruff_bin())
    except FileNotFoundError:
        return shutil.which("ruff")


def test_ruff_check_passes():
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (pip install 'ruff>=0.6', part of the test extra)")
    # --no-cache: nothing written into the tree (which may be read-only where the suite runs).
    proc = subprocess.run([ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, "ruff check failed:\n" + proc.stdout + proc.stderr


def _cpp_sources() -> list[Path]:
    files = [p for p in (ROOT / "src").rglob("*") if p.suffix in CPP_SUFFIXES]
    files += [p for p in (ROOT / "tests" / "native").glob("*") if p.suffix in (".cpp", ".h")]
    return sorted(p for p in files if p.is_file())


def test_cpp_lines_fit_the_column_limit():
    files = _cpp_sources()
    assert files, "no C++ sources found under src/"
    offenders = []
    for path in files:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > COLUMN_LIMIT:
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {len(line)} columns")
    assert not offenders, f"C++ lines over {COLUMN_LIMIT} columns (wrap them by hand):\n" + "\n".join(offenders)
