#include "metal/sim/runtime_sim.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "cpu/host_info.h"
#include "metal/sim/executor.h"
#include "metal/sim/racecheck.h"

namespace mb::metal {

namespace {

class SimBuffer final : public RtBuffer {
public:
    SimBuffer(uint8_t* data, size_t size, StorageMode mode, bool owned, std::atomic<size_t>* counter)
        : data_(data), size_(size), mode_(mode), owned_(owned), counter_(counter) {
        if (owned_) *counter_ += size_;
    }
    ~SimBuffer() override {
        if (owned_) {
            std::free(data_);
            *counter_ -= size_;
        }
    }
    size_t size() const override { return size_; }
    StorageMode mode() const override { return mode_; }
    void* host_ptr() const override { return mode_ == StorageMode::Private ? nullptr : data_; }
    uint8_t* device_data() const { return data_; }

private:
    uint8_t* data_;
    size_t size_;
    StorageMode mode_;
    bool owned_;
    std::atomic<size_t>* counter_;
};

const SimBuffer& sim(const RtBuffer& b) { return static_cast<const SimBuffer&>(b); }

class SimPipeline final : public Pipeline {
public:
    SimPipeline(const sim::KernelInfo* kernel, std::vector<sim::FunctionConstant> constants)
        : kernel_(kernel), name_(kernel->name), constants_(std::move(constants)) {}
    const std::string& name() const override { return name_; }
    uint32_t max_threads_per_threadgroup() const override { return kernel_->max_threads; }
    uint32_t thread_execution_width() const override { return 32; }
    const sim::KernelInfo* kernel() const { return kernel_; }
    const std::vector<sim::FunctionConstant>& constants() const { return constants_; }

private:
    const sim::KernelInfo* kernel_;
    std::string name_;
    std::vector<sim::FunctionConstant> constants_;
};

struct BufferSlot {
    const SimBuffer* buffer = nullptr;
    size_t offset = 0;
};

struct Command {
    enum class Kind { Dispatch, Barrier, Copy, Fill };
    // Built from its kind alone (Command{kind}); as an aggregate that would leave every other field
    // to -Wmissing-field-initializers.
    explicit Command(Kind k) : kind(k) {}
    Kind kind;
    bool concurrent = false;  // dispatch of a concurrent pass
    // Dispatch
    const SimPipeline* pipeline = nullptr;
    std::vector<uint8_t> args;
    std::vector<BufferSlot> buffers;
    std::vector<size_t> threadgroup_memory;
    Size3 groups, threads;
    // Copy / Fill
    const SimBuffer* src = nullptr;
    const SimBuffer* dst = nullptr;
    size_t src_offset = 0, dst_offset = 0, n = 0;
    uint8_t value = 0;
};

// What the queue thread needs of a committed command buffer; shared so the CommandBuffer object
// may go before its work completes.
struct Work {
    std::vector<Command> commands;
    int schedule = 0;
    bool racecheck = false;  // backend option racecheck (src/metal/sim/racecheck.h)
    std::mutex mutex;
    std::condition_variable done_cv;
    CommandStatus status = CommandStatus::NotCommitted;
    std::string error;
    bool timed = false;               // time_dispatches() was asked
    std::vector<double> dispatch_ns;  // the executor's time per dispatch, in encoding order
};

class SimRuntime;

class SimEncoder final : public ComputeEncoder {
public:
    SimEncoder(std::vector<Command>& out, bool concurrent) : out_(out), concurrent_(concurrent) {}
    void set_pipeline(const Pipeline& p) override { pipeline_ = static_cast<const SimPipeline*>(&p); }
    void set_args(const void* data, size_t size) override {
        const auto* b = static_cast<const uint8_t*>(data);
        args_.assign(b, b + size);
    }
    // Indices, offsets and sizes were checked above runtime.h (checked_runtime.h).
    void set_buffer(const RtBuffer& buf, size_t offset, uint32_t index) override {
        if (buffers_.size() <= index) buffers_.resize(index + 1);
        buffers_[index] = {&sim(buf), offset};
    }
    void set_threadgroup_memory(size_t size, uint32_t index) override {
        if (tg_.size() <= index) tg_.resize(index + 1, 0);
        tg_[index] = size;
    }
    void dispatch(Size3 groups, Size3 threads) override {
        Command c{Command::Kind::Dispatch};
        c.concurrent = concurrent_;
        c.pipeline = pipeline_;
        c.args = args_;
        c.buffers = buffers_;
        c.threadgroup_memory = tg_;
        c.groups = groups;
        c.threads = threads;
        out_.push_back(std::move(c));
    }
    void memory_barrier() override { out_.push_back(Command{Command::Kind::Barrier}); }

private:
    std::vector<Command>& out_;
    bool concurrent_;
    const SimPipeline* pipeline_ = nullptr;
    std::vector<uint8_t> args_;
    std::vector<BufferSlot> buffers_;
    std::vector<size_t> tg_;
};

class SimCommandBuffer final : public CommandBuffer {
public:
    SimCommandBuffer(SimRuntime& rt, int schedule, bool racecheck) : rt_(rt), work_(std::make_shared<Work>()) {
        work_->schedule = schedule;
        work_->racecheck = racecheck;
    }
    ComputeEncoder& compute(bool concurrent) override {
        // A new pass: dispatches of the previous pass are complete before this one starts.
        if (!work_->commands.empty()) work_->commands.push_back(Command{Command::Kind::Barrier});
        encoder_ = std::make_unique<SimEncoder>(work_->commands, concurrent);
        return *encoder_;
    }
    void copy(const RtBuffer& src, size_t src_offset, const RtBuffer& dst, size_t dst_offset, size_t n) override {
        Command c{Command::Kind::Copy};
        c.src = &sim(src);
        c.dst = &sim(dst);
        c.src_offset = src_offset;
        c.dst_offset = dst_offset;
        c.n = n;
        work_->commands.push_back(Command{Command::Kind::Barrier});
        work_->commands.push_back(std::move(c));
    }
    void fill(const RtBuffer& dst, size_t offset, size_t n, uint8_t value) override {
        Command c{Command::Kind::Fill};
        c.dst = &sim(dst);
        c.dst_offset = offset;
        c.n = n;
        c.value = value;
        work_->commands.push_back(Command{Command::Kind::Barrier});
        work_->commands.push_back(std::move(c));
    }
    void commit() override;
    void wait() override {
        std::unique_lock<std::mutex> lock(work_->mutex);
        work_->done_cv.wait(lock, [&] {
            return work_->status == CommandStatus::Completed || work_->status == CommandStatus::Error ||
                   work_->status == CommandStatus::NotCommitted;
        });
    }
    CommandStatus status() const override {
        std::lock_guard<std::mutex> lock(work_->mutex);
        return work_->status;
    }
    std::string error() const override {
        std::lock_guard<std::mutex> lock(work_->mutex);
        return work_->error;
    }
    void time_dispatches() override { work_->timed = true; }
    DeviceTiming timing() const override {
        std::lock_guard<std::mutex> lock(work_->mutex);
        if (!work_->timed || work_->status != CommandStatus::Completed) return {};
        return {"MetalSim executor time per dispatch", true, work_->dispatch_ns};
    }

private:
    SimRuntime& rt_;
    std::shared_ptr<Work> work_;
    std::unique_ptr<SimEncoder> encoder_;
};

class SimRuntime final : public Runtime, public std::enable_shared_from_this<SimRuntime> {
public:
    SimRuntime() {
        set_profile("");
        // The families are the .metal files the linked kernels came from.
        for (const std::string& name : sim::kernel_names()) {
            std::string file = sim::find_kernel(name)->source;
            const size_t dot = file.rfind(".metal");
            family_kernels_[dot == std::string::npos ? file : file.substr(0, dot)].push_back(name);
        }
        queue_thread_ = std::thread([this] { run_queue(); });
    }

