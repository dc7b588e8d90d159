#include "core/profile.h"

#include <algorithm>
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

uint64_t node_flops(const Tensor& n) {
    auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    if (n.op == Op::MUL_MAT && n.src[0]) return 2 * u(n.src[0]->ne[0]) * u(n.nelements());
    if (n.op == Op::FLASH_ATTN_EXT && n.src[0] && n.src[1]) {
        // q (D, n_q, H, B) against k (D, n_kv, ...): Q.K^T and P.V, a multiply-add each.
        const Tensor& q = *n.src[0];
        return 4 * u(q.ne[0]) * u(q.ne[1]) * u(n.src[1]->ne[1]) * u(q.ne[2]) * u(q.ne[3]);
    }
    if (op_is_elementwise(n.op)) return u(n.nelements());
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
    backend.reject_reentry("Backend.profile");
    using Clock = std::chrono::steady_clock;
    GraphProfile out;
    out.backend = backend.name();
    std::vector<std::string> clocks;  // the device clocks the computes reported, each once
    bool device_timed = true;         // every compute reported a device time
    std::vector<Tensor*> nodes;
    for (Tensor* n : graph.nodes()) {
        if (!op_is_view(n->op) && !n->is_empty()) nodes.push_back(n);
    }
    out.nodes.reserve(nodes.size());
    for (Tensor* n : nodes) out.nodes.push_back({n, 0.0, 0.0, 0.0, node_bytes(*n), node_flops(*n)});
    std::vector<double> device_us(nodes.size(), 0.0);
    const Clock::time_point t0 = Clock::now();
    // Keeps the nodes timed so far, each on the device clock where every compute had one.
    auto finish = [&](size_t n_timed) {
        out.nodes.resize(n_timed);
        out.wall_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        device_timed = device_timed && !clocks.empty();
        if (!device_timed) out.clock = "host wall time";
        for (size_t c = 0; device_timed && c < clocks.size(); ++c) out.clock += (c ? "; " : "") + clocks[c];
        for (size_t i = 0; i < out.nodes.size(); ++i) {
            out.nodes[i].time_us = device_timed ? device_us[i] : out.nodes[i].host_us;
        }
        return out;
    };
    for (int r = 0; r < repeat; ++r) {
        for (size_t i = 0; i < nodes.size(); ++i) {
            // The node's sources are computed (earlier nodes) or leafs; a one-node graph computes just it.
            Graph one({nodes[i]}, {}, {nodes[i]});
            DeviceTime device;
            const Clock::time_point a = Clock::now();
            Status s = backend.graph_compute_timed(one, device);
            const Clock::time_point b = Clock::now();
            if (r == 0) out.nodes[i].start_us = std::chrono::duration<double, std::micro>(a - t0).count();
            out.nodes[i].host_us += std::chrono::duration<double, std::micro>(b - a).count() / repeat;
            device_us[i] += device.us / repeat;
            // An aborted compute ran nothing on the device to time; it is the last node kept anyway.
            if (device.clock.empty()) {
                device_timed = device_timed && s == Status::ABORTED;
            } else if (std::find(clocks.begin(), clocks.end(), device.clock) == clocks.end()) {
                clocks.push_back(device.clock);
            }
            if (s == Status::ABORTED) {
                out.aborted = true;
                return finish(i + 1);
            }
        }
    }
    return finish(nodes.size());
}

}  // namespace mb
