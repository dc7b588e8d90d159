// racecheck_prelude.h: what the racecheck build of a generated kernel source (MB_SIM_RACECHECK,
// tools/metalsim/metal_sim_gen.py) includes before it opens namespace mbsim_racecheck around the
// shim and the .metal text. Every library header that the shim or a shader header may include is
// included here first, at global scope, so that its include guard keeps it out of the namespace.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "metal/sim/kernel_abi.h"
