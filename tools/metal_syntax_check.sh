#!/usr/bin/env bash
# Type-checks the Objective-C++ files of the Metal device where no Mac exists: clang in -fsyntax-only
# mode with ARC, against GNUstep's Foundation and tools/metal_api/Metal/Metal.h (the subset of
# Apple's Metal API those files call). Nothing is compiled to code and nothing runs: this catches
# wrong selectors, types, ARC ownership errors and C++ mistakes, not Metal's runtime behaviour.
#
# Each file is checked twice: against a macOS 14 SDK (no residency sets) and a macOS 15 SDK.
# Needs (Debian): apt-get install clang-19 libgnustep-base-dev libblocksruntime-dev
# Exit status: 0 clean, 1 diagnostics, 2 tools missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# clang-19 where installed (Debian 12, Ubuntu 24.04), else the default clang; CLANG=... overrides.
CLANG="${CLANG:-$(command -v clang-19 || command -v clang || echo clang-19)}"
FILES=(src/metal/apple/runtime_metal.mm src/metal/apple/metal_registry.mm src/metal/apple/residency.mm
       src/metal/apple/capture.mm src/metal/apple/gpu_timing.mm src/metal/apple/shader_library.mm)

missing=()
command -v "$CLANG" >/dev/null || missing+=("$CLANG (apt-get install clang-19)")
[ -f /usr/include/GNUstep/Foundation/Foundation.h ] || missing+=("GNUstep Foundation (apt-get install libgnustep-base-dev)")
[ -f /usr/include/Block.h ] || missing+=("Blocks runtime header (apt-get install libblocksruntime-dev)")
# GNUstep on Debian uses GCC's Objective-C runtime headers (libobjc-*-dev, a dependency of it).
objc_h="$(find /usr/lib/gcc -path '*/include/objc/objc.h' 2>/dev/null | sort -V | tail -n 1)"
[ -n "$objc_h" ] || missing+=("GCC's Objective-C runtime headers (apt-get install libgnustep-base-dev)")
if [ ${#missing[@]} -gt 0 ]; then
    printf 'metal_syntax_check: missing %s\n' "${missing[@]}" >&2
    exit 2
fi
objc_include="$(dirname "$(dirname "$objc_h")")"

# ARC needs a non-legacy runtime; gnustep-2.0 is one clang knows on Linux. GNUstep's headers are
# system headers here (their warnings are not ours); ours are checked with -Werror.
flags=(-x objective-c++ -std=c++17 -fsyntax-only -fobjc-arc -fobjc-runtime=gnustep-2.0 -fblocks
       -Wall -Wextra -Wno-unused-parameter -Werror
       -Itools/metal_api/gnustep -Itools/metal_api -isystem /usr/include/GNUstep -idirafter "$objc_include"
       -Isrc -Ishaders)

status=0
for sdk in 140000 150000; do
    for f in "${FILES[@]}"; do
        echo "== $f (macOS SDK $sdk)"
        if ! "$CLANG" "${flags[@]}" -D__MAC_OS_X_VERSION_MAX_ALLOWED="$sdk" "$f"; then
            status=1
        fi
    done
done
[ "$status" -eq 0 ] && echo "metal_syntax_check: clean"
exit "$status"
