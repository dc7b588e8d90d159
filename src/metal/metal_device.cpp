#include "metal/metal_device.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/errors.h"
#include "core/tensor.h"
#include "metal/checked_runtime.h"
#include "metal/metal_backend.h"
#include "metal/metal_storage.h"
#include "metal/ops/ops.h"

namespace mb::metal {

namespace {

size_t page_size() {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : 4096;
}

class MetalBufferType final : public BufferType {
public:
    MetalBufferType(MetalDevice* device, std::string name, StorageMode mode)
        : BufferType(device, std::move(name), /*alignment=*/32, 0, /*is_host=*/false), device_(device), mode_(mode) {}

    size_t max_size() const override { return device_->props().max_buffer_size; }
    size_t alloc_size(const Tensor& t) const override { return t.nbytes() + extra_alloc_size(t); }

protected:
    std::shared_ptr<Storage> allocate_storage(size_t size) override {
        auto rt = device_->runtime_ptr();
        if (mode_ != StorageMode::Mapped) {
            auto buf = rt->alloc(size, mode_);
            void* host = buf->host_ptr();
            return std::make_shared<MetalStorage>(rt, std::vector<MetalStorage::View>{{buf, 0, size, 0}},
                                                  host, size, mode_);
        }
        // A mapped buffer of our own: page-aligned host memory, wrapped without copy.
        auto host = std::make_shared<HostStorage>(size, page_size());
        auto buf = rt->map(host->host_ptr(), (size + page_size() - 1) / page_size() * page_size());
        return std::make_shared<MetalStorage>(rt, std::vector<MetalStorage::View>{{buf, 0, size, 0}}, host->host_ptr(),
                                              size, StorageMode::Mapped, host);
    }

private:
    MetalDevice* device_;
    StorageMode mode_;
};

// Apple GPUs take at most 1024 threads per threadgroup; a pipeline may report fewer.
constexpr uint32_t kMaxThreadsPerThreadgroup = 1024;

bool parse_bool(const std::string& key, int64_t v) {
    if (v != 0 && v != 1) fail<InvalidArgumentError>("MetalDevice::set_prop", key, " takes 0 or 1, got ", v);
    return v == 1;
}

}  // namespace

MetalDevice::MetalDevice(std::string name, std::shared_ptr<Runtime> runtime)
    : name_(std::move(name)),
      runtime_(make_checked_runtime(std::move(runtime))),
      families_(std::make_unique<ShaderFamilies>(runtime_)),
      props_(runtime_->props()),
      use_shared_buffers_(props_.has_unified_memory),
      use_residency_sets_(props_.supports_residency_sets),
      max_threads_per_threadgroup_(kMaxThreadsPerThreadgroup) {
    shared_ = std::make_shared<MetalBufferType>(this, name_, StorageMode::Shared);
    private_ = std::make_shared<MetalBufferType>(this, name_ + "_Private", StorageMode::Private);
    mapped_ = std::make_shared<MetalBufferType>(this, name_ + "_Mapped", StorageMode::Mapped);
}

RuntimeProps MetalDevice::props() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return props_;
}

DeviceMemory MetalDevice::memory() const {
    size_t total = props().max_working_set_size, used = runtime_->allocated_size();
    return {used < total ? total - used : 0, total};
}

DeviceCaps MetalDevice::caps() const {
    DeviceCaps c;
    c.async = true;
    c.host_buffer = false;
    c.buffer_from_host_ptr = true;
    c.events = false;
    return c;
}