    bool set_profile(const std::string& profile) override {
        if (profile != "" && profile != "github_paravirtual") {
            fail<InvalidArgumentError>("MetalSim::set_profile", "unknown profile '", profile,
                                       "' (profiles: '' for MetalSim's own, 'github_paravirtual')");
        }
        props_ = RuntimeProps{};
        props_.name = "MetalSim (MSL executor on " + host_cpu_name() + ")";
        props_.has_simdgroup_reduction = true;
        props_.has_simdgroup_mm = true;
        props_.has_bfloat = true;
        props_.has_unified_memory = true;
        props_.supports_residency_sets = false;
        props_.max_buffer_size = size_t(1) << 32;
        props_.max_working_set_size = host_memory_total() / 4 * 3;
        props_.max_threadgroup_memory = sim::kMaxThreadgroupMemory;
        for (int f = 1001; f <= 1009; ++f) props_.families.push_back(f);  // Apple1..Apple9
        props_.families.push_back(5001);                                    // Metal3
        if (profile == "github_paravirtual") {
            // As ggml logs it on GitHub's macOS runners ("Apple Paravirtual device").
            props_.name += ", profile github_paravirtual";
            props_.has_simdgroup_reduction = false;
            props_.has_simdgroup_mm = false;
            props_.has_bfloat = false;
            props_.families = {3003};  // MTLGPUFamilyCommon3
            props_.max_working_set_size = size_t(5010) << 20;
        }
        return true;
    }
    ~SimRuntime() override {
        {
            std::lock_guard<std::mutex> lock(queue_mutex_);
            stop_ = true;
        }
        queue_cv_.notify_all();
        queue_thread_.join();
    }

