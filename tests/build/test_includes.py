"""Every C++ source and header includes the standard headers it uses (tools/include_check.py):
gcc 13's libstdc++ stopped including <system_error> and others transitively, and the tree stopped
building there; a file that leans on another header's includes breaks with the next compiler."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tools" / "include_check.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True, timeout=120)


def test_every_source_includes_what_it_uses():
    proc = run()
    assert proc.returncode == 0, "missing standard includes:\n" + proc.stdout + proc.stderr


def test_the_check_finds_and_fixes_a_missing_include(tmp_path):
    """The gcc 13 failure itself: std::system_error caught without <system_error>."""
    src = tmp_path / "probe.cpp"
    src.write_text('#include "probe.h"\n\n#include <thread>\n\n'
                   "void f() {\n    try {\n        std::thread([] {}).detach();\n"
                   "    } catch (const std::system_error&) {\n    }\n"
                   "    std::vector<uint8_t> v;  // std::size_t in a comment does not count\n}\n")
    proc = run(str(src))
    assert proc.returncode == 1
    assert "<system_error> for std::system_error" in proc.stdout
    assert "<vector> for std::vector" in proc.stdout and "<cstdint> for uint8_t" in proc.stdout
    assert "cstddef" not in proc.stdout
    assert run("--fix", str(src)).returncode == 0
    assert run(str(src)).returncode == 0
    text = src.read_text()
    assert "#include <cstdint>\n#include <system_error>\n#include <thread>\n#include <vector>\n" in text
