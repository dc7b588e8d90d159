#include "metal/ops/op_encoder.h"

#include "core/buffer.h"
#include "core/errors.h"
#include "metal/metal_storage.h"

namespace mb::metal {

const Pipeline& OpEncoder::use(const std::string& name, const std::vector<FunctionConstant>& constants) {
    auto p = runtime_.pipeline(name, constants);  // cached by the runtime; lives as long as it
    enc_.set_pipeline(*p);
    return *p;
}

void OpEncoder::error_record(uint32_t index) {
    if (!error_record_) fail<InvalidArgumentError>("OpEncoder::error_record", "this encoder has no error record");
    enc_.set_buffer(*error_record_, 0, index);
}

void OpEncoder::tensor(const Tensor& t, uint32_t index, size_t extra) {
    const auto& buf = t.data_buffer();
    if (!buf) fail<InvalidArgumentError>("OpEncoder::tensor", "tensor ", t.describe(), " is not allocated");
    auto storage = buf->storage("OpEncoder::tensor");
    auto* ms = dynamic_cast<MetalStorage*>(storage.get());
    if (!ms) fail<InvalidArgumentError>("OpEncoder::tensor", "tensor ", t.describe(), " is not in Metal memory");
    DeviceRef ref = ms->locate(t.data_offset(), t.nbytes() + extra);
    enc_.set_buffer(*ref.buffer, ref.offset, index);
}

}  // namespace mb::metal
