// Refusing buffer-protocol data that holds Python object pointers (numpy dtype=object, or structured
// dtypes with an object field). Copying such bytes into device memory leaks addresses, and writing
// into them (a mapped buffer, an async read's destination) overwrites live references, which
// crashes the interpreter later; only plain numbers and bytes may cross.
#include "bindings/bindings.h"

#include <cstring>
#include <string>

#include "core/errors.h"

namespace mb::bindings {

namespace {

// Whether a PEP 3118 format string has the object code 'O'. Field names sit between colons
// (":name:") and may contain any letter, so they are skipped.
bool format_holds_objects(const char* format) {
    if (format == nullptr) return false;
    for (const char* p = format; *p; ++p) {
        if (*p == ':') {
            const char* close = std::strchr(p + 1, ':');
            if (close == nullptr) return false;
            p = close;
        } else if (*p == 'O') {
            return true;
        }
    }
    return false;
}

std::string dtype_text(py::handle obj, const char* format) {
    py::object dtype = py::getattr(obj, "dtype", py::none());
    if (!dtype.is_none()) return "dtype " + std::string(py::str(dtype));
    return std::string("buffer format '") + (format ? format : "B") + "'";
}

}  // namespace

void require_plain_data(py::handle obj, const char* format, const char* who) {
    bool objects = format_holds_objects(format);
    py::object dtype = py::getattr(obj, "dtype", py::none());
    if (!objects && !dtype.is_none()) {
        py::object has = py::getattr(dtype, "hasobject", py::none());
        objects = !has.is_none() && has.cast<bool>();
    }
    if (objects) {
        fail<InvalidArgumentError>(who, "the ", std::string(py::str(py::type::handle_of(obj).attr("__name__"))),
                                   " of ", dtype_text(obj, format),
                                   " holds Python object pointers; only numeric or byte data can be used here");
    }
}

}  // namespace mb::bindings
