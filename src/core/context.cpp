#include "core/context.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "core/errors.h"

namespace mb {

static void check_dims(const char* who, Type type, const int64_t ne[kMaxDims], int n_dims) {
    if (n_dims < 1 || n_dims > kMaxDims)
        fail<InvalidArgumentError>(who, "tensors have 1 to 4 dimensions, got ", n_dims);
    const auto& tr = type_traits(type);
    double elements = 1;
    for (int i = 0; i < kMaxDims; ++i) {
        if (ne[i] < 0) fail<InvalidArgumentError>(who, "dimension ", i, " (ggml order) is negative: ", ne[i]);
        if (i >= n_dims && ne[i] != 1) fail<InvalidArgumentError>(who, "dimension ", i, " beyond n_dims must be 1");
        elements *= static_cast<double>(ne[i]);
    }
    if (ne[0] % tr.block_size != 0) {
        fail<InvalidArgumentError>(who, "type ", tr.name, " stores blocks of ", tr.block_size,
                                   " values: the last (innermost) dimension ", ne[0], " is not a multiple of it");
    }
    if (elements * static_cast<double>(tr.type_size) / static_cast<double>(tr.block_size) >
        static_cast<double>(std::numeric_limits<int64_t>::max())) {
        fail<InvalidArgumentError>(who, "tensor of ", elements, " elements is too large");
    }
}

Tensor* Context::new_tensor(Type type, const int64_t ne[kMaxDims], int n_dims, const std::string& name) {
    check_dims("Context::tensor", type, ne, n_dims);
    auto t = std::make_unique<Tensor>();
    t->type = type;
    t->n_dims = n_dims;
    for (int i = 0; i < kMaxDims; ++i) t->ne[i] = ne[i];
    contiguous_strides(type, t->ne, t->nb);
    t->name = name;
    t->ctx = this;
    tensors_.push_back(std::move(t));
    return tensors_.back().get();
}

Tensor* Context::new_view(Tensor* src, Op op, const int64_t ne[kMaxDims], const size_t nb[kMaxDims], int n_dims,
                          size_t offset) {
    check_dims("Context::view", src->type, ne, n_dims);
    auto t = std::make_unique<Tensor>();
    t->type = src->type;
    t->n_dims = n_dims;
    for (int i = 0; i < kMaxDims; ++i) {
        t->ne[i] = ne[i];
        t->nb[i] = nb[i];
    }
    t->op = op;
    t->src[0] = src;
    t->view_src = src->view_src ? src->view_src : src;
    t->view_offs = src->view_offs + offset;
    t->name = src->name.empty() ? std::string() : src->name + " (view)";
    t->ctx = this;
    tensors_.push_back(std::move(t));
    return tensors_.back().get();
}

}  // namespace mb
