// ADD SUB MUL DIV ADD1 on the Metal device (shaders/binary.metal). src0 and dst f32 with any strides,
// src1 f32 or f16 broadcast by modulo on every dim. Paths: one thread per float4 when src0 and dst
// are contiguous and every operand is one contiguous row (`_row_c4`), else one threadgroup per dst
// row. With fusion on, a chain of ADDs (each adding to the previous result) is one kernel.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/fusion.h"
#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

namespace {

int bin_op(Op op) {
    switch (op) {
        case Op::ADD:
        case Op::ADD1: return MB_BIN_ADD;
        case Op::SUB: return MB_BIN_SUB;
        case Op::MUL: return MB_BIN_MUL;
        default: return MB_BIN_DIV;
    }
}

// How many ADD nodes from nodes[i] on one kernel computes: those the graph's shape allows
// (fusion.h), while each intermediate is needed by nothing else and the last result does not overlap
// what is read.
size_t chain_length(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    if (!enc.fusion()) return 1;
    const Tensor& first = *nodes[i];
    const size_t most = 1 + fusable_after(enc.props(), nodes, i);
    size_t n = 1;
    while (n < most && enc.feeds_only_next(i + n - 1)) ++n;
    for (; n > 1; --n) {
        const Tensor& dst = *nodes[i + n - 1];
        bool safe = disjoint_or_same(dst, *first.src[0]);
        for (size_t k = 0; k < n && safe; ++k) safe = disjoint_or_same(dst, *nodes[i + k]->src[1]);
        if (safe) break;
    }
    return n;
}

bool aligned16(const Tensor& t) { return device_ref(t).offset % 16 == 0; }

// Every operand one contiguous f32 row of ne00 % 4 == 0 elements, src0 and dst contiguous, all of
// them at 16-byte aligned addresses (float4 loads).
bool row_c4(const Tensor& src0, const Tensor& dst, const std::vector<const Tensor*>& ops) {
    if (src0.ne[0] % 4 != 0 || !src0.is_contiguous() || !dst.is_contiguous()) return false;
    if (dst.nelements() / 4 > UINT32_MAX || !aligned16(src0) || !aligned16(dst)) return false;
    for (const Tensor* b : ops) {
        if (b->type != Type::F32 || b->ne[0] != src0.ne[0] || b->nelements() != b->ne[0]) return false;
        if (b->nb[0] != sizeof(float) || !aligned16(*b)) return false;
    }
    return true;
}

}  // namespace

bool supports_binary(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    if (node.op != Op::ADD && node.op != Op::SUB && node.op != Op::MUL && node.op != Op::DIV && node.op != Op::ADD1) {
        return false;
    }
    const Tensor* a = node.src[0];
    const Tensor* b = node.src[1];
    if (!a || !b || a->type != Type::F32 || node.type != Type::F32) return false;
    if (b->type != Type::F32 && b->type != Type::F16) return false;
    for (int d = 0; d < kMaxDims; ++d) {
        if (a->ne[d] != node.ne[d]) return false;
        if (b->ne[d] == 0 ? node.ne[d] != 0 : node.ne[d] % b->ne[d] != 0) return false;
    }
    return fits_i32(node) && fits_i32(*b);
}

size_t encode_binary(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const size_t n = chain_length(enc, nodes, i);
    const Tensor& src0 = *nodes[i]->src[0];
    const Tensor& dst = *nodes[i + n - 1];
    if (dst.is_empty()) return n;

    std::vector<const Tensor*> ops;
    for (size_t k = 0; k < n; ++k) ops.push_back(nodes[i + k]->src[1]);

    mb_kargs_bin args{};
    MB_SET_NE(args, ne0, src0);
    MB_SET_NB(args, nb0, src0);
    MB_SET_NE(args, ne, dst);
    MB_SET_NB(args, nb, dst);
    for (size_t k = 0; k < MB_BIN_MAX_SRC1; ++k) {
        for (int d = 0; d < kMaxDims; ++d) {
            args.ne1x[k][d] = k < n ? int32_t(ops[k]->ne[d]) : 1;
            args.nb1x[k][d] = k < n ? ops[k]->nb[d] : 0;
        }
    }

    const std::vector<FunctionConstant> fc = {FunctionConstant::int32(100, bin_op(nodes[i]->op)),
                                              FunctionConstant::int32(101, int32_t(n))};
    const bool fast = row_c4(src0, dst, ops);
    const char* name = fast ? "kernel_bin_row_c4_f32"
                            : (ops[0]->type == Type::F16 ? "kernel_bin_f32_f16" : "kernel_bin_f32");
    const Pipeline& p = enc.use(name, fc);
    enc.args(args);
    enc.input(src0, 1);
    enc.output(dst, 2);
    // Slots past the chain are never read; Metal still wants every declared buffer bound.
    for (uint32_t k = 0; k < MB_BIN_MAX_SRC1; ++k) enc.input(*ops[k < n ? k : 0], 3 + k);

    const uint32_t max_threads = p.max_threads_per_threadgroup();
    if (fast) {
        const uint32_t n4 = uint32_t(dst.nelements() / 4);
        const uint32_t nth = std::min<uint32_t>(256, max_threads);
        enc.dispatch({uint32_t((uint64_t(n4) + nth - 1) / nth), 1, 1}, {nth, 1, 1});
    } else {
        // 32 threads, doubled while the row is longer, up to 256.
        uint32_t nth = 32;
        while (nth < dst.ne[0] && 2 * nth <= std::min<uint32_t>(256, max_threads)) nth *= 2;
        enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    }
    return n;
}

}  // namespace mb::metal
