#include "core/buffer_type.h"

#include <cstddef>
#include <memory>

#include "core/buffer.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/tensor.h"

namespace mb {

size_t BufferType::alloc_size(const Tensor& t) const { return t.nbytes(); }

std::shared_ptr<Buffer> BufferType::alloc(size_t size) {
    const size_t limit = max_size();
    if (size > limit) {
        fail<OutOfMemoryError>("BufferType::alloc", "cannot allocate ", size, " bytes from '", name_,
                               "': max_size is ", limit);
    }
    const size_t total = device_->memory().total;
    if (total != 0 && size > total) {
        fail<OutOfMemoryError>("BufferType::alloc", "cannot allocate ", size, " bytes from '", name_,
                               "': device '", device_->name(), "' has ", total, " bytes in total");
    }
    return std::make_shared<Buffer>(shared_from_this(), allocate_storage(size), name_);
}

}  // namespace mb
