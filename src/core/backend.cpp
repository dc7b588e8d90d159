#include "core/backend.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "core/buffer.h"
#include "core/errors.h"
#include "core/tensor.h"

namespace mb {

static std::string known_keys(const std::map<std::string, int64_t>& options) {
    std::string out;
    for (const auto& kv : options) out += (out.empty() ? "" : ", ") + kv.first;
    return out;
}

int64_t Backend::option(const std::string& key) const {
    auto it = options_.find(key);
    if (it == options_.end()) {
        fail<InvalidArgumentError>("Backend::option", "unknown option '", key, "' (known: ", known_keys(options_), ")");
    }
    return it->second;
}

void Backend::set_option(const std::string& key, int64_t value) {
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
            fail<InvalidArgumentError>("Backend::apply_params", "expected key=value, got '", item, "' in '", params, "'");
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
    options_[key] = default_value;
    limits_[key] = {min_value, max_value};
}

}  // namespace mb
