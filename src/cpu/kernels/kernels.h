// The CPU kernels, one function per op family. Each is called once per slot ith of nth and splits the
// work itself (usually by rows); it may use the node's scratch memory and barrier() between phases.
// A slot may run on any thread of the pool, and one thread may run several slots in turn, so a
// kernel that does not use barrier() must not wait for another slot to start; one that does gets its
// nth slots on nth threads at once. Kernels read sources and write dst through host pointers; dst
// has been checked by the family's *_supported function before the graph runs. A kernel that throws
// must do so before its first barrier() on every thread alike, or the other threads would wait
// forever.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "core/tensor.h"

namespace mb {

class ThreadPool;

struct ComputeParams {
    int ith = 0;
    int nth = 1;
    uint8_t* wdata = nullptr;  // scratch of the size the family's work_size asked for, shared by all threads
    size_t wsize = 0;
    ThreadPool* pool = nullptr;
    void barrier() const;
};

// Host address of element (i0, i1, i2, i3) of t, by its strides (block index for quantized types).
inline uint8_t* at(const Tensor& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0);

// Host data of a tensor during compute (Tensor::data, resolved by the backend before the node runs).
inline uint8_t* host_data(const Tensor& t) { return static_cast<uint8_t*>(t.data); }

// Whether the family can run this node, and the scratch bytes it needs with nth threads.
bool binary_supported(const Tensor& dst);            // ADD SUB MUL DIV ADD1
bool unary_supported(const Tensor& dst);             // the Unary rows of shaders/op_table.h
bool norm_supported(const Tensor& dst);              // NORM RMS_NORM L2_NORM GROUP_NORM
bool soft_max_supported(const Tensor& dst);          // SOFT_MAX
bool reduce_supported(const Tensor& dst);            // SUM SUM_ROWS MEAN ARGMAX
bool flash_attn_ext_supported(const Tensor& dst);    // FLASH_ATTN_EXT
bool mul_mat_supported(const Tensor& dst);           // MUL_MAT
bool copy_supported(const Tensor& dst);              // DUP CPY CONT
bool rows_supported(const Tensor& dst);              // GET_ROWS SET_ROWS
bool im2col_supported(const Tensor& dst);            // IM2COL
bool layout_supported(const Tensor& dst);            // CONCAT REPEAT PAD PAD_REFLECT_1D ROLL
bool rope_supported(const Tensor& dst);              // ROPE
bool arange_supported(const Tensor& dst);            // ARANGE
bool argsort_supported(const Tensor& dst);           // ARGSORT
bool top_k_supported(const Tensor& dst);             // TOP_K
bool cumsum_supported(const Tensor& dst);            // CUMSUM
bool tri_supported(const Tensor& dst);               // TRI DIAG DIAG_MASK_INF DIAG_MASK_ZERO
bool out_prod_supported(const Tensor& dst);          // OUT_PROD
bool pool_1d_supported(const Tensor& dst);           // POOL_1D
bool conv_2d_supported(const Tensor& dst);           // CONV_2D CONV_2D_DW
bool conv_transpose_2d_supported(const Tensor& dst);  // CONV_TRANSPOSE_2D
bool mul_mat_id_supported(const Tensor& dst);        // MUL_MAT_ID
bool add_id_supported(const Tensor& dst);            // ADD_ID
bool timestep_embedding_supported(const Tensor& dst);  // TIMESTEP_EMBEDDING
bool conv_transpose_1d_supported(const Tensor& dst);  // CONV_TRANSPOSE_1D
bool pool_2d_supported(const Tensor& dst);            // POOL_2D
bool upscale_supported(const Tensor& dst);            // UPSCALE
bool ssm_conv_supported(const Tensor& dst);           // SSM_CONV
bool ssm_scan_supported(const Tensor& dst);           // SSM_SCAN
bool rwkv_wkv_supported(const Tensor& dst);           // RWKV_WKV6 RWKV_WKV7
bool acc_supported(const Tensor& dst);               // ACC SET
bool glu_supported(const Tensor& dst);               // REGLU GEGLU SWIGLU GEGLU_ERF GEGLU_QUICK SWIGLU_OAI

size_t mul_mat_work_size(const Tensor& dst, int nth);
// Sets up MUL_MAT's shared job counters in the scratch; called once, before compute_mul_mat runs on
// any thread.
void mul_mat_prepare(const ComputeParams& p, Tensor& dst);
size_t flash_attn_ext_work_size(const Tensor& dst, int nth);
// Threads worth using. Matrix products: one per 64K multiply-adds (a 384x1536 mat-vec, 590K of them,
// takes 9). Attention: every thread.
int mul_mat_threads(const Tensor& dst, int nth);
int flash_attn_ext_threads(const Tensor& dst, int nth);

void compute_binary(const ComputeParams& p, Tensor& dst);
void compute_unary(const ComputeParams& p, Tensor& dst);
void compute_norm(const ComputeParams& p, Tensor& dst);
void compute_soft_max(const ComputeParams& p, Tensor& dst);
void compute_reduce(const ComputeParams& p, Tensor& dst);
void compute_flash_attn_ext(const ComputeParams& p, Tensor& dst);
void compute_mul_mat(const ComputeParams& p, Tensor& dst);
void compute_copy(const ComputeParams& p, Tensor& dst);
void compute_rows(const ComputeParams& p, Tensor& dst);
void compute_im2col(const ComputeParams& p, Tensor& dst);
void compute_layout(const ComputeParams& p, Tensor& dst);
void compute_rope(const ComputeParams& p, Tensor& dst);
void compute_glu(const ComputeParams& p, Tensor& dst);
void compute_acc(const ComputeParams& p, Tensor& dst);
void compute_top_k(const ComputeParams& p, Tensor& dst);
void compute_cumsum(const ComputeParams& p, Tensor& dst);
void compute_tri(const ComputeParams& p, Tensor& dst);
void compute_out_prod(const ComputeParams& p, Tensor& dst);
void compute_pool_1d(const ComputeParams& p, Tensor& dst);
void compute_conv_2d(const ComputeParams& p, Tensor& dst);
void compute_conv_transpose_2d(const ComputeParams& p, Tensor& dst);
void compute_conv_transpose_1d(const ComputeParams& p, Tensor& dst);
void compute_pool_2d(const ComputeParams& p, Tensor& dst);
void compute_upscale(const ComputeParams& p, Tensor& dst);
void compute_ssm_conv(const ComputeParams& p, Tensor& dst);
void compute_ssm_scan(const ComputeParams& p, Tensor& dst);
void compute_rwkv_wkv(const ComputeParams& p, Tensor& dst);
void compute_mul_mat_id(const ComputeParams& p, Tensor& dst);
void compute_add_id(const ComputeParams& p, Tensor& dst);
void compute_timestep_embedding(const ComputeParams& p, Tensor& dst);
size_t mul_mat_id_work_size(const Tensor& dst, int nth);
size_t conv_transpose_1d_work_size(const Tensor& dst, int nth);
size_t reduce_work_size(const Tensor& dst, int nth);
size_t out_prod_work_size(const Tensor& dst, int nth);
size_t conv_2d_work_size(const Tensor& dst, int nth);
size_t conv_transpose_2d_work_size(const Tensor& dst, int nth);
void compute_arange(const ComputeParams& p, Tensor& dst);
void compute_argsort(const ComputeParams& p, Tensor& dst);

// Splits [0, n) into nth nearly equal parts; part ith is [*begin, *end).
inline void split_range(int64_t n, int ith, int nth, int64_t* begin, int64_t* end) {
    int64_t per = (n + nth - 1) / nth;
    *begin = per * ith < n ? per * ith : n;
    *end = *begin + per < n ? *begin + per : n;
}

// a rounded up to a multiple of m (m > 0).
constexpr int64_t round_up(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

// The f32 or f16 value at p (any alignment) as a float: a kernel operand that may be either type.
inline float load_f32_or_f16(Type type, const uint8_t* p) {
    if (type == Type::F16) {
        uint16_t h;
        std::memcpy(&h, p, sizeof h);
        return fp16_to_fp32(h);
    }
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline uint8_t* at(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return host_data(t) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

}  // namespace mb
