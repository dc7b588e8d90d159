// SSM_SCAN (Mamba's selective scan): one threadgroup per (head, sequence), threads take the head's rows
// i1; each walks the tokens, keeping its state row in the output's state area:
//   state[i0] = state[i0] * exp(dt+ * A[i0 or 0, h]) + B[i0, g] * x[i1, h] * dt+,  y = sum state[i0] C[i0, g]
// with dt+ = softplus(dt[h]). A state id outside [0, n_states) gives zeros and is written to the error
// record (buffer 8), which the backend raises as an OutOfRangeError at synchronize.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_ssm_scan_f32(
        constant mb_kargs_ssm_scan & args [[buffer(0)]],
        device const char * s [[buffer(1)]],
        device const char * x [[buffer(2)]],
        device const char * dt [[buffer(3)]],
        device const char * A [[buffer(4)]],
        device const char * B [[buffer(5)]],
        device const char * C [[buffer(6)]],
        device const char * ids [[buffer(7)]],
        device int * err [[buffer(8)]],
        device char * dst [[buffer(9)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int h = tgpig.x;
    const int i3 = tgpig.y;
    const int g = h / (args.nh / args.ng);
    const int id = ((device const int *) ids)[i3];
    const bool valid = id >= 0 && id < args.n_states;
    if (!valid && tpitg == 0) {
        err[1] = id;
        err[2] = args.n_states;
        err[0] = 5;
    }
    device const float * s0 = (device const float *) (s + (valid ? id : 0) * args.nb03) + h * args.nr * args.nc;
    device float * st = (device float *) (dst + args.s_off + i3 * args.nb03) + h * args.nr * args.nc;
    device const float * a_h = (device const float *) (A + h * args.nb31);
    device float * y_all = (device float *) dst;
    for (int i1 = tpitg; i1 < args.nr; i1 += ntg) {
        device float * cur = st + i1 * args.nc;
        if (!valid) {
            for (int i0 = 0; i0 < args.nc; ++i0) {
                cur[i0] = 0.0f;
            }
            for (int t = 0; t < args.nt; ++t) {
                y_all[((i3 * args.nt + t) * args.nh + h) * args.nr + i1] = 0.0f;
            }
            continue;
        }
        for (int i0 = 0; i0 < args.nc; ++i0) {
            cur[i0] = s0[i1 * args.nc + i0];
        }
        for (int t = 0; t < args.nt; ++t) {
            const float xv = *((device const float *) (x + i1 * 4 + h * args.nr * 4 + t * args.nb12 + i3 * args.nb13));
            const float d = *((device const float *) (dt + h * 4 + t * args.nb21 + i3 * args.nb22));
            const float dsp = d > 20.0f ? d : log(1.0f + exp(d));
            device const float * b = (device const float *) (B + g * args.nc * 4 + t * args.nb42 + i3 * args.nb43);
            device const float * c = (device const float *) (C + g * args.nc * 4 + t * args.nb52 + i3 * args.nb53);
            const float xdt = xv * dsp;
            const float da = exp(dsp * a_h[0]);
            float sum = 0.0f;
            for (int i0 = 0; i0 < args.nc; ++i0) {
                const float decay = args.ne30 == 1 ? da : exp(dsp * a_h[i0]);
                const float v = cur[i0] * decay + b[i0] * xdt;
                sum += v * c[i0];
                cur[i0] = v;
            }
            y_all[((i3 * args.nt + t) * args.nh + h) * args.nr + i1] = sum;
        }
    }
}
