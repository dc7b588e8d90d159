// The checks of src/metal/checked_runtime.cpp one by one, over a runtime that records what reaches it:
// a refused command never reaches the runtime below, its command buffer is never committed there and
// reports the first reason (with the numbers) as its error; misuse of the API throws. The Python
// suite reaches the threadgroup checks through MetalSim (tests/test_metal_dispatch_limits.py); the
// rest (args size, offsets, grid, blits) no encoder produces, so they are checked here. Run by
// tests/test_native_checked_runtime.py:
//   c++ -std=c++17 -Isrc -Ishaders tests/native/test_checked_runtime.cpp src/metal/checked_runtime.cpp
#include "check.h"
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "metal/checked_runtime.h"
#include "metal/runtime.h"

namespace {

using namespace mb::metal;
using mb_check::check;


bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// What reached the runtime below the checks.
struct Log {
    int pipelines_made = 0;
    int dispatches = 0;
    int copies = 0;
    int fills = 0;
    int commits = 0;
    const Pipeline* bound = nullptr;
};

class FakeBuffer final : public RtBuffer {
public:
    explicit FakeBuffer(size_t n) : n_(n) {}
    size_t size() const override { return n_; }
    StorageMode mode() const override { return StorageMode::Private; }
    void* host_ptr() const override { return nullptr; }

private:
    size_t n_;
};

class FakePipeline final : public Pipeline {
public:
    explicit FakePipeline(std::string name) : name_(std::move(name)) {}
    const std::string& name() const override { return name_; }
    uint32_t max_threads_per_threadgroup() const override { return 256; }
    uint32_t thread_execution_width() const override { return 32; }

private:
    std::string name_;
};

class FakeEncoder final : public ComputeEncoder {
public:
    explicit FakeEncoder(Log& log) : log_(log) {}
    void set_pipeline(const Pipeline& p) override { log_.bound = &p; }
    void set_args(const void*, size_t) override {}
    void set_buffer(const RtBuffer&, size_t, uint32_t) override {}
    void set_threadgroup_memory(size_t, uint32_t) override {}
    void dispatch(Size3, Size3) override { ++log_.dispatches; }
    void memory_barrier() override {}

private:
    Log& log_;
};

class FakeCommandBuffer final : public CommandBuffer {
public:
    explicit FakeCommandBuffer(Log& log) : log_(log), encoder_(log) {}
    ComputeEncoder& compute(bool) override { return encoder_; }
    void copy(const RtBuffer&, size_t, const RtBuffer&, size_t, size_t) override { ++log_.copies; }
    void fill(const RtBuffer&, size_t, size_t, uint8_t) override { ++log_.fills; }
    void commit() override {
        ++log_.commits;
        committed_ = true;
    }
    void wait() override {}
    CommandStatus status() const override {
        return committed_ ? CommandStatus::Completed : CommandStatus::NotCommitted;
    }
    std::string error() const override { return ""; }

private:
    Log& log_;
    FakeEncoder encoder_;
    bool committed_ = false;
};

class FakeRuntime final : public Runtime {
public:
    explicit FakeRuntime(Log& log) : log_(log) {
        props_.name = "fake";
        props_.max_threadgroup_memory = 32768;
    }
    const RuntimeProps& props() const override { return props_; }
    size_t allocated_size() const override { return 0; }
    std::shared_ptr<RtBuffer> alloc(size_t size, StorageMode) override { return std::make_shared<FakeBuffer>(size); }
    std::shared_ptr<RtBuffer> map(void*, size_t size) override { return std::make_shared<FakeBuffer>(size); }
    std::shared_ptr<Pipeline> pipeline(const std::string& name, const std::vector<FunctionConstant>&) override {
        ++log_.pipelines_made;
        return std::make_shared<FakePipeline>(name);
    }
    std::vector<std::string> shader_families() const override { return {}; }
    void compile_families(const std::vector<std::string>&, const std::function<void(const FamilyResult&)>&) override {}
    std::unique_ptr<CommandBuffer> command_buffer(const OptionValues&) override {
        return std::make_unique<FakeCommandBuffer>(log_);
    }
    void capture_begin() override {}
    void capture_end() override {}

private:
    Log& log_;
    RuntimeProps props_;
};

struct Fixture {
    Log log;
    std::shared_ptr<CheckedRuntime> rt = make_checked_runtime(std::make_shared<FakeRuntime>(log));
    std::shared_ptr<Pipeline> kernel = rt->pipeline("kernel_a", {});
    std::shared_ptr<RtBuffer> buf = rt->alloc(1024, StorageMode::Private);
};

// One dispatch of kernel_a in a fresh command buffer, committed; returns the command buffer.
template <class Setup>
std::unique_ptr<CommandBuffer> dispatch_one(Fixture& f, Setup setup, Size3 groups, Size3 threads) {
    auto cb = f.rt->command_buffer({});
    ComputeEncoder& enc = cb->compute(false);
    enc.set_pipeline(*f.kernel);
    setup(enc);
    enc.dispatch(groups, threads);
    cb->commit();
    cb->wait();
    return cb;
}

void no_setup(ComputeEncoder&) {}

// A dispatch refused for `why`: nothing reached the runtime, the command buffer failed with it.
void expect_refused(Fixture& f, const std::unique_ptr<CommandBuffer>& cb,
                    const std::string& why, const std::string& what) {
    check(f.log.dispatches == 0, what + ": the refused dispatch reached the runtime");
    check(f.log.commits == 0, what + ": the failed command buffer was committed below");
    check(cb->status() == CommandStatus::Error, what + ": status is not Error");
    check(contains(cb->error(), why), what + ": error '" + cb->error() + "' lacks '" + why + "'");
}

void test_valid_dispatch_passes() {
    Fixture f;
    auto cb = dispatch_one(
        f, [&](ComputeEncoder& enc) {
            enc.set_args("abcd", 4);
            enc.set_buffer(*f.buf, 1024, 1);  // at the end: an empty binding is legal
            enc.set_threadgroup_memory(32768, 0);
        },
        {1u << 24, 1, 1}, {256, 1, 1});  // 2^32 threads in x: the most 32-bit positions hold
    check(f.log.dispatches == 1 && f.log.commits == 1, "a valid dispatch reaches the runtime and commits");
    check(cb->status() == CommandStatus::Completed && cb->error().empty(), "a valid command buffer completes");
    check(f.log.bound != nullptr && f.log.bound != f.kernel.get() && f.log.bound->name() == "kernel_a",
          "the runtime below gets its own pipeline, not the checked wrapper");
}

void test_threads_per_threadgroup() {
    {
        Fixture f;
        auto cb = dispatch_one(f, no_setup, {4, 1, 1}, {16, 4, 5});
        expect_refused(f, cb, "kernel_a: 320 threads per threadgroup (16x4x5), at most 256", "threads over max");
    }
    {
        Fixture f;
        auto cb = dispatch_one(f, no_setup, {4, 1, 1}, {0, 1, 1});
        expect_refused(f, cb, "kernel_a: 0 threads per threadgroup (0x1x1)", "empty threadgroup");
    }
}

void test_threadgroup_memory() {
    Fixture f;
    auto cb = dispatch_one(
        f, [](ComputeEncoder& enc) {
            enc.set_threadgroup_memory(20000, 0);
            enc.set_threadgroup_memory(16000, 1);
        },
        {1, 1, 1}, {32, 1, 1});
    expect_refused(f, cb, "kernel_a: threadgroup memory of 36000 bytes exceeds 32768", "threadgroup memory");
}

void test_grid_limits() {
    {
        Fixture f;
        auto cb = dispatch_one(f, no_setup, {(1u << 24) + 1, 1, 1}, {256, 1, 1});
        expect_refused(f, cb, "kernel_a: a grid of 16777217 x 256 = 4294967552 threads "
                       "in dimension x, at most 4294967296",
                       "grid x");
    }
    {
        Fixture f;
        auto cb = dispatch_one(f, no_setup, {1, 1, (1u << 31) + 1}, {1, 1, 2});
        expect_refused(f, cb, "threads in dimension z", "grid z");
    }
    {
        Fixture f;
        auto cb = dispatch_one(f, no_setup, {8, 0, 1}, {32, 1, 1});
        check(f.log.dispatches == 0 && f.log.commits == 1 && cb->status() == CommandStatus::Completed,
              "an empty grid is no work and no error");
    }
}

void test_bindings() {
    {
        Fixture f;
        auto cb = dispatch_one(f, [](ComputeEncoder& enc) { enc.set_args(std::vector<char>(4097).data(), 4097); },
                               {1, 1, 1}, {32, 1, 1});
        // The dispatch itself is valid; the command buffer fails for the args it was given.
        check(f.log.commits == 0 && cb->status() == CommandStatus::Error,
              "args over 4096 bytes fail the command buffer");
        check(contains(cb->error(), "args struct of 4097 bytes exceeds setBytes' 4096"), "args error: " + cb->error());
    }
    {
        Fixture f;
        auto cb = dispatch_one(f, [&](ComputeEncoder& enc) { enc.set_buffer(*f.buf, 1025, 2); }, {1, 1, 1}, {32, 1, 1});
        check(f.log.commits == 0 && contains(cb->error(), "buffer 2 offset 1025 is past its end (1024 bytes)"),
              "offset past the end: " + cb->error());
    }
    {
        Fixture f;
        auto cb = f.rt->command_buffer({});
        ComputeEncoder& enc = cb->compute(false);
        bool threw = false;
        try {
            enc.set_buffer(*f.buf, 0, 31);
        } catch (const mb::InvalidArgumentError& e) {
            threw = contains(e.what(), "buffer index 31 out of range");
        }
        check(threw, "buffer index 31 throws");
        threw = false;
        try {
            enc.set_threadgroup_memory(16, 31);
        } catch (const mb::InvalidArgumentError& e) {
            threw = contains(e.what(), "index 31 out of range");
        }
        check(threw, "threadgroup memory index 31 throws");
        threw = false;
        try {
            enc.dispatch({1, 1, 1}, {1, 1, 1});
        } catch (const mb::InvalidArgumentError& e) {
            threw = contains(e.what(), "no pipeline set");
        }
        check(threw, "a dispatch without a pipeline throws");
    }
}

void test_first_reason_is_kept() {
    Fixture f;
    auto cb = f.rt->command_buffer({});
    ComputeEncoder& enc = cb->compute(true);
    enc.set_pipeline(*f.kernel);
    enc.dispatch({1, 1, 1}, {512, 1, 1});
    enc.set_threadgroup_memory(65536, 0);
    enc.dispatch({1, 1, 1}, {32, 1, 1});
    enc.dispatch({1, 1, 1}, {32, 1, 1});  // this one passes checks but its command buffer has failed
    cb->commit();
    check(contains(cb->error(), "512 threads per threadgroup") && !contains(cb->error(), "65536"),
          "the first reason is reported: " + cb->error());
    check(f.log.commits == 0, "a command buffer with a refused dispatch is never committed below");
}

void test_blits() {
    Fixture f;
    auto other = f.rt->alloc(100, StorageMode::Private);
    {
        auto cb = f.rt->command_buffer({});
        cb->copy(*f.buf, 1000, *other, 0, 25);
        cb->commit();
        check(f.log.copies == 0 && contains(cb->error(), "[Metal::blit] copy of 25 bytes is out of bounds"),
              "copy past the source: " + cb->error());
    }
    {
        auto cb = f.rt->command_buffer({});
        cb->copy(*f.buf, 0, *other, 90, 11);
        cb->fill(*other, 0, 101, 0);
        cb->commit();
        check(f.log.copies == 0 && f.log.fills == 0 && contains(cb->error(), "copy of 11 bytes is out of bounds"),
              "copy past the destination: " + cb->error());
    }
    {
        auto cb = f.rt->command_buffer({});
        cb->fill(*other, 50, 51, 0);
        cb->commit();
        check(contains(cb->error(), "fill of 51 bytes is out of bounds"), "fill past the end: " + cb->error());
    }
    {
        auto cb = f.rt->command_buffer({});
        cb->copy(*f.buf, 0, *other, 0, 100);
        cb->fill(*other, 0, 100, 7);
        cb->copy(*f.buf, 0, *other, 0, 0);  // nothing to do: not passed on
        cb->commit();
        check(f.log.copies == 1 && f.log.fills == 1 && f.log.commits == 1 && cb->status() == CommandStatus::Completed,
              "blits within bounds pass");
        bool threw = false;
        try {
            cb->fill(*other, 0, 1, 0);
        } catch (const mb::InvalidArgumentError& e) {
            threw = contains(e.what(), "fill after commit");
        }
        check(threw, "a blit after commit throws");
    }
}

void test_narrowed_limits() {
    Fixture f;
    f.rt->set_limits({64, 2048});
    check(f.kernel->max_threads_per_threadgroup() == 64, "a pipeline made before the limit reports the cap");
    auto later = f.rt->pipeline("kernel_b", {});
    check(later->max_threads_per_threadgroup() == 64, "a pipeline made after the limit reports the cap");
    auto cb = dispatch_one(f, no_setup, {1, 1, 1}, {128, 1, 1});
    expect_refused(f, cb, "kernel_a: 128 threads per threadgroup (128x1x1), at most 64", "narrowed threads");
    cb = dispatch_one(f, [](ComputeEncoder& enc) { enc.set_threadgroup_memory(4096, 0); }, {1, 1, 1}, {64, 1, 1});
    expect_refused(f, cb, "threadgroup memory of 4096 bytes exceeds 2048", "narrowed threadgroup memory");
    f.rt->set_limits({});
    check(f.kernel->max_threads_per_threadgroup() == 256, "lifting the cap restores the pipeline's own maximum");
    cb = dispatch_one(f, [](ComputeEncoder& enc) { enc.set_threadgroup_memory(4096, 0); }, {1, 1, 1}, {128, 1, 1});
    check(f.log.dispatches == 1 && cb->status() == CommandStatus::Completed,
          "the same dispatch runs within the limits");
    f.rt->set_limits({4096, 1 << 20});
    check(f.kernel->max_threads_per_threadgroup() == 256, "a cap above the pipeline's maximum changes nothing");
}

void test_pipeline_cache() {
    Fixture f;
    const int made = f.log.pipelines_made;
    auto again = f.rt->pipeline("kernel_a", {});
    check(again == f.kernel && f.log.pipelines_made == made, "the same name and constants share one pipeline");
    auto a = f.rt->pipeline("kernel_a", {FunctionConstant::float32(0, 0.1f)});
    auto b = f.rt->pipeline("kernel_a", {FunctionConstant::float32(0, 0.1000001f)});
    check(a != b && f.log.pipelines_made == made + 2, "float constants are keyed by their bits");
}

}  // namespace

int main() {
    test_valid_dispatch_passes();
    test_threads_per_threadgroup();
    test_threadgroup_memory();
    test_grid_limits();
    test_bindings();
    test_first_reason_is_kept();
    test_blits();
    test_narrowed_limits();
    test_pipeline_cache();
    return mb_check::check_report("test_checked_runtime");
}
