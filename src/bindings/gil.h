// The GIL around native work, safe while the interpreter exits.
//
// At exit CPython ends any thread other than the exiting one that asks for the GIL back
// (PyThread_exit_thread: pthread_exit, a forced unwind on glibc). A daemon thread that comes back
// from a compute then would be unwound through py::gil_scoped_release's destructor, which is
// noexcept: std::terminate, "terminate called without an active exception". Instead, from the
// moment the interpreter starts exiting (our atexit hook runs), such a thread
// parks: it never returns to Python and the process exits around it, as CPython 3.14 itself does.
// An abort callback asked then stops its compute without taking the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif

namespace mb::bindings {

namespace py = pybind11;

// Installs the atexit hook that marks the interpreter as exiting (module init calls it once).
void init_gil(py::module_& m);

// True when this thread must not take the GIL: the interpreter is gone, or it is exiting and this
// is not the thread that runs the exit.
bool gil_forbidden();

// Never returns: the calling thread sleeps until the process ends.
[[noreturn]] void park_thread();

// Runs f(); should CPython end this thread inside it (a forced unwind: the interpreter started
// exiting while f, or Python code it runs, waited for the GIL), parks the thread instead of letting
// the unwind reach a noexcept frame or a destructor that touches Python. Call Python code that may
// run at exit through it (PyObject_Call*, deleters), with no C++ object between it and CPython.
template <class F>
decltype(auto) exit_safe(F&& f) {
#if defined(__GLIBCXX__)
    try {
        return f();
    } catch (abi::__forced_unwind&) {
        park_thread();
    }
#else
    return f();
#endif
}

// Releases the GIL for its scope (py::gil_scoped_release's role); takes it back at the end, or
// parks the thread when gil_forbidden().
class ReleasedGil {
public:
    ReleasedGil();
    ~ReleasedGil();
    ReleasedGil(const ReleasedGil&) = delete;
    ReleasedGil& operator=(const ReleasedGil&) = delete;

private:
    PyThreadState* state_;
};

// Takes the GIL for its scope (py::gil_scoped_acquire's role), on any thread; parks the thread when
// gil_forbidden(). Check gil_forbidden() first where skipping the Python work is better than parking.
class HeldGil {
public:
    HeldGil();
    ~HeldGil();
    HeldGil(const HeldGil&) = delete;
    HeldGil& operator=(const HeldGil&) = delete;

private:
    std::optional<py::gil_scoped_acquire> gil_;  // pybind11's, for its handling of nested acquires
};

}  // namespace mb::bindings
