#include "core/graph.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/context.h"
#include "core/errors.h"

namespace mb {

Graph::Graph(std::vector<Tensor*> outputs) : outputs_(std::move(outputs)) {
    if (outputs_.empty()) fail<InvalidArgumentError>("Graph", "a graph needs at least one output tensor");
    ctx_ = outputs_[0]->ctx;
    owner_ = ctx_->shared_from_this();
    std::unordered_set<const Tensor*> visited;
    // Iterative post-order: deep graphs (long decoders) must not exhaust the C++ stack.
    std::vector<std::pair<Tensor*, int>> stack;
    for (Tensor* out : outputs_) {
        if (out->ctx != ctx_)
            fail<InvalidArgumentError>("Graph", "outputs belong to different Contexts (", out->describe(), ")");
        if (!visited.insert(out).second) continue;
        stack.push_back({out, 0});
        while (!stack.empty()) {
            auto& [t, next] = stack.back();
            // Sources, then the view root, must come first.
            Tensor* child = nullptr;
            while (next <= kMaxSrc && !child) {
                Tensor* c = next < kMaxSrc ? t->src[next] : t->view_src;
                ++next;
                if (c && visited.insert(c).second) child = c;
            }
            if (child) {
                stack.push_back({child, 0});
                continue;
            }
            (t->op == Op::NONE ? leafs_ : nodes_).push_back(t);
            stack.pop_back();
        }
    }
}

Graph::Graph(std::vector<Tensor*> nodes, std::vector<Tensor*> leafs, std::vector<Tensor*> outputs)
    : nodes_(std::move(nodes)), leafs_(std::move(leafs)), outputs_(std::move(outputs)) {
    Tensor* any = !nodes_.empty() ? nodes_[0] : !leafs_.empty() ? leafs_[0] : nullptr;
    if (any) {
        ctx_ = any->ctx;
        owner_ = ctx_->shared_from_this();
    }
}

void Graph::reorder(std::vector<Tensor*> order) {
    if (order.size() != nodes_.size())
        fail<InvalidArgumentError>("Graph::reorder", "order has ", order.size(),
                                   " nodes, graph has ", nodes_.size());
    std::unordered_set<const Tensor*> done(leafs_.begin(), leafs_.end());
    std::unordered_set<const Tensor*> mine(nodes_.begin(), nodes_.end());
    for (Tensor* t : order) {
        if (!mine.count(t))
            fail<InvalidArgumentError>("Graph::reorder", "tensor ", t->describe(), " is not a node of this graph");
        for (int i = 0; i <= kMaxSrc; ++i) {
            const Tensor* s = i < kMaxSrc ? t->src[i] : t->view_src;
            if (s && mine.count(s) && !done.count(s)) {
                fail<InvalidArgumentError>("Graph::reorder", "node ", t->describe(),
                                           " placed before its source ", s->describe());
            }
        }
        done.insert(t);
    }
    nodes_ = std::move(order);
}

std::vector<Tensor*> Graph::all_tensors() const {
    std::vector<Tensor*> out(leafs_);
    out.insert(out.end(), nodes_.begin(), nodes_.end());
    return out;
}

}  // namespace mb