std::map<std::string, std::string> MetalDevice::extra_props() const {
    RuntimeProps p = props();
    std::lock_guard<std::mutex> lock(mutex_);
    std::string families;
    for (int f : p.families) families += (families.empty() ? "" : ",") + std::to_string(f);
    std::map<std::string, std::string> out{
        {"has_simdgroup_reduction", std::to_string(p.has_simdgroup_reduction)},
        {"has_simdgroup_mm", std::to_string(p.has_simdgroup_mm)},
        {"has_bfloat", std::to_string(p.has_bfloat)},
        {"has_unified_memory", std::to_string(p.has_unified_memory)},
        {"use_shared_buffers", std::to_string(use_shared_buffers_)},
        {"use_residency_sets", std::to_string(use_residency_sets_)},
        {"max_buffer_size", std::to_string(p.max_buffer_size)},
        {"max_working_set_size", std::to_string(p.max_working_set_size)},
        {"max_threadgroup_memory", std::to_string(p.max_threadgroup_memory)},
        {"max_threads_per_threadgroup", std::to_string(max_threads_per_threadgroup_)},
        {"offload_min_batch", std::to_string(offload_min_batch_)},
        {"families", families},
        {"shader_compile", std::to_string(static_cast<int64_t>(families_->strategy()))},
        {"reject_shader_families", rejected_families_},
        {"fault_kernels", fault_kernels_},
        {"profile", profile_},
        {"shader_compile_us_per_kernel", std::to_string(compile_us_per_kernel_)},
    };
    for (const auto& [family, state] : families_->states()) out["shader_family." + family] = state;
    return out;
}

void MetalDevice::set_prop(const std::string& key, int64_t value) {
    const RuntimeProps& hw = runtime_->props();
    std::lock_guard<std::mutex> lock(mutex_);
    auto narrow = [&](bool& field, bool hw_value) {
        bool v = parse_bool(key, value);
        if (v && !hw_value) fail<InvalidArgumentError>("MetalDevice::set_prop", "the GPU does not have ", key);
        field = v;
    };
    if (key == "has_simdgroup_reduction") {
        narrow(props_.has_simdgroup_reduction, hw.has_simdgroup_reduction);
    } else if (key == "has_simdgroup_mm") {
        narrow(props_.has_simdgroup_mm, hw.has_simdgroup_mm);
    } else if (key == "has_bfloat") {
        narrow(props_.has_bfloat, hw.has_bfloat);
    } else if (key == "use_shared_buffers") {
        narrow(use_shared_buffers_, hw.has_unified_memory);
    } else if (key == "use_residency_sets") {
        narrow(use_residency_sets_, hw.supports_residency_sets);
        runtime_->set_use_residency_sets(use_residency_sets_);
    } else if (key == "offload_min_batch") {
        if (value < 1)
            fail<InvalidArgumentError>("MetalDevice::set_prop", "offload_min_batch must be >= 1, got ", value);
        offload_min_batch_ = value;
    } else if (key == "max_buffer_size") {
        if (value < static_cast<int64_t>(page_size()) * 4 || static_cast<size_t>(value) > hw.max_buffer_size) {
            fail<InvalidArgumentError>("MetalDevice::set_prop", "max_buffer_size must be in [", page_size() * 4, ", ",
                                       hw.max_buffer_size, "], got ", value);
        }
        props_.max_buffer_size = static_cast<size_t>(value);
    } else if (key == "max_threadgroup_memory") {
        // Threadgroup memory is bound in multiples of 16 bytes.
        if (value < 1024 || static_cast<size_t>(value) > hw.max_threadgroup_memory || value % 16 != 0) {
            fail<InvalidArgumentError>("MetalDevice::set_prop",
                                       "max_threadgroup_memory must be a multiple of 16 in [1024, ",
                                       hw.max_threadgroup_memory, "], got ", value);
        }
        props_.max_threadgroup_memory = static_cast<size_t>(value);
        runtime_->set_limits({max_threads_per_threadgroup_, props_.max_threadgroup_memory});
    } else if (key == "shader_compile") {
        if (value < 0 || value > 2) {
            fail<InvalidArgumentError>("MetalDevice::set_prop",
                                       "shader_compile must be 0 (on demand), 1 (all up front) "
                                       "or 2 (all in parallel in the background), got ", value);
        }
        families_->set_strategy(static_cast<CompileStrategy>(value));
    } else if (key == "shader_compile_us_per_kernel") {
        if (value < 0 || value > 10'000'000) {
            fail<InvalidArgumentError>("MetalDevice::set_prop",
                                       "shader_compile_us_per_kernel must be in [0, 10000000], got ",
                                       value);
        }
        if (!runtime_->set_compile_cost(value)) {
            fail<InvalidArgumentError>("MetalDevice::set_prop", "shader_compile_us_per_kernel is MetalSim's: ", name_,
                                       " compiles with the system's Metal compiler");
        }
        compile_us_per_kernel_ = value;
    } else if (key == "max_threads_per_threadgroup") {
        // Whole simdgroups: the kernels assume 32 lanes each.
        if (value < 32 || value > kMaxThreadsPerThreadgroup || value % 32 != 0) {
            fail<InvalidArgumentError>("MetalDevice::set_prop",
                                       "max_threads_per_threadgroup must be a multiple of 32 in [32, ",
                                       kMaxThreadsPerThreadgroup, "], got ", value);
        }
        max_threads_per_threadgroup_ = static_cast<uint32_t>(value);
        runtime_->set_limits({max_threads_per_threadgroup_, props_.max_threadgroup_memory});
    } else {
        fail<InvalidArgumentError>("MetalDevice::set_prop", "unknown or read-only prop '", key,
                                   "' (settable: has_simdgroup_reduction, has_simdgroup_mm, has_bfloat, "
                                   "use_shared_buffers, use_residency_sets, offload_min_batch, max_buffer_size, "
                                   "max_threadgroup_memory, max_threads_per_threadgroup, shader_compile, "
                                   "shader_compile_us_per_kernel; text: "
                                   "reject_shader_families)");
    }
}

