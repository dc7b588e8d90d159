#include "core/op.h"

namespace mb {

const char* op_name(Op op) {
    switch (op) {
        case Op::NONE: return "NONE";
        case Op::ADD: return "ADD";
        case Op::SUB: return "SUB";
        case Op::MUL: return "MUL";
        case Op::DIV: return "DIV";
        case Op::SCALE: return "SCALE";
        case Op::CLAMP: return "CLAMP";
        case Op::SQR: return "SQR";
        case Op::SQRT: return "SQRT";
        case Op::LOG: return "LOG";
        case Op::SIN: return "SIN";
        case Op::COS: return "COS";
        case Op::GELU: return "GELU";
        case Op::GELU_ERF: return "GELU_ERF";
        case Op::GELU_QUICK: return "GELU_QUICK";
        case Op::SILU: return "SILU";
        case Op::RELU: return "RELU";
        case Op::TANH: return "TANH";
        case Op::SIGMOID: return "SIGMOID";
        case Op::NEG: return "NEG";
        case Op::ABS: return "ABS";
        case Op::EXP: return "EXP";
        case Op::NORM: return "NORM";
        case Op::RMS_NORM: return "RMS_NORM";
        case Op::SOFT_MAX: return "SOFT_MAX";
        case Op::SUM_ROWS: return "SUM_ROWS";
        case Op::MEAN: return "MEAN";
        case Op::ARGMAX: return "ARGMAX";
        case Op::FLASH_ATTN_EXT: return "FLASH_ATTN_EXT";
        case Op::MUL_MAT: return "MUL_MAT";
        case Op::DUP: return "DUP";
        case Op::CPY: return "CPY";
        case Op::CONT: return "CONT";
        case Op::GET_ROWS: return "GET_ROWS";
        case Op::SET_ROWS: return "SET_ROWS";
        case Op::IM2COL: return "IM2COL";
        case Op::CONCAT: return "CONCAT";
        case Op::REPEAT: return "REPEAT";
        case Op::PAD: return "PAD";
        case Op::PAD_REFLECT_1D: return "PAD_REFLECT_1D";
        case Op::ROPE: return "ROPE";
        case Op::RESHAPE: return "RESHAPE";
        case Op::VIEW: return "VIEW";
        case Op::PERMUTE: return "PERMUTE";
        case Op::TRANSPOSE: return "TRANSPOSE";
        case Op::COUNT: break;
    }
    return "?";
}

OpFamily op_family(Op op) {
    switch (op) {
        case Op::ADD: case Op::SUB: case Op::MUL: case Op::DIV:
            return OpFamily::Binary;
        case Op::SCALE: case Op::CLAMP: case Op::SQR: case Op::SQRT: case Op::LOG: case Op::SIN: case Op::COS:
        case Op::GELU: case Op::GELU_ERF: case Op::GELU_QUICK: case Op::SILU: case Op::RELU: case Op::TANH:
        case Op::SIGMOID: case Op::NEG: case Op::ABS: case Op::EXP:
            return OpFamily::Unary;
        case Op::NORM: case Op::RMS_NORM: return OpFamily::Norm;
        case Op::SOFT_MAX: return OpFamily::SoftMax;
        case Op::SUM_ROWS: case Op::MEAN: case Op::ARGMAX: return OpFamily::Reduce;
        case Op::FLASH_ATTN_EXT: return OpFamily::FlashAttnExt;
        case Op::MUL_MAT: return OpFamily::MulMat;
        case Op::DUP: case Op::CPY: case Op::CONT: return OpFamily::Copy;
        case Op::GET_ROWS: case Op::SET_ROWS: return OpFamily::Rows;
        case Op::IM2COL: return OpFamily::Im2col;
        case Op::CONCAT: case Op::REPEAT: case Op::PAD: case Op::PAD_REFLECT_1D: return OpFamily::Layout;
        case Op::ROPE: return OpFamily::Rope;
        case Op::NONE: case Op::RESHAPE: case Op::VIEW: case Op::PERMUTE: case Op::TRANSPOSE: case Op::COUNT:
            break;
    }
    return OpFamily::None;
}

}  // namespace mb
