#include "cpu/cpu_backend.h"

#include "cpu/cpu_device.h"
#include "cpu/host_info.h"

namespace mb {

CpuBackend::CpuBackend(std::shared_ptr<CpuDevice> device) : device_(std::move(device)) {
    declare_option("n_threads", host_core_count(), 1, 512);
}

std::shared_ptr<Device> CpuBackend::device() const { return device_; }

}  // namespace mb