void MetalDevice::set_prop_text(const std::string& key, const std::string& value) {
    if (key == "profile") {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!runtime_->set_profile(value)) {
            fail<InvalidArgumentError>("MetalDevice::set_prop", "profile is MetalSim's: ", name_, " is the GPU it is");
        }
        // The new GPU's props, none narrowed.
        props_ = runtime_->props();
        use_shared_buffers_ = props_.has_unified_memory;
        use_residency_sets_ = props_.supports_residency_sets;
        profile_ = value;
        return;
    }
    if (key == "fault_kernels") {
        std::vector<std::string> names;
        for (size_t start = 0; start <= value.size();) {
            size_t end = value.find(',', start);
            if (end == std::string::npos) end = value.size();
            if (end > start) names.push_back(value.substr(start, end - start));
            start = end + 1;
        }
        if (!runtime_->set_fault_kernels(names)) {
            fail<InvalidArgumentError>("MetalDevice::set_prop", "fault_kernels is MetalSim's: ", name_,
                                       " runs its kernels on the GPU");
        }
        std::lock_guard<std::mutex> lock(mutex_);
        fault_kernels_ = value;
        return;
    }
    if (key != "reject_shader_families") {
        fail<InvalidArgumentError>("MetalDevice::set_prop", "unknown or read-only text prop '", key,
                                   "' (settable: reject_shader_families, fault_kernels, profile)");
    }
    const std::vector<std::string> known = runtime_->shader_families();
    std::vector<std::string> names;
    for (size_t start = 0; start <= value.size();) {
        size_t end = value.find(',', start);
        if (end == std::string::npos) end = value.size();
        std::string name = value.substr(start, end - start);
        name.erase(0, name.find_first_not_of(" \t"));
        name.erase(name.find_last_not_of(" \t") + 1);
        if (!name.empty()) {
            if (std::find(known.begin(), known.end(), name) == known.end()) {
                std::string all;
                for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
                fail<InvalidArgumentError>("MetalDevice::set_prop", "reject_shader_families: no shader family '", name,
                                           "' (families: ", all, ")");
            }
            names.push_back(name);
        }
        start = end + 1;
    }
    bool supported = true;
    families_->reset([&] { supported = runtime_->reject_families(names); });
    if (!supported) {
        fail<InvalidArgumentError>("MetalDevice::set_prop", "reject_shader_families is MetalSim's: ", name_,
                                   " compiles with the system's Metal compiler, which cannot be told to reject");
    }
    std::string joined;
    for (const auto& n : names) joined += (joined.empty() ? "" : ",") + n;
    std::lock_guard<std::mutex> lock(mutex_);
    rejected_families_ = joined;
}

