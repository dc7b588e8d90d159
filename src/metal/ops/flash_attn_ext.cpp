// FLASH_ATTN_EXT on the Metal device (shaders/flash_attn_ext.metal): k and v f16, f32 or quantized
// (q4_0 q4_1 q5_0 q5_1 q8_0); head sizes 40 64 80 96 112 128 192 256. Fewer than kVecMaxRows q rows
// take the vector path: the keys are split over kVecWorkgroups workgroups whose partial results go
// to a scratch area behind dst (flash_attn_ext_extra_size), then a reduce kernel combines them.
// More q rows take the tiled path: threadgroups of 8*nsg q rows walk k/v tiles kept in threadgroup
// memory; nsg and the tile length are the largest that fit the device's threadgroup memory.
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "kargs.h"
#include "metal/ops/ops.h"

namespace mb::metal {

namespace {

constexpr int64_t kVecMaxRows = 20;   // METAL-SPEC: vector path when n_q < 20
constexpr int kVecWorkgroups = 32;

struct TileConfig {
    int nsg = 0;   // simdgroups per threadgroup (8 q rows each); 0: nothing fits
    int n_kv = 0;  // keys per tile
    size_t kv_bytes = 0;
    size_t sg_bytes = 0;
};

bool head_size_ok(int64_t d) {
    switch (d) {
        case 40: case 64: case 80: case 96: case 112: case 128: case 192: case 256:
            return true;
        default:
            return false;
    }
}

// The kernels' name suffix for a k/v type; nullptr when none handles it.
const char* kv_suffix(Type t) {
    switch (t) {
        case Type::F16: return "f16";
        case Type::F32: return "f32";
        case Type::BF16: return "bf16";
        case Type::Q4_0: return "q4_0";
        case Type::Q4_1: return "q4_1";
        case Type::Q5_0: return "q5_0";
        case Type::Q5_1: return "q5_1";
        case Type::Q8_0: return "q8_0";
        default: return nullptr;
    }
}

bool use_vec(const Tensor& node) { return node.src[0]->ne[1] < kVecMaxRows; }

// Largest configuration whose threadgroup memory fits; more simdgroups first (k/v tiles are shared
// by more q rows), then longer tiles.
TileConfig tile_config(const RuntimeProps& props, int64_t d, Type kv_type) {
    static const int kCandidates[][2] = {{4, 32}, {2, 32}, {4, 16}, {2, 16}, {1, 32}, {1, 16}, {1, 8}};
    const size_t es = kv_type == Type::F16 ? 2 : 4;  // bf16 and quantized values are staged as f32
    for (const auto& c : kCandidates) {
        TileConfig t;
        t.nsg = c[0];
        t.n_kv = c[1];
        t.kv_bytes = size_t(2) * size_t(t.n_kv) * size_t(d) * es;
        t.sg_bytes = size_t(t.nsg) * (8 * size_t(d) + 8 * size_t(t.n_kv) + 64) * sizeof(float);
        // Each threadgroup memory binding is rounded up to 16 bytes (OpEncoder::threadgroup_memory).
        if ((t.kv_bytes + 15) / 16 * 16 + (t.sg_bytes + 15) / 16 * 16 <= props.max_threadgroup_memory) return t;
    }
    return {};
}

bool fits_i32(int64_t v) { return v >= 0 && v <= INT_MAX; }

void alibi(float max_bias, int64_t n_head, float* m0, float* m1, int32_t* n_head_log2) {
    const int64_t nl = int64_t(1) << int64_t(std::floor(std::log2(double(n_head > 0 ? n_head : 1))));
    *n_head_log2 = int32_t(nl);
    *m0 = std::pow(2.0f, -max_bias / float(nl));
    *m1 = std::pow(2.0f, -(max_bias / 2.0f) / float(nl));
}

}  // namespace

bool supports_flash_attn_ext(const RuntimeProps& props, const Tensor& node) {
    if (!props.has_simdgroup_mm || !props.has_simdgroup_reduction) return false;
    const Tensor* q = node.src[0];
    const Tensor* k = node.src[1];
    const Tensor* v = node.src[2];
    const Tensor* mask = node.src[3];
    if (q == nullptr || k == nullptr || v == nullptr) return false;
    if (q->type != Type::F32 || node.type != Type::F32) return false;
    if (k->type != v->type || kv_suffix(k->type) == nullptr) return false;
    const int64_t d = q->ne[0];
    if (!head_size_ok(d) || k->ne[0] != d || v->ne[0] != d) return false;
    // Quantized rows are read block by block.
    const TypeTraits& kt = type_traits(k->type);
    if (kt.is_quantized && (d % kt.block_size != 0 || k->nb[0] != kt.type_size || v->nb[0] != kt.type_size)) {
        return false;
    }
    if (k->ne[1] <= 0 || k->ne[1] != v->ne[1] || k->ne[2] != v->ne[2] || k->ne[3] != v->ne[3]) return false;
    if (k->ne[2] <= 0 || k->ne[3] <= 0 || q->ne[2] % k->ne[2] != 0 || q->ne[3] % k->ne[3] != 0) return false;
    if (node.ne[0] != d || node.ne[1] != q->ne[2] || node.ne[2] != q->ne[1] || node.ne[3] != q->ne[3]) return false;
    if (node.nb[0] != sizeof(float)) return false;
    for (int i = 1; i < kMaxDims; ++i) {
        if (!fits_i32(q->ne[i]) || !fits_i32(k->ne[i])) return false;
    }
    if (mask) {
        if (mask->type != Type::F16 && mask->type != Type::F32) return false;
        if (mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1]) return false;
        if (mask->ne[2] <= 0 || mask->ne[3] <= 0 || q->ne[2] % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0) {
            return false;
        }
    }
    if (use_vec(node)) {
        // q row and one probability per lane.
        return (d + 32) * sizeof(float) <= props.max_threadgroup_memory && fits_i32(q->ne[3] * kVecWorkgroups);
    }
    return tile_config(props, d, k->type).nsg > 0;
}

