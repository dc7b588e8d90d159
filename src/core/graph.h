// A compute graph: the nodes needed for some outputs, in an order where every node comes after its
// sources (ggml_cgraph). Leafs are tensors without an op (inputs and weights).
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"

namespace mb {

class Context;

class Graph {
public:
    // Throws InvalidArgumentError when outputs is empty or spans several contexts.
    explicit Graph(std::vector<Tensor*> outputs);
    // A graph over an explicit, already ordered node list (a scheduler's per-backend part).
    Graph(std::vector<Tensor*> nodes, std::vector<Tensor*> leafs, std::vector<Tensor*> outputs);

    const std::vector<Tensor*>& nodes() const { return nodes_; }
    const std::vector<Tensor*>& leafs() const { return leafs_; }
    const std::vector<Tensor*>& outputs() const { return outputs_; }
    Context* context() const { return ctx_; }

    // Reorders nodes (graph_optimize); `order` must be a permutation that keeps sources first.
    void reorder(std::vector<Tensor*> order);

    // Every tensor the graph touches: leafs, nodes, and the roots their views alias.
    std::vector<Tensor*> all_tensors() const;

private:
    std::vector<Tensor*> nodes_;
    std::vector<Tensor*> leafs_;
    std::vector<Tensor*> outputs_;
    Context* ctx_ = nullptr;
    std::shared_ptr<Context> owner_;  // the graph's tensors live in this context
};

}  // namespace mb
