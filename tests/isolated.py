"""Runs a snippet in a fresh interpreter with a time limit, so that a crash (SIGSEGV, abort) or a
hang being guarded against fails the one test that checks it instead of ending the whole suite."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def run_isolated(code: str, timeout: float = 60.0) -> str:
    """Runs `code` in a new Python process and returns its stdout; fails the calling test, with the
    child's output, when it dies by a signal, exits non-zero or runs past `timeout` seconds."""
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(
            f"hung: still running after {timeout} s\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}"
        ) from None
    if proc.returncode != 0:
        how = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        raise AssertionError(f"{how}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc.stdout
