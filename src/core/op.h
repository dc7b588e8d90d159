// The operations a graph node can hold, with ggml's names and semantics, generated from the table of
// ops (shaders/op_table.h): one row per op. Unary activations are ops of their own (ggml nests them
// under GGML_OP_UNARY); the rest follow ggml one for one.
#pragma once

#include <cstdint>

namespace mb {

enum class Op : int32_t {
#define MB_OP(NAME, FAMILY, KIND, PY) NAME,
#include "op_table.h"
    COUNT
};

// The ops one kernel family serves, on every device (src/cpu/kernels/<family>.cpp,
// src/metal/ops/<family>.cpp, shaders/<family>.metal). Views have none.
#define MB_OP_FAMILIES(X) \
    X(None) X(Binary) X(Unary) X(Norm) X(SoftMax) X(Reduce) X(FlashAttnExt) X(MulMat) X(Copy) X(Rows) X(Im2col) \
    X(Layout) X(Rope) X(Glu) \
    X(Arange) X(Argsort) X(MulMatId) X(AddId) X(TimestepEmbedding) \
    X(ConvTranspose1d) X(Pool2d) X(Upscale) X(SsmConv) X(Acc) X(SsmScan) X(RwkvWkv) \
    X(TopK) X(Cumsum) X(Tri) X(OutProd) X(Pool1d) X(Conv2d) X(ConvTranspose2d)
enum class OpFamily {
#define MB_FAMILY_ENUM(F) F,
    MB_OP_FAMILIES(MB_FAMILY_ENUM)
#undef MB_FAMILY_ENUM
};
const char* op_family_name(OpFamily f);  // "Binary", ...

// How an op is bound and what it computes (op_table.h's KIND column).
enum class OpKind { View, Map, Ew, Op };
const char* op_kind_name(OpKind k);  // "VIEW", "MAP", "EW", "OP"

struct OpInfo {
    const char* name;  // "ADD", "MUL_MAT", ...
    OpFamily family;
    OpKind kind;
    const char* py;  // its name in mb.ops ("" for NONE)
};

inline bool op_valid(Op op) { return static_cast<int32_t>(op) >= 0 && op < Op::COUNT; }

// The table's row of op (op_valid(op)).
const OpInfo& op_info(Op op);

inline const char* op_name(Op op) { return op_valid(op) ? op_info(op).name : "?"; }
inline OpFamily op_family(Op op) { return op_valid(op) ? op_info(op).family : OpFamily::None; }

// Ops that only describe memory (no kernel runs for them).
inline bool op_is_view(Op op) { return op_valid(op) && op_info(op).kind == OpKind::View; }

// One output element per input element (the binary and unary families).
inline bool op_is_elementwise(Op op) {
    const OpFamily f = op_family(op);
    return f == OpFamily::Binary || f == OpFamily::Unary;
}

}  // namespace mb
