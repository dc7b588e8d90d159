// When an encoder may fold following nodes into its kernel (ADD chains, NORM + MUL + ADD). A fused
// kernel computes the last node's result straight from the first node's inputs; the results in
// between are never written, so they must be needed by nothing else.
//
// The rule (ggml's, with what the node list can tell): the intermediate is read by the next node as
// its src0 and by no other source slot of it, by no other node of the list (directly or through a
// view), and is not flagged input or output. A result that the caller reads after compute without
// flagging it is_output, or that a node outside the list reads, is known to the encoder
// (OpEncoder::must_keep: the graph's outputs, which the scheduler sets to what other splits read).
#pragma once

#include <cstddef>
#include <vector>

#include "core/tensor.h"

namespace mb::metal {

class OpEncoder;

// Whether the result of nodes[m] may stay unwritten when nodes[m + 1] is fused with it. Results the
// encoder must keep (graph outputs, results other backends read) never may.
bool feeds_only_next(const OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t m);

// Whether a kernel may read `src` elementwise while writing `dst`: their bytes do not overlap, or
// src is dst's own memory in the same layout (each element is read before the same thread writes
// it). The graph allocator reuses a dead input's memory for a later result, which within a fused
// run of nodes can land on an input the kernel still reads.
bool disjoint_or_same(const Tensor& dst, const Tensor& src);

}  // namespace mb::metal
