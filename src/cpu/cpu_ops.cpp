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
    switch (op_family(op)) {
        case OpFamily::Binary: return {compute_binary, binary_supported};
        case OpFamily::Unary: return {compute_unary, unary_supported};
        case OpFamily::Norm: return {compute_norm, norm_supported};
        case OpFamily::SoftMax: return {compute_soft_max, soft_max_supported};
        case OpFamily::Reduce: return {compute_reduce, reduce_supported};
        case OpFamily::FlashAttnExt: return {compute_flash_attn_ext, flash_attn_ext_supported};
        case OpFamily::MulMat: return {compute_mul_mat, mul_mat_supported};
        case OpFamily::Copy: return {compute_copy, copy_supported};
        case OpFamily::Rows: return {compute_rows, rows_supported};
        case OpFamily::Im2col: return {compute_im2col, im2col_supported};
        case OpFamily::Layout: return {compute_layout, layout_supported};
        case OpFamily::Rope: return {compute_rope, rope_supported};
        case OpFamily::None: break;
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