size_t flash_attn_ext_extra_size(const Tensor& node) {
    if (node.op != Op::FLASH_ATTN_EXT || node.src[0] == nullptr || node.src[2] == nullptr || !use_vec(node)) return 0;
    const Tensor& q = *node.src[0];
    const Tensor& v = *node.src[2];
    return sizeof(float) * size_t(q.ne[1] * q.ne[2] * q.ne[3]) * kVecWorkgroups * size_t(v.ne[0] + 2);
}

size_t encode_flash_attn_ext(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    const Tensor& q = *dst.src[0];
    const Tensor& k = *dst.src[1];
    const Tensor& v = *dst.src[2];
    const Tensor* mask = dst.src[3];
    if (dst.is_empty()) return 1;

    mb_kargs_flash_attn_ext a{};
    a.ne01 = int32_t(q.ne[1]);
    a.ne02 = int32_t(q.ne[2]);
    a.ne03 = int32_t(q.ne[3]);
    a.ne11 = int32_t(k.ne[1]);
    a.ne12 = int32_t(k.ne[2]);
    a.ne13 = int32_t(k.ne[3]);
    MB_SET_NB(a, nb0, q);
    MB_SET_NB(a, nb1, k);
    MB_SET_NB(a, nb2, v);
    a.ne32 = 1;
    a.ne33 = 1;
    if (mask) {
        a.has_mask = 1;
        a.mask_f32 = mask->type == Type::F32 ? 1 : 0;
        a.ne32 = int32_t(mask->ne[2]);
        a.ne33 = int32_t(mask->ne[3]);
        a.nb30 = mask->nb[0];
        a.nb31 = mask->nb[1];
        a.nb32 = mask->nb[2];
        a.nb33 = mask->nb[3];
    }
    a.nb1 = dst.nb[1];
    a.nb2 = dst.nb[2];
    a.nb3 = dst.nb[3];
    a.scale = dst.param_f(0);
    a.max_bias = dst.param_f(1);
    a.softcap = dst.param_f(2);
    alibi(a.max_bias, q.ne[2], &a.m0, &a.m1, &a.n_head_log2);

    const std::string kv = kv_suffix(k.type);
    const FunctionConstant head_size = FunctionConstant::int32(MB_FC_FA_D, int32_t(q.ne[0]));
    if (use_vec(dst)) {
        a.nwg = kVecWorkgroups;
        a.scratch_offs = dst.nbytes();
        const size_t scratch = flash_attn_ext_extra_size(dst);
        enc.use("kernel_flash_attn_ext_vec_" + kv, {head_size});
        enc.args(a);
        enc.input(q, 1);
        enc.input(k, 2);
        enc.input(v, 3);
        enc.input(mask ? *mask : q, 4);
        enc.output(dst, 5, scratch);
        enc.threadgroup_memory((size_t(q.ne[0]) + 32) * sizeof(float), 0);
        enc.dispatch({uint32_t(q.ne[1]), uint32_t(q.ne[2]), uint32_t(q.ne[3] * kVecWorkgroups)}, {32, 1, 1});

        mb_kargs_flash_attn_ext_reduce r{};
        r.ne01 = a.ne01;
        r.ne02 = a.ne02;
        r.ne03 = a.ne03;
        r.dv = int32_t(v.ne[0]);
        r.nwg = kVecWorkgroups;
        r.nb1 = dst.nb[1];
        r.nb2 = dst.nb[2];
        r.nb3 = dst.nb[3];
        r.scratch_offs = dst.nbytes();
        enc.use("kernel_flash_attn_ext_vec_reduce");
        enc.args(r);
        enc.output(dst, 1, scratch);
        enc.dispatch({uint32_t(q.ne[2]), uint32_t(q.ne[1]), uint32_t(q.ne[3])}, {32, 1, 1});
        return 1;
    }

    const TileConfig tc = tile_config(enc.props(), q.ne[0], k.type);
    if (tc.nsg == 0) {
        fail<UnsupportedOpError>("metal::encode_flash_attn_ext", "head size ", q.ne[0], " does not fit ",
                                 enc.props().max_threadgroup_memory, " bytes of threadgroup memory");
    }
    enc.use("kernel_flash_attn_ext_" + kv, {head_size, FunctionConstant::int32(MB_FC_FA_N_KV_TILE, tc.n_kv)});
    enc.args(a);
    enc.input(q, 1);
    enc.input(k, 2);
    enc.input(v, 3);
    enc.input(mask ? *mask : q, 4);
    enc.output(dst, 5);
    enc.threadgroup_memory(tc.kv_bytes, 0);
    enc.threadgroup_memory(tc.sg_bytes, 1);
    const int64_t rows = 8 * int64_t(tc.nsg);
    enc.dispatch({uint32_t((q.ne[1] + rows - 1) / rows), uint32_t(q.ne[2]), uint32_t(q.ne[3])},
                 {uint32_t(32 * tc.nsg), 1, 1});
    return 1;
}

}  // namespace mb::metal
