// CONCAT, REPEAT, PAD, PAD_REFLECT_1D and ROLL on the Metal device (shaders/layout.metal): one threadgroup per dst row,
// any strides, element types of 4 bytes (f32, i32) and 2 bytes (f16, bf16); the kernels only move
// bits, so each element size has one kernel per op.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "kargs.h"
#include "metal/ops/ops.h"

namespace mb::metal {

namespace {

const char* suffix(Type t) {
    switch (t) {
        case Type::F32: return "f32";
        case Type::F16: return "f16";
        case Type::I32: return "i32";
        case Type::BF16: return "bf16";
        default: return nullptr;
    }
}

bool dims_ok(const Tensor& t) {
    for (int i = 0; i < kMaxDims; ++i) {
        if (t.ne[i] < 0 || t.ne[i] > INT_MAX) return false;
    }
    return true;
}

bool shapes_ok(const Tensor& node) {
    const Tensor& a = *node.src[0];
    switch (node.op) {
        case Op::CONCAT: {
            const Tensor* b = node.src[1];
            const int dim = node.op_params[0];
            if (b == nullptr || b->type != node.type || !dims_ok(*b) || dim < 0 || dim >= kMaxDims) return false;
            for (int i = 0; i < kMaxDims; ++i) {
                const int64_t want = i == dim ? a.ne[i] + b->ne[i] : a.ne[i];
                if (node.ne[i] != want || (i != dim && b->ne[i] != a.ne[i])) return false;
            }
            return true;
        }
        case Op::REPEAT:
            for (int i = 0; i < kMaxDims; ++i) {
                if (a.ne[i] == 0 ? node.ne[i] != 0 : node.ne[i] % a.ne[i] != 0) return false;
            }
            return true;
        case Op::PAD:
            for (int i = 0; i < kMaxDims; ++i) {
                if (node.op_params[i] < 0 || node.ne[i] != a.ne[i] + node.op_params[i]) return false;
            }
            return true;
        case Op::ROLL:
            for (int i = 0; i < kMaxDims; ++i) {
                if (node.ne[i] != a.ne[i] || std::abs(int64_t(node.op_params[i])) >= std::max<int64_t>(a.ne[i], 1)) {
                    return false;
                }
            }
            return true;
        case Op::PAD_REFLECT_1D: {
            const int p0 = node.op_params[0], p1 = node.op_params[1];
            if (p0 < 0 || p1 < 0 || p0 >= a.ne[0] || p1 >= a.ne[0] || node.ne[0] != a.ne[0] + p0 + p1) return false;
            for (int i = 1; i < kMaxDims; ++i) {
                if (node.ne[i] != a.ne[i]) return false;
            }
            return true;
        }
        default:
            return false;
    }
}

template <typename Args>
void set_src0_dst(Args& k, const Tensor& a, const Tensor& dst) {
    MB_SET_NE(k, ne0, a);
    MB_SET_NB(k, nb0, a);
    MB_SET_NE(k, ne, dst);
    MB_SET_NB(k, nb, dst);
}

}  // namespace

bool supports_layout(const RuntimeProps&, const Tensor& node) {
    const Tensor* a = node.src[0];
    if (a == nullptr || a->type != node.type || suffix(node.type) == nullptr) return false;
    if (!dims_ok(*a) || !dims_ok(node)) return false;
    return shapes_ok(node);
}

size_t encode_layout(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    const Tensor& a = *dst.src[0];
    if (dst.is_empty()) return 1;
    const std::string type = suffix(dst.type);
    const Pipeline* p = nullptr;
    switch (dst.op) {
        case Op::CONCAT: {
            const Tensor& b = *dst.src[1];
            mb_kargs_concat k{};
            set_src0_dst(k, a, dst);
            MB_SET_NB(k, nb1, b);
            k.dim = dst.op_params[0];
            p = &enc.use("kernel_concat_" + type);
            enc.args(k);
            // An empty operand is never read; dst stands in for it so that every slot is bound.
            enc.input(a.is_empty() ? dst : a, 1);
            enc.input(b.is_empty() ? dst : b, 2);
            enc.output(dst, 3);
            break;
        }
        case Op::REPEAT: {
            mb_kargs_repeat k{};
            set_src0_dst(k, a, dst);
            p = &enc.use("kernel_repeat_" + type);
            enc.args(k);
            enc.input(a, 1);
            enc.output(dst, 2);
            break;
        }
        case Op::PAD: {
            mb_kargs_pad k{};
            set_src0_dst(k, a, dst);
            p = &enc.use("kernel_pad_" + type);
            enc.args(k);
            enc.input(a.is_empty() ? dst : a, 1);
            enc.output(dst, 2);
            break;
        }
        case Op::PAD_REFLECT_1D: {
            mb_kargs_pad_reflect_1d k{};
            set_src0_dst(k, a, dst);
            k.p0 = dst.op_params[0];
            k.p1 = dst.op_params[1];
            p = &enc.use("kernel_pad_reflect_1d_" + type);
            enc.args(k);
            enc.input(a, 1);
            enc.output(dst, 2);
            break;
        }
        case Op::ROLL: {
            mb_kargs_roll k{};
            MB_SET_NE(k, ne0, a);
            MB_SET_NB(k, nb0, a);
            MB_SET_NB(k, nb, dst);
            int32_t s[kMaxDims];
            for (int d = 0; d < kMaxDims; ++d) {
                const int64_t n = dst.ne[d];
                s[d] = int32_t(((int64_t(dst.op_params[d]) % n) + n) % n);
            }
            k.s0 = s[0];
            k.s1 = s[1];
            k.s2 = s[2];
            k.s3 = s[3];
            p = &enc.use("kernel_roll_" + type);
            enc.args(k);
            enc.input(a, 1);
            enc.output(dst, 2);
            break;
        }
        default:
            fail<UnsupportedOpError>("metal::encode_layout", "not a layout op: ", op_name(dst.op));
    }
    const uint32_t nth = uint32_t(std::min<int64_t>({dst.ne[0], 256, int64_t(p->max_threads_per_threadgroup())}));
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
