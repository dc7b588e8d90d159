// Resolves Tensor::data for every tensor of a graph for the duration of one CPU compute, and orders
// computes that share tensors across backends and threads:
// - memory a compute reads (weights, inputs) may be read by any number of computes at once;
// - memory a compute writes (its nodes, and roots written in place through views) is used by no
//   other compute meanwhile: a compute that would read or write it waits until the other is done;
//   a thread already inside a compute (an abort callback computing on another backend) is refused
//   with DeviceError instead of waiting, since the compute it waits for could be its own.
// Storages are held, so a concurrent free() cannot pull memory away mid-compute.
#pragma once

#include <memory>
#include <unordered_set>
#include <vector>

#include "core/graph.h"
#include "core/tensor.h"

namespace mb {

class Device;
class Storage;

class HostBinding {
public:
    // Throws InvalidArgumentError/OutOfRangeError for tensors the device cannot compute on (not
    // allocated, another device's buffer, freed, out of range) before anything is bound.
    HostBinding(const Graph& graph, const Device& device, const char* who);
    ~HostBinding();
    HostBinding(const HostBinding&) = delete;
    HostBinding& operator=(const HostBinding&) = delete;

private:
    struct Bound {
        Tensor* tensor;
        void* data;
    };
    void add(Tensor& t, bool written, const Device& device, const char* who);
    // The first tensor another compute keeps this one from using now, or nullptr.
    const Tensor* conflict() const;

    std::vector<Bound> bound_;
    std::unordered_set<const Tensor*> bound_set_;
    std::vector<Tensor*> written_roots_;
    std::vector<Tensor*> read_roots_;
    std::unordered_set<const Storage*> seen_storages_;
    std::vector<std::shared_ptr<Storage>> storages_;
};

}  // namespace mb
