// MUL_MAT on the Metal device (shaders/mul_mat.metal). a: f32, f16, bf16 or quantized; b: f32 (or
// f16 when a is f16); dst f32. Rows of a and b must be packed; the row, matrix and batch strides of
// both are free (so permuted activations need no copy), broadcast over dims 2 and 3 as ggml.
//
// Path by shape, as ggml: one b column -> mat-vec; up to MB_MV_EXT_MAX columns -> the small-batch
// mat-vec, which reads each chunk of a once for all its columns; more columns -> simdgroup-matrix
// tiles when the GPU has them and K is long enough to fill the 32-deep k steps (>= 64), else the
// small-batch kernel over groups of MB_MV_EXT_MAX columns.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

namespace {

constexpr int64_t kMinTiledK = 64;

bool weight_type(Type t) {
    switch (t) {
        case Type::F32: case Type::F16: case Type::BF16: case Type::Q4_0: case Type::Q4_1: case Type::Q5_0:
        case Type::Q5_1: case Type::Q8_0: case Type::Q2_K: case Type::Q3_K: case Type::Q4_K: case Type::Q5_K:
        case Type::Q6_K: case Type::IQ4_NL: case Type::IQ4_XS: case Type::MXFP4: case Type::IQ2_XXS:
        case Type::IQ2_XS: case Type::IQ2_S: case Type::IQ3_XXS: case Type::IQ3_S: case Type::IQ1_S: case Type::IQ1_M:
            return true;
        case Type::I32: case Type::Q8_K:
            break;
    }
    return false;
}

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

}  // namespace

bool supports_mul_mat(const RuntimeProps& props, const Tensor& node) {
    const Tensor* a = node.src[0];
    const Tensor* b = node.src[1];
    if (node.op != Op::MUL_MAT || !a || !b || !props.has_simdgroup_reduction || node.type != Type::F32) return false;
    const bool types = (b->type == Type::F32 && weight_type(a->type)) || (b->type == Type::F16 && a->type == Type::F16);
    if (!types) return false;
    if (a->nb[0] != type_traits(a->type).type_size || b->nb[0] != type_traits(b->type).type_size) return false;
    if (!naturally_aligned(*a) || !naturally_aligned(*b) || !naturally_aligned(node)) return false;
    if (node.nb[0] != sizeof(float)) return false;
    if (a->ne[0] != b->ne[0] || a->ne[2] <= 0 || a->ne[3] <= 0 || b->ne[2] % a->ne[2] != 0 ||
        b->ne[3] % a->ne[3] != 0) {
        return false;
    }
    if (node.ne[0] != a->ne[1] || node.ne[1] != b->ne[1] || node.ne[2] != b->ne[2] || node.ne[3] != b->ne[3]) {
        return false;
    }
    // Every matrix of b is one threadgroup row of the grid, counted in 32 bits.
    return fits_i32(*a) && fits_i32(*b) && b->ne[2] * b->ne[3] <= INT32_MAX;
}

size_t encode_mul_mat(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    if (dst.is_empty()) return 1;

    mb_kargs_mul_mat args{};
    args.nb01 = a.nb[1];
    args.nb02 = a.nb[2];
    args.nb03 = a.nb[3];
    args.nb11 = b.nb[1];
    args.nb12 = b.nb[2];
    args.nb13 = b.nb[3];
    args.nb1 = dst.nb[1];
    args.nb2 = dst.nb[2];
    args.nb3 = dst.nb[3];
    args.ne00 = int32_t(a.ne[0]);
    args.ne01 = int32_t(a.ne[1]);
    args.ne11 = int32_t(b.ne[1]);
    args.ne12 = int32_t(b.ne[2]);
    args.r2 = int32_t(b.ne[2] / a.ne[2]);
    args.r3 = int32_t(b.ne[3] / a.ne[3]);

    const std::string types = std::string(type_traits(a.type).name) + "_" + type_traits(b.type).name;
    const int64_t m = a.ne[1];
    const int64_t n = b.ne[1];
    const uint32_t matrices = uint32_t(b.ne[2] * b.ne[3]);

    if (n > MB_MV_EXT_MAX && a.ne[0] >= kMinTiledK && enc.props().has_simdgroup_mm) {
        // Staged tiles of a and b, and the f32 output block [MB_MM_N][MB_MM_M] of edge tiles.
        const size_t tile = a.type == Type::F16 && b.type == Type::F16 ? 2 : 4;
        const size_t shmem = std::max((MB_MM_M + MB_MM_N) * 32 * tile, size_t(MB_MM_N * MB_MM_M * 4));
        enc.use("kernel_mul_mm_" + types);
        enc.args(args);
        enc.input(a, 1);
        enc.input(b, 2);
        enc.output(dst, 3);
        enc.threadgroup_memory(shmem, 0);
        enc.dispatch({uint32_t(ceil_div(m, MB_MM_M)), uint32_t(ceil_div(n, MB_MM_N)), matrices},
                     {MB_MM_THREADS, 1, 1});
        return 1;
    }

    const int64_t rows_per_group = MB_MV_NSG * MB_MV_NR;
    int64_t cols = 1;
    if (n == 1) {
        enc.use("kernel_mul_mv_" + types);
    } else {
        cols = std::min<int64_t>(n, MB_MV_EXT_MAX);
        enc.use("kernel_mul_mv_ext_" + types, {FunctionConstant::int16(MB_FC_MUL_MV_EXT_COLS, int16_t(cols))});
    }
    enc.args(args);
    enc.input(a, 1);
    enc.input(b, 2);
    enc.output(dst, 3);
    enc.dispatch({uint32_t(ceil_div(m, rows_per_group)), uint32_t(ceil_div(n, cols)), matrices},
                 {MB_MV_NSG * 32, 1, 1});
    return 1;
}

}  // namespace mb::metal
