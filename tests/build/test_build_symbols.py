"""The extension keeps any statically linked C++ runtime to itself.

Some toolchains link libstdc++ (or part of it) into _core statically. If those copies are exported,
the dynamic linker binds part of _core's calls to the libstdc++.so.6 that numpy loaded first, the two
copies' locale tables disagree, and the first number written to a stream segfaults (seen with gcc 13.3
linking libstdc++.a). CMakeLists.txt links with --exclude-libs,ALL; this checks the built module.
"""
import shutil
import subprocess
import sys

import pytest

import metal_backend as mb

# Non-template parts of libstdc++ that only a linked-in copy defines: the locale machinery, ios_base
# and the out-of-line number inserters of std::ostream.
_RUNTIME_PREFIXES = ("_ZNSt6locale", "_ZNSt8ios_base", "_ZNSo9_M_insert")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF dynamic symbol tables: Linux only")
@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm (installed with g++)")
def test_no_cxx_runtime_symbols_exported():
    out = subprocess.run(["nm", "-D", "--defined-only", mb._core.__file__], check=True,
                         capture_output=True, text=True).stdout
    exported = [line.split()[-1] for line in out.splitlines() if line.split()]
    assert exported, "nm listed no dynamic symbols at all: the check would prove nothing"
    leaked = [s for s in exported if s.startswith(_RUNTIME_PREFIXES)]
    assert not leaked, f"_core exports {len(leaked)} C++ runtime symbols, e.g. {leaked[:5]}"


def test_numbers_format_after_numpy_loaded_libstdcxx():
    # The crash this guards against: numpy (OpenBLAS) has loaded libstdc++.so.6, then _core formats a
    # number (repr and error messages do).
    import numpy as np

    np.dot(np.ones((64, 64)), np.ones((64, 64)))
    t = mb.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert repr(t) == "<Tensor 'dlpack' f32 (2, 3) op=NONE>"
    with pytest.raises(mb.InvalidArgumentError, match="123"):
        mb.ops.reshape(t, (123,))
