// The ONE interface between the Metal device's portable code (ops encoding, buffers, backend) and a
// GPU runtime: real Metal (apple/, Apple only) or the MSL executor (sim/).
// Everything that decides *what* the GPU does is above this line and runs in Linux CI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mb::metal {

enum class StorageMode {
    Shared,   // host-visible memory the GPU also reads (unified memory)
    Private,  // GPU-only memory; the host reaches it through blits that wait
    Mapped,   // caller memory wrapped without copy
};

// A GPU buffer. host_ptr() is null for Private buffers.
class RtBuffer {
public:
    virtual ~RtBuffer() = default;
    virtual size_t size() const = 0;
    virtual StorageMode mode() const = 0;
    virtual void* host_ptr() const = 0;
};

struct Size3 {
    uint32_t x = 1, y = 1, z = 1;
};

// A function constant bound when a pipeline is made (by index, as [[function_constant(i)]]).
struct FunctionConstant {
    enum class Kind { Bool, Int16, Int32, Float } kind = Kind::Int32;
    uint32_t index = 0;
    int64_t i = 0;
    float f = 0.0f;
    static FunctionConstant boolean(uint32_t index, bool v) { return {Kind::Bool, index, v ? 1 : 0, 0.0f}; }
    static FunctionConstant int16(uint32_t index, int16_t v) { return {Kind::Int16, index, v, 0.0f}; }
    static FunctionConstant int32(uint32_t index, int32_t v) { return {Kind::Int32, index, v, 0.0f}; }
    static FunctionConstant float32(uint32_t index, float v) { return {Kind::Float, index, 0, v}; }
};

// A compiled kernel with its function constants (cached by the runtime).
class Pipeline {
public:
    virtual ~Pipeline() = default;
    virtual const std::string& name() const = 0;
    virtual uint32_t max_threads_per_threadgroup() const = 0;
    virtual uint32_t thread_execution_width() const = 0;  // the simdgroup width: 32
};

// Records compute work into a command buffer. Bindings persist until changed, as in Metal.
class ComputeEncoder {
public:
    virtual ~ComputeEncoder() = default;
    virtual void set_pipeline(const Pipeline& p) = 0;
    // The args struct (a POD of shaders/kargs.h), always at index 0.
    virtual void set_args(const void* data, size_t size) = 0;
    virtual void set_buffer(const RtBuffer& buf, size_t offset, uint32_t index) = 0;
    virtual void set_threadgroup_memory(size_t size, uint32_t index) = 0;
    virtual void dispatch(Size3 threadgroups, Size3 threads_per_threadgroup) = 0;
    // Makes writes of earlier dispatches visible to later ones (concurrent encoders only).
    virtual void memory_barrier() = 0;
};

enum class CommandStatus { NotCommitted, Committed, Completed, Error };

// The device's own time for a command buffer's work (profiles): per dispatch where the runtime can
// tell dispatches apart, else one time for the whole command buffer.
struct DeviceTiming {
    std::string clock;          // what was measured, in words; empty when nothing was
    bool per_dispatch = false;  // ns: one entry per dispatch run, in encoding order; else one entry
    std::vector<double> ns;
};

// Work for the GPU: compute passes and blits, committed in order to the device's one queue.
class CommandBuffer {
public:
    virtual ~CommandBuffer() = default;
    // A compute pass; `concurrent` dispatches may overlap unless separated by memory_barrier().
    // The encoder is valid until the next call on this command buffer.
    virtual ComputeEncoder& compute(bool concurrent) = 0;
    // Blits: copies, fills, and host <-> buffer transfers ordered with the other work.
    virtual void copy(const RtBuffer& src, size_t src_offset, const RtBuffer& dst, size_t dst_offset, size_t n) = 0;
    virtual void fill(const RtBuffer& dst, size_t offset, size_t n, uint8_t value) = 0;
    // Enqueues; the GPU runs committed command buffers in commit order.
    virtual void commit() = 0;
    // Waits until completed (or failed). Never throws: look at status().
    virtual void wait() = 0;
    virtual CommandStatus status() const = 0;
    // The runtime's own message when status() is Error.
    virtual std::string error() const = 0;
    // Names this command buffer's work (shown in GPU traces; the backend's errors name it too).
    virtual void set_label(const std::string& label) {}
    // Asks for the device's own time of this command buffer's work; before anything is encoded.
    virtual void time_dispatches() {}
    // After wait() of a completed command buffer that was asked: what time_dispatches() measured.
    virtual DeviceTiming timing() const { return {}; }
};

