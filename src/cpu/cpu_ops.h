// The CPU device's op table: one descriptor per kernel family says whether it runs a node, the
// scratch and the threads it wants, what it sets up before its threads start, and the kernel. The
// backend asks only these; no op is special-cased outside its family.
#pragma once

#include <cstddef>

#include "core/tensor.h"
#include "cpu/kernels/kernels.h"

namespace mb {

using CpuKernel = void (*)(const ComputeParams&, Tensor&);

struct CpuFamily {
    bool (*supported)(const Tensor& node);
    // Scratch bytes with nth threads; nullptr: none.
    size_t (*work_size)(const Tensor& node, int nth);
    // Runs on the calling thread before the kernel, with the kernel's params (ith 0, nth, scratch):
    // sets up what the threads share (job counters), so that no thread waits for another to do it.
    // nullptr: nothing to set up.
    void (*prepare)(const ComputeParams& params, Tensor& node);
    // Threads worth using, at most nth; nullptr: cpu_default_threads.
    int (*threads)(const Tensor& node, int nth);
    CpuKernel compute;
};

// nullptr for ops that compute nothing (views).
const CpuFamily* cpu_family(Op op);
bool cpu_supports_op(const Tensor& node);
// The family's thread count for node (at least 1, at most nth).
int cpu_threads(const Tensor& node, int nth);
// Element-wise and row ops: below 32K elements one thread, then one per 16K elements, each thread
// getting a few microseconds of work, more than handing a slot to a spinning worker costs.
int cpu_default_threads(const Tensor& node, int nth);

}  // namespace mb
