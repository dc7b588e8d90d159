#include "cpu/cpu_ops.h"

#include <cstddef>

#include "cpu/thread_pool.h"

namespace mb {

namespace {

struct Family {
    CpuKernel compute;
    bool (*supported)(const Tensor&);
};

Family family_of(Op op) {
    switch (op) {
        case Op::ADD: case Op::SUB: case Op::MUL: case Op::DIV:
            return {compute_binary, binary_supported};
        case Op::SCALE: case Op::CLAMP: case Op::SQR: case Op::SQRT: case Op::LOG: case Op::SIN: case Op::COS:
        case Op::GELU: case Op::GELU_ERF: case Op::GELU_QUICK: case Op::SILU: case Op::RELU: case Op::TANH:
        case Op::SIGMOID: case Op::NEG: case Op::ABS: case Op::EXP:
            return {compute_unary, unary_supported};
        case Op::NORM: case Op::RMS_NORM:
            return {compute_norm, norm_supported};
        case Op::SOFT_MAX:
            return {compute_soft_max, soft_max_supported};
        case Op::SUM_ROWS: case Op::MEAN: case Op::ARGMAX:
            return {compute_reduce, reduce_supported};
        case Op::FLASH_ATTN_EXT:
            return {compute_flash_attn_ext, flash_attn_ext_supported};
        case Op::MUL_MAT:
            return {compute_mul_mat, mul_mat_supported};
        case Op::DUP: case Op::CPY: case Op::CONT:
            return {compute_copy, copy_supported};
        case Op::GET_ROWS: case Op::SET_ROWS:
            return {compute_rows, rows_supported};
        case Op::IM2COL:
            return {compute_im2col, im2col_supported};
        case Op::CONCAT: case Op::REPEAT: case Op::PAD:
            return {compute_layout, layout_supported};
        case Op::ROPE:
            return {compute_rope, rope_supported};
        case Op::NONE: case Op::RESHAPE: case Op::VIEW: case Op::PERMUTE: case Op::TRANSPOSE: case Op::COUNT:
            break;
    }
    return {nullptr, nullptr};
}

}  // namespace

void ComputeParams::barrier() const {
    if (pool) pool->barrier();
}

CpuKernel cpu_kernel(Op op) { return family_of(op).compute; }

bool cpu_supports_op(const Tensor& node) {
    if (op_is_view(node.op)) return true;
    Family f = family_of(node.op);
    return f.supported && f.supported(node);
}

size_t cpu_work_size(const Tensor& node, int n_threads) {
    switch (node.op) {
        case Op::MUL_MAT: return mul_mat_work_size(node, n_threads);
        case Op::FLASH_ATTN_EXT: return flash_attn_ext_work_size(node, n_threads);
        default: return 0;
    }
}

void cpu_prepare(const ComputeParams& params, Tensor& node) {
    if (node.op == Op::MUL_MAT) mul_mat_prepare(params, node);
}

}  // namespace mb
