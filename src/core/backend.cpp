#include "core/backend.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/errors.h"
#include "core/tensor.h"

namespace mb {

static std::string known_keys(const std::map<std::string, int64_t>& options) {
    std::string out;
    for (const auto& kv : options) out += (out.empty() ? "" : ", ") + kv.first;
    return out;
}

namespace {

// The backends whose abort callback this thread is running now (innermost last).
thread_local std::vector<const Backend*> t_in_callback;

}  // namespace

void Backend::set_abort_callback(AbortCallback cb) {
    auto next = cb ? std::make_shared<const AbortCallback>(std::move(cb)) : nullptr;
    std::lock_guard<std::mutex> lock(callback_mutex_);
    abort_callback_ = std::move(next);
}

bool Backend::should_abort() const {
    std::shared_ptr<const AbortCallback> cb;
    {
        std::lock_guard<std::mutex> lock(callback_mutex_);
        cb = abort_callback_;  // a callback that replaces itself keeps running on this copy
    }
    if (!cb) return false;
    struct Mark {
        explicit Mark(const Backend* b) { t_in_callback.push_back(b); }
        ~Mark() { t_in_callback.pop_back(); }
    } mark(this);
    return (*cb)();
}

void Backend::reject_reentry(const char* who) const {
    if (std::find(t_in_callback.begin(), t_in_callback.end(), this) != t_in_callback.end()) {
        fail<DeviceError>(who, "called from the abort callback of backend '", name(),
                          "' while that backend is computing; the callback may read options and "
                          "return True/False, but cannot compute, synchronize or queue copies on it");
    }
}

void Backend::hold(std::shared_ptr<void> owner) {
    std::lock_guard<std::mutex> lock(held_mutex_);
    held_.push_back(std::move(owner));
}

std::vector<std::shared_ptr<void>> Backend::take_held() {
    std::lock_guard<std::mutex> lock(held_mutex_);
    return std::exchange(held_, {});
}

std::map<std::string, int64_t> Backend::options() const {
    std::lock_guard<std::mutex> lock(options_mutex_);
    return options_;
}

bool Backend::has_option(const std::string& key) const {
    std::lock_guard<std::mutex> lock(options_mutex_);
    return options_.count(key) > 0;
}

int64_t Backend::option(const std::string& key) const {
    std::lock_guard<std::mutex> lock(options_mutex_);
    auto it = options_.find(key);
    if (it == options_.end()) {
        fail<InvalidArgumentError>("Backend::option", "unknown option '", key, "' (known: ", known_keys(options_), ")");
    }
    return it->second;
}

void Backend::set_option(const std::string& key, int64_t value) {
    std::unique_lock<std::mutex> lock(options_mutex_);
    auto it = limits_.find(key);
    if (it == limits_.end()) {
        fail<InvalidArgumentError>("Backend::set_option", "unknown option '", key, "' for backend '", name(),
                                   "' (known: ", known_keys(options_), ")");
    }
    if (value < it->second.first || value > it->second.second) {
        fail<InvalidArgumentError>("Backend::set_option", "option '", key, "' must be in [", it->second.first, ", ",
                                   it->second.second, "], got ", value);
    }
    options_[key] = value;
    lock.unlock();
    on_option_changed(key);
}

void Backend::apply_params(const std::string& params) {
    // A C caller would stop at an embedded NUL and never see what follows it; refuse such strings (and
    // other control characters) instead of silently applying only their head.
    for (size_t i = 0; i < params.size(); ++i) {
        const auto c = static_cast<unsigned char>(params[i]);
        if (c < 0x20 && c != '\t') {
            fail<InvalidArgumentError>("Backend::apply_params", "control character (code ", static_cast<int>(c),
                                       ") at position ", i, " of the options string (", params.size(),
                                       " bytes); expected comma-separated key=value");
        }
    }
    std::istringstream in(params);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (item.find_first_not_of(" \t") == std::string::npos) continue;
        auto eq = item.find('=');
        if (eq == std::string::npos) {
            fail<InvalidArgumentError>("Backend::apply_params", "expected key=value, got '", item,
                                       "' in '", params, "'");
        }
        std::string key = item.substr(0, eq), text = item.substr(eq + 1);
        key.erase(0, key.find_first_not_of(" \t"));
        key.erase(key.find_last_not_of(" \t") + 1);
        text.erase(0, text.find_first_not_of(" \t"));
        text.erase(text.find_last_not_of(" \t") + 1);
        char* end = nullptr;
        errno = 0;
        long long value = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
            fail<InvalidArgumentError>("Backend::apply_params", "value of '", key, "' is not an integer: '", text, "'");
        }
        set_option(key, value);
    }
}

Status Backend::graph_compute(Graph& graph) {
    Status s = graph_compute_async(graph);
    synchronize();
    return s;
}

Status Backend::graph_compute_timed(Graph& graph, DeviceTime& time) {
    time = DeviceTime{};
    return graph_compute(graph);
}

static Buffer& tensor_buffer(const Tensor& t, const char* who, size_t offset, size_t n) {
    const auto& buf = t.data_buffer();
    if (!buf) fail<InvalidArgumentError>(who, "tensor ", t.describe(), " is not allocated");
    if (offset > t.nbytes() || n > t.nbytes() - offset) {
        fail<OutOfRangeError>(who, "range [", offset, ", ", offset + n, ") is outside tensor ", t.describe(), " of ",
                              t.nbytes(), " bytes");
    }
    return *buf;
}

void Backend::set_tensor_async(Tensor& t, const void* src, size_t offset, size_t n) {
    Buffer& buf = tensor_buffer(t, "Backend::set_tensor_async", offset, n);
    buf.set(src, t.data_offset() + offset, n);
}

void Backend::get_tensor_async(const Tensor& t, void* dst, size_t offset, size_t n) {
    tensor_buffer(t, "Backend::get_tensor_async", offset, n).get(dst, t.data_offset() + offset, n);
}

bool Backend::supports_family(int family) const {
    fail<UnsupportedOpError>("Backend::supports_family", "GPU families are a Metal notion; backend '", name(),
                             "' has none");
}

void Backend::capture_next_compute() {
    fail<UnsupportedOpError>("Backend::capture_next_compute", "GPU trace capture needs Metal; backend '", name(),
                             "' cannot capture");
}

void Backend::declare_option(const std::string& key, int64_t default_value, int64_t min_value, int64_t max_value) {
    std::lock_guard<std::mutex> lock(options_mutex_);
    options_[key] = default_value;
    limits_[key] = {min_value, max_value};
}

}  // namespace mb
