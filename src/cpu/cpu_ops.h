// The CPU device's op table: which kernel family runs each op, whether it supports a node, and the
// scratch it needs.
#pragma once

#include <cstddef>

#include "core/tensor.h"
#include "cpu/kernels/kernels.h"

namespace mb {

using CpuKernel = void (*)(const ComputeParams&, Tensor&);

// nullptr for ops that compute nothing (views) or that the CPU has no kernel for.
CpuKernel cpu_kernel(Op op);
bool cpu_supports_op(const Tensor& node);
size_t cpu_work_size(const Tensor& node, int n_threads);
// Runs on the calling thread before a node's kernel, with the kernel's params (ith 0, nth, scratch):
// the family sets up what its threads share (job counters), so that no thread has to wait for
// another to do it.
void cpu_prepare(const ComputeParams& params, Tensor& node);

}  // namespace mb
