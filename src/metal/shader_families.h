// The state of a Metal device's shader families: one library per shaders/<family>.metal, each compiled
// once per device when first needed, so that a family the compiler rejects makes only its own ops
// unsupported (supports_op false, the compiler's message kept) while the rest of the device works.
//
// When families compile (the device prop "shader_compile"):
//   0 on demand: a family compiles when supports_op first meets one of its ops, alone;
//   1 up front: the first use of the device compiles every family, one after the other;
//   2 in parallel (default): the first use starts every family compiling at once in the background,
//     and supports_op waits only for the family it asks about.
// benchmarks/shader_compile.py measures the time to a first result under each.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/op.h"
#include "metal/runtime.h"

namespace mb::metal {

// The shader family of an op's kernels (the stem of its shaders/*.metal); "" for views, which run none.
const char* shader_family(Op op);

enum class CompileStrategy : int64_t { OnDemand = 0, UpFront = 1, Parallel = 2 };

class ShaderFamilies {
public:
    explicit ShaderFamilies(std::shared_ptr<Runtime> runtime);

    // Whether `family` compiled; compiles it, or waits for the compile under way, first. "" is ready.
    bool ready(const std::string& family);
    // The device's first use: with UpFront or Parallel, every family starts compiling.
    void first_use();

    // Each family in name order with its state: "compiled", "not compiled", "compiling", or
    // "failed: <the compiler's message>".
    std::vector<std::pair<std::string, std::string>> states() const;
    std::string state(const std::string& family) const;

    CompileStrategy strategy() const;
    void set_strategy(CompileStrategy s);
    // Waits for the compiles under way, runs `change` (which changes what the runtime compiles), and
    // forgets every result: each family compiles again when next needed.
    void reset(const std::function<void()>& change);

private:
    enum class State { NotCompiled, Compiling, Compiled, Failed };
    struct Entry {
        State state = State::NotCompiled;
        std::string error;
        double compile_ms = 0;
    };
    struct Shared {
        std::mutex mutex;
        std::condition_variable changed;
        std::map<std::string, Entry> entries;
        int running = 0;  // compile_families calls under way
    };

    // Marks the families Compiling and compiles them on this thread (in parallel among themselves).
    static void compile(const std::shared_ptr<Runtime>& rt, const std::shared_ptr<Shared>& sh,
                        std::vector<std::string> families);
    static std::string describe(const Entry& e);

    std::shared_ptr<Runtime> runtime_;
    std::shared_ptr<Shared> shared_;
    CompileStrategy strategy_ = CompileStrategy::Parallel;
    bool started_ = false;  // first_use() has run since the last reset()
};

}  // namespace mb::metal
