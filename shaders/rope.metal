// ROPE: rotates the first n_dims values of each row by position-dependent angles; normal mode pairs
// (2i, 2i+1), NEOX mode pairs (i, i + n_dims/2); values past n_dims are copied. YaRN (ext_factor
// != 0) mixes interpolated and extrapolated angles over a ramp of pair indices, as ggml does.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

// One threadgroup per row (i1, i2, i3); its threads stride over the pairs, then over the copied tail.
template <typename T, bool NEOX>
kernel void kernel_rope(
        constant mb_kargs_rope & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * pos [[buffer(2)]],
        device char * dst [[buffer(3)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int i1 = tgpig.x;
    const int i2 = tgpig.y;
    const int i3 = tgpig.z;
    device const char * x = src0 + (ulong) i1 * args.nb01 + (ulong) i2 * args.nb02 + (ulong) i3 * args.nb03;
    device char * y = dst + (ulong) i1 * args.nb1 + (ulong) i2 * args.nb2 + (ulong) i3 * args.nb3;
    const float p = float(*((device const int *) (pos + (ulong) i2 * args.nbp0)));
    const int n_half = args.n_dims / 2;

    for (int i = tiitg; i < n_half; i += ntg) {
        // exp2 of a product keeps the frequency's relative error at a few ulp, where pow of a
        // rounded base would multiply the base's rounding error by i.
        const float theta_extrap = p * exp2(float(i) * args.theta_log2);
        const float theta_interp = args.freq_scale * theta_extrap;
        float theta = theta_interp;
        if (args.ext_factor != 0.0f) {
            const float ramp_y = (float(i) - args.corr_dim0) / max(0.001f, args.corr_dim1 - args.corr_dim0);
            const float mix_f = (1.0f - min(1.0f, max(0.0f, ramp_y))) * args.ext_factor;
            theta = theta_interp * (1.0f - mix_f) + theta_extrap * mix_f;
        }
        // Angles reach thousands of radians: the precise forms reduce them correctly.
        const float c = precise::cos(theta) * args.mscale;
        const float s = precise::sin(theta) * args.mscale;
        const int j0 = NEOX ? i : 2 * i;
        const int j1 = NEOX ? i + n_half : 2 * i + 1;
        const float x0 = float(*((device const T *) (x + (ulong) j0 * args.nb00)));
        const float x1 = float(*((device const T *) (x + (ulong) j1 * args.nb00)));
        *((device T *) (y + (ulong) j0 * args.nb0)) = T(x0 * c - x1 * s);
        *((device T *) (y + (ulong) j1 * args.nb0)) = T(x0 * s + x1 * c);
    }
    for (int j = args.n_dims + tiitg; j < args.ne00; j += ntg) {
        *((device T *) (y + (ulong) j * args.nb0)) = *((device const T *) (x + (ulong) j * args.nb00));
    }
}

typedef decltype(kernel_rope<float, false>) kernel_rope_f32_t;
typedef decltype(kernel_rope<half, false>) kernel_rope_f16_t;

template [[host_name("kernel_rope_norm_f32")]] kernel kernel_rope_f32_t kernel_rope<float, false>;
template [[host_name("kernel_rope_neox_f32")]] kernel kernel_rope_f32_t kernel_rope<float, true>;
template [[host_name("kernel_rope_norm_f16")]] kernel kernel_rope_f16_t kernel_rope<half, false>;
template [[host_name("kernel_rope_neox_f16")]] kernel kernel_rope_f16_t kernel_rope<half, true>;
