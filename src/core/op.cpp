#include "core/op.h"

#include <cstddef>
#include <cstdint>

namespace mb {

namespace {

constexpr OpKind kVIEW = OpKind::View;
constexpr OpKind kMAP = OpKind::Map;
constexpr OpKind kEW = OpKind::Ew;
constexpr OpKind kOP = OpKind::Op;

const OpInfo kOps[] = {
#define MB_OP(NAME, FAMILY, KIND, PY) {#NAME, OpFamily::FAMILY, k##KIND, PY},
#include "op_table.h"
};

static_assert(sizeof(kOps) / sizeof(kOps[0]) == static_cast<size_t>(Op::COUNT), "one row per op");

}  // namespace

const OpInfo& op_info(Op op) { return kOps[static_cast<int32_t>(op)]; }

const char* op_family_name(OpFamily f) {
    switch (f) {
#define MB_FAMILY_NAME(F) \
    case OpFamily::F:     \
        return #F;
        MB_OP_FAMILIES(MB_FAMILY_NAME)
#undef MB_FAMILY_NAME
    }
    return "?";
}

const char* op_kind_name(OpKind k) {
    switch (k) {
        case OpKind::View: return "VIEW";
        case OpKind::Map: return "MAP";
        case OpKind::Ew: return "EW";
        case OpKind::Op: return "OP";
    }
    return "?";
}

}  // namespace mb