struct RuntimeProps {
    std::string name;                  // GPU name, e.g. "Apple M2"
    bool has_simdgroup_reduction = false;
    bool has_simdgroup_mm = false;
    bool has_bfloat = false;
    bool has_unified_memory = false;
    bool supports_residency_sets = false;
    size_t max_buffer_size = 0;
    size_t max_working_set_size = 0;
    size_t max_threadgroup_memory = 0;
    std::vector<int> families;  // MTLGPUFamily values it supports (Apple7 = 1007, Metal3 = 5001)
};

// A switch a runtime offers for how it runs command buffers: name, default and range.
struct RuntimeOption {
    std::string name;
    int64_t default_value, min, max;
};
using OptionValues = std::map<std::string, int64_t>;

// How compiling one shader family went. A family is the kernels of one shaders/<family>.metal,
// compiled as a library of its own, so that a family the compiler rejects costs only its own ops.
struct FamilyResult {
    std::string family;
    bool ok = false;
    std::string error;      // the compiler's own message when !ok
    double compile_ms = 0;  // wall time of this family's compile
};

class Runtime {
public:
    virtual ~Runtime() = default;
    virtual const RuntimeProps& props() const = 0;
    virtual size_t allocated_size() const = 0;  // currentAllocatedSize

    // Throws OutOfMemoryError when the device refuses. Size 0 is legal.
    virtual std::shared_ptr<RtBuffer> alloc(size_t size, StorageMode mode) = 0;
    // Wraps [ptr, ptr + size) without copy; ptr and size page-aligned; size <= max_buffer_size.
    virtual std::shared_ptr<RtBuffer> map(void* ptr, size_t size) = 0;

    // The shader families by name (the stems of shaders/*.metal, in name order).
    virtual std::vector<std::string> shader_families() const = 0;
    // Compiles every family of `families` at the same time and returns when all are done; `done` is
    // called once per family as it finishes, from any thread. A family compiled before is not compiled
    // again (its result is reported as it was). A rejected family is a result, never an exception;
    // an unknown name throws InvalidArgumentError.
    virtual void compile_families(const std::vector<std::string>& families,
                                  const std::function<void(const FamilyResult&)>& done) = 0;
    // Makes these families fail to compile from now on, as Apple's compiler might reject them, and
    // forgets every earlier compile result. False where the runtime cannot (real Metal).
    virtual bool reject_families(const std::vector<std::string>& families) { return false; }
    // Makes each family's compile take this long per kernel, to model a compiler (MetalSim only;
    // false elsewhere).
    virtual bool set_compile_cost(int64_t us_per_kernel) { return false; }
    // Makes every dispatch of these kernels fault on the GPU, failing its command buffer as a
    // kernel's invalid memory access would (MetalSim only, to test recovery; false elsewhere).
    virtual bool set_fault_kernels(const std::vector<std::string>& kernels) { return false; }
    // Makes the runtime act as another GPU: "" (its own) or "github_paravirtual" (the paravirtual GPU
    // of GitHub's macOS runners: family Common3 only, no simdgroup reduction or matrix, no bfloat,
    // a 5 GB working set). Changes props(); set before the device is used. False where the runtime
    // cannot (real Metal); throws InvalidArgumentError for an unknown profile.
    virtual bool set_profile(const std::string& profile) { return false; }

    // A kernel of a compiled family. Throws UnsupportedOpError for a kernel in no compiled family,
    // InvalidArgumentError for bad constants.
    virtual std::shared_ptr<Pipeline> pipeline(const std::string& name,
                                               const std::vector<FunctionConstant>& constants) = 0;
    // Switches this runtime offers for its command buffers (each a backend option of the same name);
    // real Metal offers none.
    virtual std::vector<RuntimeOption> options() const { return {}; }
    // `options`: values for options() by name; a missing one takes its default.
    virtual std::unique_ptr<CommandBuffer> command_buffer(const OptionValues& options = {}) = 0;

    // Whether the device's buffers are kept resident through a residency set (where
    // props().supports_residency_sets); the executor has no residency to manage.
    virtual void set_use_residency_sets(bool on) {}

    // Trace capture of the next command buffers (Apple only; elsewhere UnsupportedOpError).
    virtual bool can_capture() const { return false; }
    virtual void capture_begin() = 0;
    virtual void capture_end() = 0;
};

}  // namespace mb::metal
