// A kernel's view of the scratch its family declared (CpuFamily::work_size): the first 64-byte aligned
// address of ComputeParams::wdata (the backend aligns it already, src/cpu/scratch.h), after checking
// that `bytes` from there fit in the declared wsize, so a kernel whose use outgrew its declaration
// fails at once, with both sizes named (the backend's guard after the region catches a stray write).
// Every thread of a node calls it with the same values, so all of them fail (before any barrier) or
// none does.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "cpu/kernels/kernels.h"

namespace mb {

// Bytes a work_size must declare for `bytes` of scratch used from the first 64-byte aligned address.
constexpr size_t scratch_bytes_aligned(size_t bytes) { return bytes + 64; }

inline float* checked_scratch(const ComputeParams& p, size_t bytes, const char* who) {
    const size_t pad = p.wdata ? (64 - reinterpret_cast<uintptr_t>(p.wdata) % 64) % 64 : 0;
    if (!p.wdata || p.wsize < pad + bytes) {
        fail<InvalidArgumentError>(who, "scratch of ", p.wsize, " bytes is smaller than the ", pad + bytes,
                                   " it needs");
    }
    return reinterpret_cast<float*>(p.wdata + pad);
}

}  // namespace mb