std::shared_ptr<BufferType> MetalDevice::default_buffer_type() {
    std::lock_guard<std::mutex> lock(mutex_);
    return use_shared_buffers_ ? shared_ : private_;
}

bool MetalDevice::supports_buft(const BufferType& buft) const {
    return &buft == shared_.get() || &buft == private_.get() || &buft == mapped_.get();
}

// The op's rules first (cheap, and no compile for an op the device refuses anyway), then its shader
// family: compiled (or compiling, or compiled now) before the op is claimed.
bool MetalDevice::supports_op(const Tensor& node) const {
    if (!metal::supports_op(props(), node)) return false;
    families_->first_use();
    return families_->ready(shader_family(node.op));
}

std::vector<std::pair<std::string, std::string>> MetalDevice::shader_families(bool compile_all) {
    if (compile_all) {
        families_->first_use();
        for (const std::string& f : runtime_->shader_families()) families_->ready(f);
    }
    return families_->states();
}

std::string MetalDevice::shader_family_state(Op op) const { return families_->state(shader_family(op)); }

bool MetalDevice::offload_op(const Tensor& node) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return node.op == Op::MUL_MAT && node.ne[1] >= offload_min_batch_;
}

bool MetalDevice::supports_family(int family) const {
    RuntimeProps p = props();
    return std::find(p.families.begin(), p.families.end(), 1000 + family) != p.families.end();
}

std::shared_ptr<Buffer> MetalDevice::buffer_from_host_ptr(void* ptr, size_t size, size_t max_tensor_size,
                                                          std::shared_ptr<void> owner) {
    if (ptr == nullptr && size != 0)
        fail<InvalidArgumentError>("MetalDevice::buffer_from_host_ptr", "null pointer with size ", size);
    if (max_tensor_size > size) {
        fail<InvalidArgumentError>("MetalDevice::buffer_from_host_ptr", "max_tensor_size ", max_tensor_size,
                                   " exceeds the wrapped size ", size);
    }
    const size_t page = page_size();
    const size_t max_buf = props().max_buffer_size;
    // Metal wraps whole pages: align the start down and the end up.
    auto addr = reinterpret_cast<uintptr_t>(ptr);
    uintptr_t start = addr / page * page;
    size_t lead = addr - start;
    size_t span = (lead + size + page - 1) / page * page;
    std::vector<MetalStorage::View> views;
    if (span <= max_buf) {
        views.push_back({runtime_->map(reinterpret_cast<void*>(start), span), 0, size, lead});
    } else {
        // Overlapping views so that every tensor up to max_tensor_size lies whole in one of them.
        size_t overlap = ((max_tensor_size + page - 1) / page + 1) * page;
        if (overlap >= max_buf) {
            fail<InvalidArgumentError>("MetalDevice::buffer_from_host_ptr", "max_tensor_size ", max_tensor_size,
                                       " needs views larger than max_buffer_size ", max_buf);
        }
        size_t step = max_buf - overlap;
        for (size_t off = 0; off < span; off += step) {
            size_t len = std::min(max_buf, span - off);
            auto buf = runtime_->map(reinterpret_cast<void*>(start + off), len);
            size_t begin = off > lead ? off - lead : 0;
            size_t end = std::min(size, off + len - lead);
            // delta = lead - off, taken modulo 2^64: offsets wrap back into range when added.
            views.push_back({buf, begin, end, lead - off});
            if (off + len >= span) break;
        }
    }
    auto storage = std::make_shared<MetalStorage>(runtime_, std::move(views), ptr, size, StorageMode::Mapped,
                                                  std::move(owner));
    return std::make_shared<Buffer>(mapped_, std::move(storage), mapped_->name());
}

std::shared_ptr<Backend> MetalDevice::init_backend(const std::string& params) {
    families_->first_use();
    auto backend = std::make_shared<MetalBackend>(std::static_pointer_cast<MetalDevice>(shared_from_this()));
    backend->apply_params(params);
    return backend;
}

}  // namespace mb::metal
