// The kernel benchmarks' (kquant_kernels.cpp, table_kernels.cpp) way to ggml's CPU kernels:
// ggml-python's libggml-cpu.so (or the path given), opened at run time with its fp16 tables set up,
// and the byte-dot forms of our tiles that this CPU can run.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/kernels/simd.h"

namespace mb_bench {

// The library's handle, or nullptr (said on stderr). path: empty for ggml-python's copy.
inline void* open_ggml_cpu(std::string path) {
    if (path.empty()) {
        FILE* p = popen("python3 -c \"import ggml, os; print(os.path.dirname(ggml.__file__))\"", "r");
        char buf[4096] = {};
        const bool found = p != nullptr && fgets(buf, sizeof buf, p) != nullptr;
        if (p != nullptr) pclose(p);
        if (!found) {
            std::fprintf(stderr, "ggml-python not found; pass the path of libggml-cpu.so\n");
            return nullptr;
        }
        path = std::string(buf, strcspn(buf, "\n")) + "/lib/libggml-cpu.so";
    }
    void* h = dlopen(path.c_str(), RTLD_NOW);
    if (h == nullptr) {
        std::fprintf(stderr, "%s\n", dlerror());
        return nullptr;
    }
    if (auto init = reinterpret_cast<void (*)()>(dlsym(h, "ggml_cpu_init"))) init();  // its fp16 tables
    return h;
}

struct Form {
    const char* name;
    mb::ByteDot dot;
};

// AVX2's form, and AVX-VNNI's and AVX512-VNNI's where the CPU has them.
inline std::vector<Form> byte_dot_forms() {
    std::vector<Form> forms = {{"avx2", mb::ByteDot::Avx2}};
    if (__builtin_cpu_supports("avxvnni")) forms.push_back({"avx-vnni", mb::ByteDot::AvxVnni});
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl")) {
        forms.push_back({"avx512-vnni", mb::ByteDot::Avx512Vnni});
    }
    return forms;
}

}  // namespace mb_bench
