// UPSCALE (ggml_interpolate): nearest dst[i] = src0[floor(i_d / sf_d)] on every dim; bilinear and bicubic
// (Keys, a = -0.75) on dims 0 and 1 at (i + offset) / sf - offset with edges clamped, dims 2 and 3 nearest;
// bilinear | MB_SCALE_ANTIALIAS: torch's antialias=True triangle filter (ggml's GGML_SCALE_FLAG_ANTIALIAS).
// One threadgroup per dst row.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

static inline float upscale_at(device const char * plane, constant mb_kargs_upscale & args, int i0, int i1) {
    i0 = clamp(i0, 0, args.ne00 - 1);
    i1 = clamp(i1, 0, args.ne01 - 1);
    return *((device const float *) (plane + i0 * args.nb00 + i1 * args.nb01));
}

static inline void upscale_cubic(float t, thread float * w) {
    const float A = -0.75f;
    const float x0 = t + 1.0f, x3 = 2.0f - t, x1 = t, x2 = 1.0f - t;
    w[0] = ((A * x0 - 5.0f * A) * x0 + 8.0f * A) * x0 - 4.0f * A;
    w[1] = ((A + 2.0f) * x1 - (A + 3.0f)) * x1 * x1 + 1.0f;
    w[2] = ((A + 2.0f) * x2 - (A + 3.0f)) * x2 * x2 + 1.0f;
    w[3] = ((A * x3 - 5.0f * A) * x3 + 8.0f * A) * x3 - 4.0f * A;
}

kernel void kernel_upscale_f32(
        constant mb_kargs_upscale & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int j2 = int(float(tgpig.y) / args.sf2);
    const int j3 = int(float(tgpig.z) / args.sf3);
    device const char * plane = src0 + j2 * args.nb02 + j3 * args.nb03;
    device char * y = dst + tgpig.x * args.nb1 + tgpig.y * args.nb2 + tgpig.z * args.nb3;
    const float off = args.offset;
    if (args.mode == MB_SCALE_NEAREST) {
        const int j1 = int(float(tgpig.x) / args.sf1);
        for (int i0 = tpitg; i0 < args.ne0; i0 += ntg) {
            *((device float *) (y + i0 * args.nb0)) = upscale_at(plane, args, int(float(i0) / args.sf0), j1);
        }
        return;
    }
    if (args.mode == (MB_SCALE_BILINEAR | MB_SCALE_ANTIALIAS)) {
        // Triangle filter of half-width support = max(1, 1 / sf) around c = (i + offset) / sf, taps
        // s in [c - support + offset, c + support + offset) inside the image, normalised by their sum.
        const float sup0 = max(1.0f, 1.0f / args.sf0), sup1 = max(1.0f, 1.0f / args.sf1);
        const float inv0 = 1.0f / sup0, inv1 = 1.0f / sup1;
        const float cy = (float(tgpig.x) + off) / args.sf1;
        const int y_min = max(int(cy - sup1 + off), 0);
        const int y_max = min(int(cy + sup1 + off), args.ne01);
        for (int i0 = tpitg; i0 < args.ne0; i0 += ntg) {
            const float cx = (float(i0) + off) / args.sf0;
            const int x_min = max(int(cx - sup0 + off), 0);
            const int x_max = min(int(cx + sup0 + off), args.ne00);
            float v = 0.0f, total = 0.0f;
            for (int sy = y_min; sy < y_max; ++sy) {
                const float wy = max(1.0f - fabs((float(sy) - cy + off) * inv1), 0.0f);
                for (int sx = x_min; sx < x_max; ++sx) {
                    const float w = max(1.0f - fabs((float(sx) - cx + off) * inv0), 0.0f) * wy;
                    if (w <= 0.0f) continue;
                    v += upscale_at(plane, args, sx, sy) * w;
                    total += w;
                }
            }
            *((device float *) (y + i0 * args.nb0)) = total > 0.0f ? v / total : 0.0f;
        }
        return;
    }
    const float fy = (float(tgpig.x) + off) / args.sf1 - off;
    const int y0 = int(floor(fy));
    if (args.mode == MB_SCALE_BILINEAR) {
        const int ya = clamp(y0, 0, args.ne01 - 1);
        const int yb = clamp(y0 + 1, 0, args.ne01 - 1);
        const float dy = clamp(fy - float(ya), 0.0f, 1.0f);
        for (int i0 = tpitg; i0 < args.ne0; i0 += ntg) {
            const float fx = (float(i0) + off) / args.sf0 - off;
            const int x0 = int(floor(fx));
            const int xa = clamp(x0, 0, args.ne00 - 1);
            const int xb = clamp(x0 + 1, 0, args.ne00 - 1);
            const float dx = clamp(fx - float(xa), 0.0f, 1.0f);
            const float v = upscale_at(plane, args, xa, ya) * (1.0f - dx) * (1.0f - dy) +
                            upscale_at(plane, args, xb, ya) * dx * (1.0f - dy) +
                            upscale_at(plane, args, xa, yb) * (1.0f - dx) * dy +
                            upscale_at(plane, args, xb, yb) * dx * dy;
            *((device float *) (y + i0 * args.nb0)) = v;
        }
        return;
    }
    float wy[4];
    upscale_cubic(fy - float(y0), wy);
    for (int i0 = tpitg; i0 < args.ne0; i0 += ntg) {
        const float fx = (float(i0) + off) / args.sf0 - off;
        const int x0 = int(floor(fx));
        float wx[4];
        upscale_cubic(fx - float(x0), wx);
        float v = 0.0f;
        for (int u = 0; u < 4; ++u) {
            float row = 0.0f;
            for (int t = 0; t < 4; ++t) {
                row += upscale_at(plane, args, x0 - 1 + t, y0 - 1 + u) * wx[t];
            }
            v += row * wy[u];
        }
        *((device float *) (y + i0 * args.nb0)) = v;
    }
}
