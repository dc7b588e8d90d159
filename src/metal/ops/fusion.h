// When an encoder may fold following nodes into its kernel (ADD chains, NORM + MUL + ADD). A fused
// kernel computes the last node's result straight from the first node's inputs; the results in
// between are never written, so they must be needed by nothing else.
//
// Decided in two steps, each in one place. By the graph's shape (fusable_after): the ops, the src0
// chain, types the fused kernels take, at most MB_BIN_MAX_SRC1 ADDs; graph_optimize keeps these
// nodes together. Then, while encoding, by what the graph's use of each result and the memory the
// allocator gave allow (OpEncoder::feeds_only_next, disjoint_or_same), which can only shorten it.
// The number of nodes an encoder consumed is the fused span: nothing else guesses it.
//
// The use rule (ggml's, with what the node list can tell): the intermediate is read by the next node
// as its src0 and by no other source slot of it, by no other node of the list (directly or through a
// view), and is not flagged input or output or a graph output (results other backends read).
#pragma once

#include <cstddef>
#include <vector>

#include "core/tensor.h"
#include "metal/runtime.h"

namespace mb::metal {

// How many nodes after nodes[i] its kernel could fold in, by the graph's shape alone (0 when none).
size_t fusable_after(const RuntimeProps& props, const std::vector<Tensor*>& nodes, size_t i);

// Whether a kernel may read `src` elementwise while writing `dst`: their bytes do not overlap, or
// src is dst's own memory in the same layout (each element is read before the same thread writes
// it). The graph allocator reuses a dead input's memory for a later result, which within a fused
// run of nodes can land on an input the kernel still reads.
bool disjoint_or_same(const Tensor& dst, const Tensor& src);

}  // namespace mb::metal
