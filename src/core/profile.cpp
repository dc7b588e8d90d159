#include "core/profile.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/graph.h"
#include "core/op.h"
#include "core/tensor.h"

namespace mb {

namespace {

bool elementwise(Op op) {
    switch (op) {
        case Op::ADD: case Op::SUB: case Op::MUL: case Op::DIV: case Op::SCALE: case Op::CLAMP:
        case Op::SQR: case Op::SQRT: case Op::LOG: case Op::SIN: case Op::COS: case Op::GELU:
        case Op::GELU_ERF: case Op::GELU_QUICK: case Op::SILU: case Op::RELU: case Op::TANH:
        case Op::SIGMOID: case Op::NEG: case Op::ABS: case Op::EXP:
            return true;
        default:
            return false;
    }
}

}  // namespace

uint64_t node_flops(const Tensor& n) {
    auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    if (n.op == Op::MUL_MAT && n.src[0]) return 2 * u(n.src[0]->ne[0]) * u(n.nelements());
    if (n.op == Op::FLASH_ATTN_EXT && n.src[0] && n.src[1]) {
        // q (D, n_q, H, B) against k (D, n_kv, ...): Q.K^T and P.V, a multiply-add each.
        const Tensor& q = *n.src[0];
        return 4 * u(q.ne[0]) * u(q.ne[1]) * u(n.src[1]->ne[1]) * u(q.ne[2]) * u(q.ne[3]);
    }
    if (elementwise(n.op)) return u(n.nelements());
    return 0;
}

uint64_t node_bytes(const Tensor& n) {
    uint64_t bytes = n.nbytes();
    for (const Tensor* s : n.src) {
        if (s) bytes += s->nbytes();
    }
    return bytes;
}

GraphProfile profile_graph(Backend& backend, Graph& graph, int repeat) {
    if (repeat < 1) fail<InvalidArgumentError>("Backend.profile", "repeat must be >= 1, got ", repeat);
    using Clock = std::chrono::steady_clock;
    GraphProfile out;
    out.backend = backend.name();
    out.clock = "host wall time per node, each node computed and waited for alone" +
                std::string(backend.device()->name() == "CPU"
                                ? ""
                                : " (one command buffer per node: dispatch + commit + wait; no fusion or concurrency)");
    std::vector<Tensor*> nodes;
    for (Tensor* n : graph.nodes()) {
        if (!op_is_view(n->op) && !n->is_empty()) nodes.push_back(n);
    }
    out.nodes.reserve(nodes.size());
    for (Tensor* n : nodes) out.nodes.push_back({n, 0.0, 0.0, node_bytes(*n), node_flops(*n)});
    const Clock::time_point t0 = Clock::now();
    for (int r = 0; r < repeat; ++r) {
        for (size_t i = 0; i < nodes.size(); ++i) {
            // The node's sources are computed (earlier nodes) or leafs; a one-node graph computes just it.
            Graph one({nodes[i]}, {}, {nodes[i]});
            const Clock::time_point a = Clock::now();
            Status s = backend.graph_compute(one);
            const Clock::time_point b = Clock::now();
            if (r == 0) out.nodes[i].start_us = std::chrono::duration<double, std::micro>(a - t0).count();
            out.nodes[i].time_us += std::chrono::duration<double, std::micro>(b - a).count() / repeat;
            if (s == Status::ABORTED) {
                out.nodes.resize(i + 1);
                out.wall_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
                return out;
            }
        }
    }
    out.wall_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    return out;
}

}  // namespace mb