    const RuntimeProps& props() const override { return props_; }
    size_t allocated_size() const override { return allocated_.load(); }

    std::shared_ptr<RtBuffer> alloc(size_t size, StorageMode mode) override {
        void* p = nullptr;
        size_t padded = (size + 4095) / 4096 * 4096;
        if (padded < size || posix_memalign(&p, 4096, padded ? padded : 4096) != 0 || !p) {
            fail<OutOfMemoryError>("MetalSim::alloc", "cannot allocate ", size, " bytes");
        }
        return std::make_shared<SimBuffer>(static_cast<uint8_t*>(p), size, mode, true, &allocated_);
    }

    std::shared_ptr<RtBuffer> map(void* ptr, size_t size) override {
        return std::make_shared<SimBuffer>(static_cast<uint8_t*>(ptr), size, StorageMode::Mapped, false, &allocated_);
    }

    // Cached above runtime.h (checked_runtime.h), which asks once per name and constant values.
    std::shared_ptr<Pipeline> pipeline(const std::string& name,
                                       const std::vector<FunctionConstant>& constants) override {
        std::vector<sim::FunctionConstant> fcs;
        for (const auto& c : constants) {
            switch (c.kind) {
                case FunctionConstant::Kind::Bool:
                    fcs.push_back(sim::FunctionConstant::boolean(c.index, c.i != 0)); break;
                case FunctionConstant::Kind::Int16:
                    fcs.push_back(sim::FunctionConstant::int16(c.index, static_cast<int16_t>(c.i))); break;
                case FunctionConstant::Kind::Int32:
                    fcs.push_back(sim::FunctionConstant::int32(c.index, static_cast<int32_t>(c.i))); break;
                case FunctionConstant::Kind::Float: fcs.push_back(sim::FunctionConstant::float32(c.index, c.f)); break;
            }
        }
        const sim::KernelInfo* k = sim::find_kernel(name);
        if (!k) fail<UnsupportedOpError>("MetalSim::pipeline", "no kernel named '", name, "' in the shader library");
        // As on Metal, a kernel comes from its family's library, which must have compiled.
        std::string family = k->source;
        family = family.substr(0, family.rfind(".metal"));
        {
            std::lock_guard<std::mutex> lock(family_mutex_);
            if (!compiled_.count(family)) {
                fail<UnsupportedOpError>("MetalSim::pipeline", "kernel '", name, "' is in shader family '", family,
                                         "', which ",
                                         rejected_.count(family) ? "did not compile" : "is not compiled yet");
            }
        }
        return std::make_shared<SimPipeline>(k, std::move(fcs));
    }

    std::vector<std::string> shader_families() const override {
        std::vector<std::string> out;
        for (const auto& kv : family_kernels_) out.push_back(kv.first);
        return out;
    }

    // Every family on a thread of its own, as Metal compiles libraries in parallel. Compiling checks
    // that the family has kernels and whether it is rejected; with a modeled compile time it also
    // takes that long (shader_compile_us_per_kernel), so the compile strategies can be compared.
    void compile_families(const std::vector<std::string>& families,
                          const std::function<void(const FamilyResult&)>& done) override {
        for (const std::string& f : families) {
            if (!family_kernels_.count(f))
                fail<InvalidArgumentError>("MetalSim::compile_families", "no shader family '", f, "'");
        }
        auto one = [&](const std::string& family) {
            const auto start = std::chrono::steady_clock::now();
            FamilyResult r{family, true, {}, 0.0};
            bool again;
            int64_t us;
            {
                std::lock_guard<std::mutex> lock(family_mutex_);
                again = compiled_.count(family) || rejected_.count(family);
                us = compile_us_per_kernel_;
            }
            if (!again && us > 0) {
                std::this_thread::sleep_for(std::chrono::microseconds(us * int64_t(family_kernels_.at(family).size())));
            }
            {
                std::lock_guard<std::mutex> lock(family_mutex_);
                if (rejected_.count(family)) {
                    r.ok = false;
                    // Worded as Apple's compiler words an error, with the file it would name.
                    r.error = "program_source: " + family + ".metal: error: rejected by MetalSim's "
                              "reject_shader_families (as Apple's compiler might reject it)";
                } else {
                    compiled_.insert(family);
                }
            }
            r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            done(r);
        };
        std::vector<std::thread> threads;
        for (size_t i = 1; i < families.size(); ++i) {
            try {
                threads.emplace_back(one, families[i]);
            } catch (const std::system_error&) {
                one(families[i]);
            }
        }
        if (!families.empty()) one(families[0]);
        for (auto& t : threads) t.join();
    }

