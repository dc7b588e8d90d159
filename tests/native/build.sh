#!/bin/sh
# Builds the MSL executor's native tests and benchmark from scratch and runs the tests.
#
#   tests/native/build.sh [build-dir]        (CXX=clang++-19 tests/native/build.sh ...)
#   EXTRA_FLAGS="-fsanitize=address -g" tests/native/build.sh build/native-asan
#
# Kernel sources: tests/kernels/*.metal -> tools/metalsim/metal_sim_gen.py -> <build-dir>/*.metal.cpp
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-"$ROOT/build/native-tests"}
CXX=${CXX:-c++}
PYTHON=${PYTHON:-python3}
EXTRA_FLAGS=${EXTRA_FLAGS:-}
mkdir -p "$OUT"

if "$CXX" --version 2>/dev/null | grep -qi clang; then
    KERNEL_FLAGS="-Wno-unknown-attributes -Xclang -ffloat16-excess-precision=none"
else
    KERNEL_FLAGS="-Wno-attributes"
fi
COMMON="-std=c++17 -O2 -g0 -Wall -Wextra -I$ROOT/src -I$ROOT/shaders -I$ROOT/tests/kernels $EXTRA_FLAGS"
KERNEL_FLAGS="$KERNEL_FLAGS -fsigned-char -fno-strict-aliasing -fwrapv -fno-math-errno -Wno-unused-parameter"

"$CXX" $COMMON -c "$ROOT/src/metal/sim/executor.cpp" -o "$OUT/executor.o" &
OBJS=""
for src in "$ROOT"/tests/kernels/*.metal; do
    name=$(basename "$src")
    "$PYTHON" "$ROOT/tools/metalsim/metal_sim_gen.py" "$src" -o "$OUT/$name.cpp" -I "$ROOT/tests/kernels"
    "$CXX" $COMMON $KERNEL_FLAGS -c "$OUT/$name.cpp" -o "$OUT/$name.o"
    OBJS="$OBJS $OUT/$name.o"
done
"$CXX" $COMMON -c "$ROOT/src/metal/sim/fiber.cpp" -o "$OUT/fiber.o"
wait
"$CXX" $COMMON -c "$ROOT/tests/native/test_executor.cpp" -o "$OUT/test_executor.o" &
"$CXX" $COMMON -c "$ROOT/tests/native/bench_executor.cpp" -o "$OUT/bench_executor.o"
wait
"$CXX" $COMMON -o "$OUT/test_executor" "$OUT/test_executor.o" "$OUT/executor.o" "$OUT/fiber.o" $OBJS -pthread
"$CXX" $COMMON -o "$OUT/bench_executor" "$OUT/bench_executor.o" "$OUT/executor.o" "$OUT/fiber.o" $OBJS -pthread
"$PYTHON" "$ROOT/tools/metalsim/metal_lint.py" "$ROOT"/tests/kernels/*.metal
"$OUT/test_executor"
