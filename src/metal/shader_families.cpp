#include "metal/shader_families.h"

#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace mb::metal {

const char* shader_family(Op op) {
    switch (op_family(op)) {
        case OpFamily::Binary: return "binary";
        case OpFamily::Unary: return "unary";
        case OpFamily::Norm: return "norm";
        case OpFamily::SoftMax: return "soft_max";
        case OpFamily::Reduce: return "reduce";
        case OpFamily::FlashAttnExt: return "flash_attn_ext";
        case OpFamily::MulMat: return "mul_mat";
        case OpFamily::Copy: return "cpy";
        case OpFamily::Rows: return "rows";
        case OpFamily::Im2col: return "im2col";
        case OpFamily::Layout: return "layout";
        case OpFamily::Rope: return "rope";
        case OpFamily::Glu: return "glu";
        case OpFamily::Arange: return "arange";
        case OpFamily::Argsort: return "argsort";
        case OpFamily::TopK: return "top_k";
        case OpFamily::Cumsum: return "cumsum";
        case OpFamily::Tri: return "tri";
        case OpFamily::OutProd: return "out_prod";
        case OpFamily::Pool1d: return "pool_1d";
        case OpFamily::Conv2d: return "conv_2d";
        case OpFamily::ConvTranspose2d: return "conv_transpose_2d";
        case OpFamily::MulMatId: return "mul_mat_id";
        case OpFamily::AddId: return "add_id";
        case OpFamily::TimestepEmbedding: return "timestep_embedding";
        case OpFamily::ConvTranspose1d: return "conv_transpose_1d";
        case OpFamily::Pool2d: return "pool_2d";
        case OpFamily::Upscale: return "upscale";
        case OpFamily::SsmConv: return "ssm_conv";
        case OpFamily::SsmScan: return "ssm_scan";
        case OpFamily::RwkvWkv: return "rwkv_wkv";
        case OpFamily::Acc: return "acc";
        case OpFamily::None: break;
    }
    return "";
}

ShaderFamilies::ShaderFamilies(std::shared_ptr<Runtime> runtime)
    : runtime_(std::move(runtime)), shared_(std::make_shared<Shared>()) {
    for (const std::string& f : runtime_->shader_families()) shared_->entries[f];
}

// Families the caller found NotCompiled are marked Compiling under the lock before this runs, so no
// two threads compile one family.
void ShaderFamilies::compile(const std::shared_ptr<Runtime>& rt, const std::shared_ptr<Shared>& sh,
                             std::vector<std::string> families) {
    if (families.empty()) return;
    auto record = [&](const FamilyResult& r) {
        std::lock_guard<std::mutex> lock(sh->mutex);
        Entry& e = sh->entries[r.family];
        e.state = r.ok ? State::Compiled : State::Failed;
        e.error = r.ok ? std::string() : r.error;
        e.compile_ms = r.compile_ms;
        sh->changed.notify_all();
    };
    try {
        rt->compile_families(families, record);
    } catch (const std::exception& ex) {
        // A runtime that cannot even start compiling fails the families it was asked for.
        for (const std::string& f : families) record({f, false, ex.what(), 0.0});
    }
    std::lock_guard<std::mutex> lock(sh->mutex);
    // A family the runtime did not report would leave its waiters waiting: it failed.
    for (const std::string& f : families) {
        Entry& e = sh->entries[f];
        if (e.state == State::Compiling) {
            e.state = State::Failed;
            e.error = "the runtime reported no result";
        }
    }
    --sh->running;
    sh->changed.notify_all();
}

void ShaderFamilies::first_use() {
    std::vector<std::string> all;
    CompileStrategy s;
    {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        if (started_) return;
        started_ = true;
        s = strategy_;
        if (s == CompileStrategy::OnDemand) return;
        for (auto& [name, e] : shared_->entries) {
            if (e.state != State::NotCompiled) continue;
            all.push_back(name);
            if (s == CompileStrategy::Parallel) e.state = State::Compiling;
        }
        if (s == CompileStrategy::Parallel && !all.empty()) ++shared_->running;
    }
    if (s == CompileStrategy::UpFront) {
        for (const std::string& f : all) ready(f);
        return;
    }
    if (all.empty()) return;
    auto rt = runtime_;
    auto sh = shared_;
    try {
        // Detached: it holds what it uses, and a device that goes at exit must not wait for it.
        std::thread([rt, sh, all] { compile(rt, sh, all); }).detach();
    } catch (const std::system_error&) {
        // No thread to be had: compile here instead.
        compile(rt, sh, all);
    }
}

bool ShaderFamilies::ready(const std::string& family) {
    if (family.empty()) return true;
    std::unique_lock<std::mutex> lock(shared_->mutex);
    for (;;) {
        auto it = shared_->entries.find(family);
        if (it == shared_->entries.end()) return false;  // no such library: its kernels are nowhere
        Entry& e = it->second;
        switch (e.state) {
            case State::Compiled: return true;
            case State::Failed: return false;
            case State::Compiling: shared_->changed.wait(lock); break;
            case State::NotCompiled:
                e.state = State::Compiling;
                ++shared_->running;
                lock.unlock();
                compile(runtime_, shared_, {family});
                lock.lock();
                break;
        }
    }
}

std::string ShaderFamilies::describe(const Entry& e) {
    switch (e.state) {
        case State::NotCompiled: return "not compiled";
        case State::Compiling: return "compiling";
        case State::Compiled: {
            char ms[32];
            std::snprintf(ms, sizeof ms, "%.1f", e.compile_ms);
            return std::string("compiled in ") + ms + " ms";
        }
        case State::Failed: return "failed: " + e.error;
    }
    return "?";
}

std::vector<std::pair<std::string, std::string>> ShaderFamilies::states() const {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [name, e] : shared_->entries) out.emplace_back(name, describe(e));
    return out;
}

std::string ShaderFamilies::state(const std::string& family) const {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    auto it = shared_->entries.find(family);
    return it == shared_->entries.end() ? std::string("no such shader family") : describe(it->second);
}

CompileStrategy ShaderFamilies::strategy() const {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return strategy_;
}

void ShaderFamilies::set_strategy(CompileStrategy s) {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    strategy_ = s;
}

void ShaderFamilies::reset(const std::function<void()>& change) {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    shared_->changed.wait(lock, [&] { return shared_->running == 0; });
    change();
    for (auto& [name, e] : shared_->entries) e = Entry{};
    started_ = false;
}

}  // namespace mb::metal
