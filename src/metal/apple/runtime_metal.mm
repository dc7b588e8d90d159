// runtime.h over real Metal (Apple only; Objective-C++ with ARC). Plain API calls: what the GPU runs
// is decided above runtime.h, by code that Linux CI runs through the MSL executor, and every binding,
// dispatch and blit is checked there (checked_runtime.h) before it reaches this file.
#include "metal/apple/runtime_metal.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "metal/apple/capture.h"
#include "metal/apple/gpu_timing.h"
#include "metal/apple/objc_bridge.h"
#include "metal/apple/residency.h"
#include "metal/apple/shader_library.h"

namespace mb::metal {

namespace {

class MetalBuffer final : public RtBuffer {
public:
    MetalBuffer(id<MTLBuffer> buffer, size_t size, StorageMode mode, void* host, std::shared_ptr<Residency> residency)
        : buffer_(buffer), size_(size), mode_(mode), host_(host), residency_(std::move(residency)) {
        residency_->add(buffer_);
    }
    ~MetalBuffer() override {
        @autoreleasepool {
            residency_->remove(buffer_);
        }
    }
    size_t size() const override { return size_; }
    StorageMode mode() const override { return mode_; }
    void* host_ptr() const override { return host_; }
    id<MTLBuffer> buffer() const { return buffer_; }

private:
    id<MTLBuffer> buffer_;  // nil for an empty mapping: Metal has no zero-length buffers
    size_t size_;
    StorageMode mode_;
    void* host_;
    std::shared_ptr<Residency> residency_;
};

id<MTLBuffer> mtl(const RtBuffer& b) { return static_cast<const MetalBuffer&>(b).buffer(); }

class MetalPipeline final : public Pipeline {
public:
    MetalPipeline(std::string name, id<MTLComputePipelineState> state) : name_(std::move(name)), state_(state) {}
    const std::string& name() const override { return name_; }
    uint32_t max_threads_per_threadgroup() const override {
        return static_cast<uint32_t>(state_.maxTotalThreadsPerThreadgroup);
    }
    uint32_t thread_execution_width() const override { return static_cast<uint32_t>(state_.threadExecutionWidth); }
    id<MTLComputePipelineState> state() const { return state_; }

private:
    std::string name_;
    id<MTLComputePipelineState> state_;
};

// A compute pass. What it is given was checked above runtime.h (checked_runtime.h). `kernels`
// receives the name of each kernel it dispatches (consecutive repeats once), so that a fault Metal
// reports for this encoder names its kernels, as MetalSim's errors do.
class MetalEncoder final : public ComputeEncoder {
public:
    MetalEncoder(id<MTLComputeCommandEncoder> enc, bool concurrent, GpuTimer* timer, std::vector<std::string>* kernels)
        : enc_(enc), concurrent_(concurrent), timer_(timer), kernels_(kernels) {}

