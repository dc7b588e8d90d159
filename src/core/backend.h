// A Backend (ggml_backend): a stream of work on one device. Options are named integers that the
// user can read and set from Python; every environment-style switch of ggml is one of them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace mb {

class Device;

class Backend {
public:
    virtual ~Backend() = default;

    virtual std::string name() const = 0;
    virtual std::shared_ptr<Device> device() const = 0;
    // Waits for all queued work; raises DeviceError for work that failed.
    virtual void synchronize() {}

    const std::map<std::string, int64_t>& options() const { return options_; }
    int64_t option(const std::string& key) const;
    // Throws InvalidArgumentError for an unknown key or a value the backend refuses.
    void set_option(const std::string& key, int64_t value);
    // Applies "key=value,key=value" (init_backend's params string).
    void apply_params(const std::string& params);

protected:
    // Registers an option with its default; subclasses do this in their constructor.
    void declare_option(const std::string& key, int64_t default_value, int64_t min_value, int64_t max_value);
    // Called after an option changed, so the backend can react (e.g. resize its thread pool).
    virtual void on_option_changed(const std::string& key) {}

private:
    std::map<std::string, int64_t> options_;
    std::map<std::string, std::pair<int64_t, int64_t>> limits_;
};

}  // namespace mb
