// A CPU backend: computes graphs on the host with its own number of threads.
#pragma once

#include <memory>
#include <string>

#include "core/backend.h"

namespace mb {

class CpuDevice;

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(std::shared_ptr<CpuDevice> device);

    std::string name() const override { return "CPU"; }
    std::shared_ptr<Device> device() const override;

    int n_threads() const { return static_cast<int>(option("n_threads")); }

private:
    std::shared_ptr<CpuDevice> device_;
};

}  // namespace mb
