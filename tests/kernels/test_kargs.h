// Args structs of the executor's test kernels (tests/kernels/*.metal), shared with
// tests/native/test_executor.cpp as shaders/kargs.h is with the host.
#pragma once

#include <stdint.h>

typedef struct {
    int32_t n;
    float scale;
} test_kargs_binary;

typedef struct {
    int32_t n;  // elements per threadgroup row
} test_kargs_reduce;

typedef struct {
    int32_t m;  // rows of a and c
    int32_t n;  // columns of b and c
    int32_t k;  // columns of a, rows of b
} test_kargs_matmul;

typedef struct {
    int32_t mode;
} test_kargs_mode;
