#include "bindings/gil.h"

#include <atomic>
#include <chrono>
#include <thread>


namespace mb::bindings {

namespace {

std::atomic<bool> g_exiting{false};
std::thread::id g_exit_thread;  // written once, before g_exiting is set

template <class F>
void take_gil(F take) {
    if (gil_forbidden()) park_thread();
    exit_safe(take);
}

}  // namespace

void init_gil(py::module_& m) {
    (void)m;
    py::module_::import("atexit").attr("register")(py::cpp_function([]() {
        g_exit_thread = std::this_thread::get_id();
        g_exiting.store(true, std::memory_order_release);
    }));
}

bool gil_forbidden() {
    if (!Py_IsInitialized()) return true;
    // Finalization begins after the atexit hooks ran (a forced unwind in take_gil covers the rest).
    return g_exiting.load(std::memory_order_acquire) && std::this_thread::get_id() != g_exit_thread;
}

void park_thread() {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(24));
}

ReleasedGil::ReleasedGil() : state_(PyEval_SaveThread()) {}

ReleasedGil::~ReleasedGil() {
    PyThreadState* state = state_;
    take_gil([state]() { PyEval_RestoreThread(state); });
}

HeldGil::HeldGil() {
    take_gil([this]() { gil_.emplace(); });
}

HeldGil::~HeldGil() {
    // The thread lost the GIL inside this scope (CPython ended it while Python code waited for the
    // GIL at exit): releasing it again would clear the state of the thread that holds it now.
    if (!PyGILState_Check()) park_thread();
}

}  // namespace mb::bindings