    bool reject_families(const std::vector<std::string>& families) override {
        std::lock_guard<std::mutex> lock(family_mutex_);
        rejected_ = std::set<std::string>(families.begin(), families.end());
        compiled_.clear();
        return true;
    }

    bool set_fault_kernels(const std::vector<std::string>& kernels) override {
        std::lock_guard<std::mutex> lock(family_mutex_);
        faults_ = std::set<std::string>(kernels.begin(), kernels.end());
        return true;
    }

    bool set_compile_cost(int64_t us_per_kernel) override {
        std::lock_guard<std::mutex> lock(family_mutex_);
        compile_us_per_kernel_ = us_per_kernel;
        return true;
    }

    // The executor's schedule: 0 runs the threads of a threadgroup in lockstep, 1 lets one simdgroup
    // run ahead to each barrier (exposes missing barriers that lockstep hides). racecheck 1: the
    // racecheck build of the kernels, a data race or uninitialised threadgroup read fails the command
    // buffer (src/metal/sim/racecheck.h).
    std::vector<RuntimeOption> options() const override { return {{"schedule", 0, 0, 1}, {"racecheck", 0, 0, 1}}; }
    std::unique_ptr<CommandBuffer> command_buffer(const OptionValues& options) override {
        auto it = options.find("schedule");
        auto rc = options.find("racecheck");
        const bool racecheck = rc != options.end() && rc->second != 0;
        if (racecheck && !sim::racecheck_built()) {
            fail<UnsupportedOpError>("MetalSim::racecheck",
                                     "this build of metal_backend has no racecheck build of the kernels (its "
                                     "compiler lacks -fsanitize=thread, or it was configured with "
                                     "-DMB_SIM_RACECHECK=OFF)");
        }
        return std::make_unique<SimCommandBuffer>(*this, it == options.end() ? 0 : int(it->second), racecheck);
    }

    void capture_begin() override {
        fail<UnsupportedOpError>("MetalSim::capture",
                                 "GPU trace capture needs Metal on Apple; MetalSim cannot capture");
    }
    void capture_end() override {}

    void enqueue(std::shared_ptr<Work> work) {
        {
            std::lock_guard<std::mutex> lock(queue_mutex_);
            queue_.push_back(std::move(work));
        }
        queue_cv_.notify_one();
    }

private:
    void run_queue() {
        for (;;) {
            std::shared_ptr<Work> work;
            {
                std::unique_lock<std::mutex> lock(queue_mutex_);
                queue_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
                if (queue_.empty()) return;
                work = std::move(queue_.front());
                queue_.pop_front();
            }
            std::string error = execute(*work);
            {
                std::lock_guard<std::mutex> lock(work->mutex);
                work->status = error.empty() ? CommandStatus::Completed : CommandStatus::Error;
                work->error = std::move(error);
                work->commands.clear();
            }
            work->done_cv.notify_all();
        }
    }

