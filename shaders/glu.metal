// Gated linear units over f32 rows with any strides: dst = act(x) * g, x and g the two halves of
// one row or rows of two tensors. One threadgroup per dst row; the op is FC_glu_op.
#include <metal_stdlib>
#include "kargs.h"
#include "activations.h"

using namespace metal;

constant int FC_glu_op [[function_constant(500)]];

static inline float glu_apply(float x, float g, float alpha, float limit) {
    switch (FC_glu_op) {
        case MB_GLU_REGLU:
            return select(0.0f, x, x > 0.0f) * g;
        case MB_GLU_GEGLU:
            return gelu_of(x) * g;
        case MB_GLU_SWIGLU:
            return x * sigmoid_of(x) * g;
        case MB_GLU_GEGLU_ERF:
            return gelu_erf_of(x) * g;
        case MB_GLU_GEGLU_QUICK:
            return x * sigmoid_of(1.702f * x) * g;
        case MB_GLU_SWIGLU_OAI: {
            const float xc = min(x, limit);
            const float gc = clamp(g, -limit, limit);
            return xc * sigmoid_of(alpha * xc) * (gc + 1.0f);
        }
        default:
            return 0.0f;
    }
}

// T: the stored element (float or half), computed in f32.
template <typename T>
kernel void kernel_glu(
        constant mb_kargs_glu & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    device const char * x = src0 + tgpig.x * args.nb01 + tgpig.y * args.nb02 + tgpig.z * args.nb03;
    device const char * g = src1 + tgpig.x * args.nb11 + tgpig.y * args.nb12 + tgpig.z * args.nb13;
    device char * y = dst + tgpig.x * args.nb1 + tgpig.y * args.nb2 + tgpig.z * args.nb3;
    for (int i0 = tpitg; i0 < args.ne0; i0 += ntg) {
        const float xv = float(*((device const T *) (x + (args.off0 + i0) * args.nb00)));
        const float gv = float(*((device const T *) (g + (args.off1 + i0) * args.nb10)));
        *((device T *) (y + i0 * args.nb0)) = T(glu_apply(xv, gv, args.alpha, args.limit));
    }
}

typedef decltype(kernel_glu<float>) kernel_glu_t;

template [[host_name("kernel_glu_f32")]] kernel kernel_glu_t kernel_glu<float>;
template [[host_name("kernel_glu_f16")]] kernel kernel_glu_t kernel_glu<half>;
