// A transposed convolution (CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D) as a GEMM then a scatter (col2im):
// for each image n and block of input positions p, cols[p][(oc, t)] = sum_ic data[n][ic][p] *
// kernel[ic][oc][t] over the kernel's taps t, through the register-tiled f32 engine (gemm_f32.h);
// the op's scatter then adds each cols value at the output its (p, t) lands on. Only the scatter
// and how a position or a tap is addressed differ between the 1-D and 2-D ops.
//
// Threads take whole output channels, so the scatters of two threads never meet; each packs its own
// channels' kernel columns once (f16 converted there), and the data (every input channel) per block
// of positions, as tokens or (by_tap) as panels. The columns go a block of whole channels at a time
// (up to kColumns columns), so a block's cols stay in L2 and every output element receives its terms
// in one order whatever the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "cpu/kernels/kernels.h"

namespace mb {

// One block of the GEMM's result, for the scatter: for l < m and q < nch, t < taps, the value
// sum_ic data[n][ic][p0 + l] * kernel[ic][oc0 + q][t] is at cols[l * nch * taps + q * taps + t], or with
// ConvTransposeGemm::by_tap at cols[(q * taps + t) * ld + l] (a tap's positions consecutive).
struct ConvTransposeBlock {
    int64_t n, p0, m, oc0, nch, ld;
    const float* cols;
};

struct ConvTransposeGemm {
    const char* who;                 // the op, for errors
    const Tensor* kernel;            // f32 or f16
    std::vector<size_t> tap_bytes;   // byte offset of tap t in the kernel; its size is the tap count
    size_t kernel_nb_oc, kernel_nb_ic;
    const Tensor* data;              // f32
    size_t data_nb_ic, data_nb_n;
    int64_t OC, IC, P, N;            // output and input channels, input positions per image, images
    std::function<size_t(int64_t)> position_bytes;  // byte offset of input position p in one (ic, n) plane
    std::function<void(int64_t n, int64_t o0, int64_t o1)> zero;  // clears channels o0 .. o1 of image n
    std::function<void(const ConvTransposeBlock&)> scatter;      // adds a block into the output
    // The GEMM's roles: false, the positions are its tokens and the kernel columns its panels (cols by
    // position); true, the kernel columns are its tokens and 16 positions a panel (cols by tap, for a
    // scatter that adds a tap's consecutive positions as a run).
    bool by_tap = false;
};

// Scratch bytes (CpuFamily::work_size) for taps, OC, IC at nth threads.
size_t conv_transpose_gemm_work_size(int64_t taps, int64_t OC, int64_t IC, int nth);

// This thread's share (p.ith of p.nth) of the whole op.
void conv_transpose_gemm(const ComputeParams& p, const ConvTransposeGemm& g);

}  // namespace mb