    // Runs a command buffer; "" on success, else the error of the first failing command. The
    // executor's time of each dispatch goes to work.dispatch_ns when timed (the queue thread alone
    // writes it before the work is marked done).
    std::string execute(Work& work) {
        const auto& cmds = work.commands;
        if (work.timed) {
            work.dispatch_ns.assign(std::count_if(cmds.begin(), cmds.end(),
                                                  [](const Command& c) { return c.kind == Command::Kind::Dispatch; }),
                                    0.0);
        }
        size_t i = 0, ordinal = 0;  // ordinal: dispatches before cmds[i]
        while (i < cmds.size()) {
            // Dispatches of a concurrent pass up to the next barrier may run in any order on a GPU:
            // run them last to first, so a missing barrier shows as a wrong result here.
            size_t j = i;
            while (j < cmds.size() && cmds[j].kind == Command::Kind::Dispatch && cmds[j].concurrent) ++j;
            if (j > i) {
                // Under racecheck, each dispatch's footprint: one that writes what another touches races.
                std::vector<sim::race::Footprint> prints(work.racecheck && j - i > 1 ? j - i : 0);
                for (size_t k = j; k-- > i;) {
                    std::string e =
                        run_dispatch(cmds[k], work, ordinal + (k - i), prints.empty() ? nullptr : &prints[k - i]);
                    if (!e.empty()) return e;
                }
                for (size_t a = 0; a < prints.size(); ++a) {
                    for (size_t b = a + 1; b < prints.size(); ++b) {
                        const Command& ca = cmds[i + a];
                        const Command& cb = cmds[i + b];
                        const uint32_t ga[3] = {ca.groups.x, ca.groups.y, ca.groups.z};
                        const uint32_t gb[3] = {cb.groups.x, cb.groups.y, cb.groups.z};
                        std::string e = sim::check_concurrent(ca.pipeline->name().c_str(), prints[a], ga,
                                                              cb.pipeline->name().c_str(), prints[b], gb);
                        if (!e.empty()) return e;
                    }
                }
                ordinal += j - i;
                i = j;
                continue;
            }
            const Command& c = cmds[i++];
            switch (c.kind) {
                case Command::Kind::Dispatch: {
                    std::string e = run_dispatch(c, work, ordinal++);
                    if (!e.empty()) return e;
                    break;
                }
                case Command::Kind::Barrier: break;
                case Command::Kind::Copy:
                    std::memmove(c.dst->device_data() + c.dst_offset, c.src->device_data() + c.src_offset, c.n);
                    break;
                case Command::Kind::Fill:
                    std::memset(c.dst->device_data() + c.dst_offset, c.value, c.n);
                    break;
            }
        }
        return {};
    }

    std::string run_dispatch(const Command& c, Work& work, size_t ordinal, sim::race::Footprint* footprint = nullptr) {
        {
            std::lock_guard<std::mutex> lock(family_mutex_);
            if (faults_.count(c.pipeline->name())) {
                // As the GPU reports a kernel's invalid access: the command buffer fails, the queue goes on.
                return "[mb::sim::run] " + c.pipeline->name() + ": threadgroup (0,0,0): GPU fault: invalid device "
                       "memory access (injected by MetalSim's fault_kernels)";
            }
        }
        sim::Dispatch d;
        d.kernel = c.pipeline->kernel();
        d.grid = {c.groups.x, c.groups.y, c.groups.z};
        d.threads = {c.threads.x, c.threads.y, c.threads.z};
        d.buffers.resize(std::max<size_t>(c.buffers.size(), 1));
        d.buffers[0] = {const_cast<uint8_t*>(c.args.data()), c.args.size()};
        for (size_t k = 1; k < c.buffers.size(); ++k) {
            const BufferSlot& s = c.buffers[k];
            if (!s.buffer) continue;
            d.buffers[k] = {s.buffer->device_data() + s.offset, s.buffer->size() - s.offset};
        }
        d.threadgroup_memory = c.threadgroup_memory;
        d.constants = c.pipeline->constants();
        d.no_simd_reduction = !props_.has_simdgroup_reduction;
        d.no_simd_matrix = !props_.has_simdgroup_mm;
        d.racecheck = work.racecheck;
        d.footprint = footprint;
        sim::Result r = sim::run(d, work.schedule == 1 ? sim::Schedule::RunAhead : sim::Schedule::Lockstep,
                                 host_core_count());
        if (work.timed) work.dispatch_ns[ordinal] = r.run_ns;
        return r.ok ? std::string() : r.error;
    }

    RuntimeProps props_;
    std::map<std::string, std::vector<std::string>> family_kernels_;  // shader family -> its kernels
    std::mutex family_mutex_;
    std::set<std::string> compiled_, rejected_, faults_;
    int64_t compile_us_per_kernel_ = 0;
    std::atomic<size_t> allocated_{0};
    std::mutex queue_mutex_;
    std::condition_variable queue_cv_;
    std::deque<std::shared_ptr<Work>> queue_;
    bool stop_ = false;
    std::thread queue_thread_;
};

void SimCommandBuffer::commit() {
    {
        std::lock_guard<std::mutex> lock(work_->mutex);
        if (work_->status != CommandStatus::NotCommitted) {
            throw InvalidArgumentError("[MetalSim::commit] command buffer committed twice");
        }
        work_->status = CommandStatus::Committed;
    }
    encoder_.reset();
    rt_.enqueue(work_);
}

}  // namespace

std::shared_ptr<Runtime> make_sim_runtime() { return std::make_shared<SimRuntime>(); }

}  // namespace mb::metal
