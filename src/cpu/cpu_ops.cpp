#include "cpu/cpu_ops.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/thread_pool.h"

namespace mb {

namespace {

// A sort costs n log n per row: one thread per 2K values' worth.
int argsort_threads(const Tensor& node, int nth) {
    const int64_t n = node.nelements();
    const int64_t want = n < (1 << 11) ? 1 : n / (1 << 11);
    return int(std::max<int64_t>(1, std::min<int64_t>(want, nth)));
}

// Selecting k of n costs about n per row (nth_element) plus k log k: one thread per 16K values.
int top_k_threads(const Tensor& node, int nth) {
    const Tensor* a = node.src[0];
    const int64_t n = a ? a->nelements() : 0;
    const int64_t want = n < (1 << 14) ? 1 : n / (1 << 14);
    return int(std::max<int64_t>(1, std::min<int64_t>({want, nth, node.nrows()})));
}

// A reduction's work is its source's elements (SUM's result is one value).
int reduce_threads(const Tensor& node, int nth) {
    const Tensor* a = node.src[0];
    const int64_t n = a ? a->nelements() : 0;
    const int64_t want = n < (1 << 15) ? 1 : n / (1 << 14);
    const int64_t rows = a ? std::max<int64_t>(1, a->nrows()) : 1;
    return int(std::max<int64_t>(1, std::min<int64_t>({want, nth, rows})));
}

// Products and convolutions: their work is the result's elements times the terms each sums.
int product_threads(const Tensor& node, int nth, int64_t terms) {
    const int64_t work = node.nelements() * std::max<int64_t>(terms, 1);
    const int64_t want = work < (1 << 17) ? 1 : work / (1 << 16);
    return int(std::max<int64_t>(1, std::min<int64_t>(want, nth)));
}

// OUT_PROD: each result sums over the shared dim 1.
int out_prod_threads(const Tensor& node, int nth) { return product_threads(node, nth, node.src[0]->ne[1]); }

// CONV_2D, CONV_2D_DW: each result sums a KW x KH x IC (DW: KW x KH) patch.
int conv_2d_threads(const Tensor& node, int nth) {
    const Tensor* k = node.src[0];
    return product_threads(node, nth, k->ne[0] * k->ne[1] * k->ne[2]);
}

// CONV_TRANSPOSE_2D: each result sums over the input channels (times the taps that land on it).
int conv_transpose_2d_threads(const Tensor& node, int nth) { return product_threads(node, nth, node.src[0]->ne[3]); }

// supported, work_size, prepare, threads, compute
const CpuFamily kBinary{binary_supported, nullptr, nullptr, nullptr, compute_binary};
const CpuFamily kUnary{unary_supported, nullptr, nullptr, nullptr, compute_unary};
const CpuFamily kNorm{norm_supported, nullptr, nullptr, nullptr, compute_norm};
const CpuFamily kSoftMax{soft_max_supported, nullptr, nullptr, nullptr, compute_soft_max};
const CpuFamily kReduce{reduce_supported, reduce_work_size, nullptr, reduce_threads, compute_reduce};
const CpuFamily kFlashAttnExt{flash_attn_ext_supported, flash_attn_ext_work_size, nullptr, flash_attn_ext_threads,
                              compute_flash_attn_ext};
const CpuFamily kMulMat{mul_mat_supported, mul_mat_work_size, mul_mat_prepare, mul_mat_threads, compute_mul_mat};
const CpuFamily kCopy{copy_supported, nullptr, nullptr, nullptr, compute_copy};
const CpuFamily kRows{rows_supported, nullptr, nullptr, nullptr, compute_rows};
const CpuFamily kIm2col{im2col_supported, nullptr, nullptr, nullptr, compute_im2col};
const CpuFamily kLayout{layout_supported, nullptr, nullptr, nullptr, compute_layout};
const CpuFamily kRope{rope_supported, nullptr, nullptr, nullptr, compute_rope};
const CpuFamily kGlu{glu_supported, nullptr, nullptr, nullptr, compute_glu};
const CpuFamily kAcc{acc_supported, nullptr, nullptr, nullptr, compute_acc};
const CpuFamily kConvTranspose1d{conv_transpose_1d_supported, conv_transpose_1d_work_size, nullptr, nullptr,
                                 compute_conv_transpose_1d};
const CpuFamily kPool2d{pool_2d_supported, nullptr, nullptr, nullptr, compute_pool_2d};
const CpuFamily kUpscale{upscale_supported, nullptr, nullptr, nullptr, compute_upscale};
const CpuFamily kSsmConv{ssm_conv_supported, nullptr, nullptr, nullptr, compute_ssm_conv};
const CpuFamily kSsmScan{ssm_scan_supported, nullptr, nullptr, nullptr, compute_ssm_scan};
const CpuFamily kRwkvWkv{rwkv_wkv_supported, nullptr, nullptr, nullptr, compute_rwkv_wkv};
const CpuFamily kMulMatId{mul_mat_id_supported, mul_mat_id_work_size, nullptr, mul_mat_threads, compute_mul_mat_id};
const CpuFamily kAddId{add_id_supported, nullptr, nullptr, nullptr, compute_add_id};
const CpuFamily kTimestepEmbedding{timestep_embedding_supported, nullptr, nullptr, nullptr, compute_timestep_embedding};
const CpuFamily kArange{arange_supported, nullptr, nullptr, nullptr, compute_arange};
const CpuFamily kArgsort{argsort_supported, nullptr, nullptr, argsort_threads, compute_argsort};
const CpuFamily kTopK{top_k_supported, nullptr, nullptr, top_k_threads, compute_top_k};
const CpuFamily kCumsum{cumsum_supported, nullptr, nullptr, nullptr, compute_cumsum};
const CpuFamily kTri{tri_supported, nullptr, nullptr, nullptr, compute_tri};
const CpuFamily kOutProd{out_prod_supported, out_prod_work_size, nullptr, out_prod_threads, compute_out_prod};
const CpuFamily kPool1d{pool_1d_supported, nullptr, nullptr, nullptr, compute_pool_1d};
const CpuFamily kConv2d{conv_2d_supported, conv_2d_work_size, nullptr, conv_2d_threads, compute_conv_2d};
const CpuFamily kConvTranspose2d{conv_transpose_2d_supported, conv_transpose_2d_work_size, nullptr,
                                 conv_transpose_2d_threads, compute_conv_transpose_2d};

}  // namespace

void ComputeParams::barrier() const {
    if (pool) pool->barrier();
}

const CpuFamily* cpu_family(Op op) {
    switch (op_family(op)) {
        case OpFamily::Binary: return &kBinary;
        case OpFamily::Unary: return &kUnary;
        case OpFamily::Norm: return &kNorm;
        case OpFamily::SoftMax: return &kSoftMax;
        case OpFamily::Reduce: return &kReduce;
        case OpFamily::FlashAttnExt: return &kFlashAttnExt;
        case OpFamily::MulMat: return &kMulMat;
        case OpFamily::Copy: return &kCopy;
        case OpFamily::Rows: return &kRows;
        case OpFamily::Im2col: return &kIm2col;
        case OpFamily::Layout: return &kLayout;
        case OpFamily::Rope: return &kRope;
        case OpFamily::Glu: return &kGlu;
        case OpFamily::Acc: return &kAcc;
        case OpFamily::ConvTranspose1d: return &kConvTranspose1d;
        case OpFamily::Pool2d: return &kPool2d;
        case OpFamily::Upscale: return &kUpscale;
        case OpFamily::SsmConv: return &kSsmConv;
        case OpFamily::SsmScan: return &kSsmScan;
        case OpFamily::RwkvWkv: return &kRwkvWkv;
        case OpFamily::MulMatId: return &kMulMatId;
        case OpFamily::AddId: return &kAddId;
        case OpFamily::TimestepEmbedding: return &kTimestepEmbedding;
        case OpFamily::Arange: return &kArange;
        case OpFamily::Argsort: return &kArgsort;
        case OpFamily::TopK: return &kTopK;
        case OpFamily::Cumsum: return &kCumsum;
        case OpFamily::Tri: return &kTri;
        case OpFamily::OutProd: return &kOutProd;
        case OpFamily::Pool1d: return &kPool1d;
        case OpFamily::Conv2d: return &kConv2d;
        case OpFamily::ConvTranspose2d: return &kConvTranspose2d;
        case OpFamily::None: break;
    }
    return nullptr;
}

bool cpu_supports_op(const Tensor& node) {
    if (op_is_view(node.op)) return true;
    const CpuFamily* f = cpu_family(node.op);
    return f && f->supported(node);
}

int cpu_default_threads(const Tensor& node, int nth) {
    const int64_t n = node.nelements();
    const int64_t want = n < (1 << 15) ? 1 : n / (1 << 14);
    return int(std::max<int64_t>(1, std::min<int64_t>(want, nth)));
}

int cpu_threads(const Tensor& node, int nth) {
    const CpuFamily* f = cpu_family(node.op);
    const int n = f && f->threads ? f->threads(node, nth) : cpu_default_threads(node, nth);
    return std::max(1, std::min(n, nth));
}

}  // namespace mb
