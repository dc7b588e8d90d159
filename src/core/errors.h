// Typed errors of the core. The bindings translate each into the metal_backend exception class of
// the same name (which also derives from the matching Python built-in), so user input never ends
// the process: everything a caller can get wrong is thrown as one of these.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace mb {

// -> mb.MetalBackendError (RuntimeError)
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// -> mb.OutOfMemoryError (MemoryError)
struct OutOfMemoryError : Error {
    using Error::Error;
};

// -> mb.InvalidArgumentError (ValueError)
struct InvalidArgumentError : Error {
    using Error::Error;
};

// -> mb.OutOfRangeError (InvalidArgumentError, IndexError): indices, offsets and lengths
struct OutOfRangeError : InvalidArgumentError {
    using InvalidArgumentError::InvalidArgumentError;
};

// -> mb.UnsupportedOpError (NotImplementedError)
struct UnsupportedOpError : Error {
    using Error::Error;
};

// -> mb.DeviceError: a device command failed (found when it ran, reported at the next sync)
struct DeviceError : Error {
    using Error::Error;
};

// Builds "[who] part part part" from any streamable parts and throws E with it.
template <typename E, typename... Parts>
[[noreturn]] void fail(const char* who, Parts&&... parts) {
    std::ostringstream os;
    os << '[' << who << "] ";
    (os << ... << std::forward<Parts>(parts));
    throw E(os.str());
}

}  // namespace mb