    void end() { [enc_ endEncoding]; }
    void set_pipeline(const Pipeline& p) override {
        pipeline_ = static_cast<const MetalPipeline*>(&p);
        [enc_ setComputePipelineState:pipeline_->state()];
    }
    void set_args(const void* data, size_t size) override {
        if (size > 0) [enc_ setBytes:data length:size atIndex:0];
    }
    void set_buffer(const RtBuffer& buf, size_t offset, uint32_t index) override {
        [enc_ setBuffer:mtl(buf) offset:offset atIndex:index];
    }
    void set_threadgroup_memory(size_t size, uint32_t index) override {
        [enc_ setThreadgroupMemoryLength:size atIndex:index];
    }
    void dispatch(Size3 groups, Size3 threads) override {
        if (pipeline_ && (kernels_->empty() || kernels_->back() != pipeline_->name())) {
            kernels_->push_back(pipeline_->name());
        }
        if (timer_) timer_->before_dispatch(enc_);
        [enc_ dispatchThreadgroups:MTLSizeMake(groups.x, groups.y, groups.z)
             threadsPerThreadgroup:MTLSizeMake(threads.x, threads.y, threads.z)];
        if (timer_) timer_->after_dispatch(enc_);
    }
    // A serial encoder already orders its dispatches; barriers are only for concurrent ones.
    void memory_barrier() override {
        if (concurrent_) [enc_ memoryBarrierWithScope:MTLBarrierScopeBuffers];
    }

private:
    id<MTLComputeCommandEncoder> enc_;
    bool concurrent_;
    GpuTimer* timer_;  // null: not timed
    std::vector<std::string>* kernels_;
    const MetalPipeline* pipeline_ = nullptr;
};

// "metal_backend pass N": the label of the command buffer's N-th compute encoder.
NSString* pass_label(size_t index) {
    return [NSString stringWithFormat:@"metal_backend pass %zu", index];
}

// The pass index of a label pass_label() made; -1 for any other.
long pass_index(NSString* label) {
    const std::string s = utf8(label);
    const std::string prefix = "metal_backend pass ";
    if (s.compare(0, prefix.size(), prefix) != 0 || s.size() == prefix.size()) return -1;
    long v = 0;
    for (size_t i = prefix.size(); i < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

std::string join_kernels(const std::vector<std::string>& names) {
    constexpr size_t kMax = 8;
    std::string out;
    for (size_t i = 0; i < names.size() && i < kMax; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > kMax) out += ", ... (" + std::to_string(names.size()) + " kernels)";
    return out;
}

class MetalCommandBuffer final : public CommandBuffer {
public:
    MetalCommandBuffer(id<MTLCommandBuffer> cb, id<MTLDevice> device, id<MTLCounterSet> timestamps)
        : cb_(cb), device_(device), timestamps_(timestamps) {}
    // Metal requires every encoder to be ended, also on a command buffer that is never committed.
    ~MetalCommandBuffer() override { end_pass(); }

    ComputeEncoder& compute(bool concurrent) override {
        end_pass();
        id<MTLComputeCommandEncoder> enc = nil;
        pooled([&] {
            enc = [cb_ computeCommandEncoderWithDispatchType:concurrent ? MTLDispatchTypeConcurrent
                                                                        : MTLDispatchTypeSerial];
        });
        if (!enc) fail<DeviceError>("Metal::compute", "the command buffer gave no compute encoder");
        pass_kernels_.emplace_back();
        pooled([&] { enc.label = pass_label(pass_kernels_.size() - 1); });
        encoder_ = std::make_unique<MetalEncoder>(enc, concurrent, timer_.get(), &pass_kernels_.back());
        return *encoder_;
    }

    void copy(const RtBuffer& src, size_t src_offset, const RtBuffer& dst, size_t dst_offset, size_t n) override {
        end_pass();
        pooled([&] {
            id<MTLBlitCommandEncoder> blit = [cb_ blitCommandEncoder];
            [blit copyFromBuffer:mtl(src) sourceOffset:src_offset
              toBuffer:mtl(dst) destinationOffset:dst_offset size:n];
            [blit endEncoding];
        });
    }

    void fill(const RtBuffer& dst, size_t offset, size_t n, uint8_t value) override {
        end_pass();
        pooled([&] {
            id<MTLBlitCommandEncoder> blit = [cb_ blitCommandEncoder];
            [blit fillBuffer:mtl(dst) range:NSMakeRange(offset, n) value:value];
            [blit endEncoding];
        });
    }

    void commit() override {
        end_pass();
        committed_ = true;
        [cb_ commit];
    }

    void wait() override {
        if (committed_) [cb_ waitUntilCompleted];
    }

    CommandStatus status() const override {
        if (!committed_) return CommandStatus::NotCommitted;
        switch (cb_.status) {
            case MTLCommandBufferStatusCompleted: return CommandStatus::Completed;
            case MTLCommandBufferStatusError: return CommandStatus::Error;
            default: return CommandStatus::Committed;
        }
    }

    // Metal's reason, then the kernels of the compute pass that faulted (from the encoder execution
    // status the command buffer was created to report), or of every pass when Metal names none.
    std::string error() const override {
        std::string e;
        if (!committed_ || cb_.status != MTLCommandBufferStatusError) return e;
        pooled([&] {
            NSError* error = cb_.error;
            e = describe(error);
            std::string faulted;
            id infos = error ? error.userInfo[MTLCommandBufferEncoderInfoErrorKey] : nil;
            if ([infos isKindOfClass:[NSArray class]]) {
                for (id<MTLCommandBufferEncoderInfo> info in (NSArray*)infos) {
                    if (info.errorState != MTLCommandEncoderErrorStateFaulted) continue;
                    const long pass = pass_index(info.label);
                    if (pass < 0 || static_cast<size_t>(pass) >= pass_kernels_.size()) continue;
                    faulted += std::string(faulted.empty() ? "" : "; ") + "compute pass " + std::to_string(pass) +
                               " faulted, which ran " + join_kernels(pass_kernels_[static_cast<size_t>(pass)]);
                }
            }
            if (!faulted.empty()) {
                e += " (" + faulted + ")";
            } else {
                std::vector<std::string> all;
                for (const auto& p : pass_kernels_) all.insert(all.end(), p.begin(), p.end());
                if (!all.empty()) {
                    e += " (Metal named no faulted pass; the command buffer ran " + join_kernels(all) + ")";
                }
            }
        });
        return e;
    }

    void set_label(const std::string& label) override {
        pooled([&] { cb_.label = [NSString stringWithUTF8String:label.c_str()]; });
    }

    void time_dispatches() override {
        if (!timer_) timer_ = std::make_unique<GpuTimer>(device_, timestamps_);
    }

    DeviceTiming timing() const override {
        if (!timer_ || status() != CommandStatus::Completed) return {};
        return timer_->read(cb_);
    }

private:
    void end_pass() {
        if (encoder_) encoder_->end();
        encoder_.reset();
    }

    id<MTLCommandBuffer> cb_;
    id<MTLDevice> device_;
    id<MTLCounterSet> timestamps_;
    std::unique_ptr<GpuTimer> timer_;
    std::unique_ptr<MetalEncoder> encoder_;
    std::vector<std::vector<std::string>> pass_kernels_;  // by compute pass: the kernels it dispatched
    bool committed_ = false;
};

RuntimeProps read_props(id<MTLDevice> device, bool residency_sets) {
    RuntimeProps p;
    p.name = utf8(device.name);
    // Families by number: Apple<n> is 1000 + n, Metal3 is 5001. Asking about a family newer than
    // the OS (Apple10 before macOS 26) just answers no, so every number is asked everywhere.
    constexpr int kApple6 = 1006, kApple7 = 1007, kMetal3 = 5001;
    for (int family = 1001; family <= 1010; ++family) {
        if ([device supportsFamily:static_cast<MTLGPUFamily>(family)]) p.families.push_back(family);
    }
    if ([device supportsFamily:static_cast<MTLGPUFamily>(kMetal3)]) p.families.push_back(kMetal3);
    auto has = [&](int family) { return std::find(p.families.begin(), p.families.end(), family) != p.families.end(); };
    p.has_simdgroup_reduction = has(kApple7) || has(kMetal3);
    p.has_simdgroup_mm = has(kApple7);
    p.has_bfloat = has(kMetal3) || has(kApple6);
    p.has_unified_memory = device.hasUnifiedMemory;
    p.supports_residency_sets = residency_sets;
    p.max_buffer_size = device.maxBufferLength;
    p.max_working_set_size = device.recommendedMaxWorkingSetSize;
    p.max_threadgroup_memory = device.maxThreadgroupMemoryLength;
    return p;
}

class MetalRuntime final : public Runtime {
public:
    MetalRuntime(id<MTLDevice> device, id<MTLCommandQueue> queue)
        : device_(device), queue_(queue), residency_(std::make_shared<Residency>(device, queue)),
          timestamps_(dispatch_timestamps(device)), library_(device) {
        props_ = read_props(device_, residency_->supported());
    }

    const RuntimeProps& props() const override { return props_; }
    size_t allocated_size() const override { return device_.currentAllocatedSize; }

    std::shared_ptr<RtBuffer> alloc(size_t size, StorageMode mode) override {
        if (size > props_.max_buffer_size) {
            fail<OutOfMemoryError>("Metal::alloc", "cannot allocate ", size, " bytes: the GPU's largest buffer is ",
                                   props_.max_buffer_size, " bytes");
        }
        // Shared buffers are host memory on unified-memory GPUs: page-aligned, and their contents
        // are the host pointer, so set/get are memcpy without a copy of the whole buffer.
        const bool gpu_only = mode == StorageMode::Private;
        std::shared_ptr<RtBuffer> result;
        pooled([&] {
            // Metal has no zero-length buffers; a 1-byte buffer stands for an empty one.
            id<MTLBuffer> buf = [device_ newBufferWithLength:std::max<size_t>(size, 1)
                                                     options:gpu_only ? MTLResourceStorageModePrivate
                                                                      : MTLResourceStorageModeShared];
            if (!buf) {
                fail<OutOfMemoryError>("Metal::alloc", "the GPU refused ", size, " bytes (",
                                       device_.currentAllocatedSize,
                                       " allocated, recommended working set ", props_.max_working_set_size, ")");
            }
            result = std::make_shared<MetalBuffer>(buf, size, mode, gpu_only ? nullptr : buf.contents, residency_);
        });
        return result;
    }

    std::shared_ptr<RtBuffer> map(void* ptr, size_t size) override {
        if (size == 0) return std::make_shared<MetalBuffer>(nil, 0, StorageMode::Mapped, ptr, residency_);
        const long page_size = sysconf(_SC_PAGESIZE);
        const size_t page = page_size > 0 ? static_cast<size_t>(page_size) : 16384;
        if (reinterpret_cast<uintptr_t>(ptr) % page != 0 || size % page != 0 || size > props_.max_buffer_size) {
            fail<InvalidArgumentError>("Metal::map", "Metal wraps whole pages of at most ", props_.max_buffer_size,
                                       " bytes (got ", size, " bytes at ", ptr, ", page ", page, ")");
        }
        std::shared_ptr<RtBuffer> result;
        pooled([&] {
            // The caller's memory is not ours to free: no deallocator.
            id<MTLBuffer> buf = [device_ newBufferWithBytesNoCopy:ptr
                                                           length:size
                                                          options:MTLResourceStorageModeShared
                                                      deallocator:nil];
            if (!buf) fail<OutOfMemoryError>("Metal::map", "the GPU refused to wrap ", size, " bytes at ", ptr);
            result = std::make_shared<MetalBuffer>(buf, size, StorageMode::Mapped, ptr, residency_);
        });
        return result;
    }

    // Cached above runtime.h (checked_runtime.h), which asks once per name and constant values, one call
    // at a time.
    std::shared_ptr<Pipeline> pipeline(const std::string& name,
                                       const std::vector<FunctionConstant>& constants) override {
        std::shared_ptr<MetalPipeline> result;
        pooled([&] { result = std::make_shared<MetalPipeline>(name, library_.pipeline_state(name, constants)); });
        return result;
    }

    std::vector<std::string> shader_families() const override { return library_.families(); }
    // Not in an autorelease pool of this thread: each compile block drains its own.
    void compile_families(const std::vector<std::string>& families,
                          const std::function<void(const FamilyResult&)>& done) override {
        library_.compile(families, done);
    }

    std::unique_ptr<CommandBuffer> command_buffer(const OptionValues&) override {
        id<MTLCommandBuffer> cb = nil;
        // Retained references: Metal keeps every bound buffer alive until the work completes. Encoder
        // execution status: a failed command buffer's error says which encoder faulted (error()).
        pooled([&] {
            MTLCommandBufferDescriptor* desc = [[MTLCommandBufferDescriptor alloc] init];
            desc.retainedReferences = YES;
            desc.errorOptions = MTLCommandBufferErrorOptionEncoderExecutionStatus;
            cb = [queue_ commandBufferWithDescriptor:desc];
        });
        if (!cb) fail<DeviceError>("Metal::command_buffer", "the queue gave no command buffer");
        return std::make_unique<MetalCommandBuffer>(cb, device_, timestamps_);
    }

    void set_use_residency_sets(bool on) override {
        pooled([&] { residency_->set_enabled(on); });
    }

    bool can_capture() const override { return true; }
    void capture_begin() override { metal::capture_begin(device_, captures_++); }
    void capture_end() override { metal::capture_end(); }

private:
    id<MTLDevice> device_;
    id<MTLCommandQueue> queue_;
    std::shared_ptr<Residency> residency_;
    id<MTLCounterSet> timestamps_;  // nil: the GPU samples no dispatch boundaries
    RuntimeProps props_;
    ShaderLibrary library_;
    std::atomic<int> captures_{0};
};

}  // namespace

std::shared_ptr<Runtime> make_metal_runtime(id<MTLDevice> device) {
    id<MTLCommandQueue> queue = nil;
    std::string name;
    pooled([&] {
        queue = [device newCommandQueue];
        name = utf8(device.name);
    });
    if (!queue) fail<DeviceError>("Metal::runtime", "the GPU '", name, "' gave no command queue");
    std::shared_ptr<Runtime> runtime;
    pooled([&] { runtime = std::make_shared<MetalRuntime>(device, queue); });
    return runtime;
}

}  // namespace mb::metal
