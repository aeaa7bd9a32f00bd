#include "encoder_kernels.h"
#include "cpu_features.h"

#include <float.h>
#include <string.h>

// Sixteen floats, whatever the instruction set: one register with AVX-512, two with AVX2, four
// with SSE. The kernels are written once on this type and compiled once per instruction set.
typedef float vf16 __attribute__((vector_size(64), aligned(4)));
typedef int vi16 __attribute__((vector_size(64), aligned(4)));
#define SPLAT(value) ((vf16){0} + (float)(value))
#define SIGN_BIT ((int)(-2147483647 - 1))
// The helpers that pass vf16 by value are always inlined into a kernel of their own instruction
// set, so the calling convention that clang warns about is never used.
#pragma clang diagnostic ignored "-Wpsabi"

#if defined(__x86_64__)
#define KERNEL_ATTR __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))
#define KERNEL(name) name##_avx512
#define KERNEL_NAME "avx512"
#define LINEAR_ROWS 8
#include "encoder_kernels_body.h"
#undef KERNEL_ATTR
#undef KERNEL
#undef KERNEL_NAME
#undef LINEAR_ROWS

#define KERNEL_ATTR __attribute__((target("avx2,fma")))
#define KERNEL(name) name##_avx2
#define KERNEL_NAME "avx2"
#define LINEAR_ROWS 2
#include "encoder_kernels_body.h"
#undef KERNEL_ATTR
#undef KERNEL
#undef KERNEL_NAME
#undef LINEAR_ROWS
#endif

#define KERNEL_ATTR
#define KERNEL(name) name##_baseline
#define KERNEL_NAME "baseline"
#define LINEAR_ROWS 1
#include "encoder_kernels_body.h"
#undef KERNEL_ATTR
#undef KERNEL
#undef KERNEL_NAME
#undef LINEAR_ROWS

static int panels(int outputs) { return (outputs + CAIRN_PANEL_WIDTH - 1) / CAIRN_PANEL_WIDTH; }

size_t cairn_packed_weight_count(int outputs, int inputs) {
    return (size_t)panels(outputs) * (size_t)inputs * CAIRN_PANEL_WIDTH;
}

size_t cairn_packed_bias_count(int outputs) { return (size_t)panels(outputs) * CAIRN_PANEL_WIDTH; }

void cairn_pack_linear(const float *weight, const float *bias, int outputs, int inputs, float *packed_weight,
                       float *packed_bias) {
    memset(packed_weight, 0, cairn_packed_weight_count(outputs, inputs) * sizeof(float));
    memset(packed_bias, 0, cairn_packed_bias_count(outputs) * sizeof(float));
    for (int o = 0; o < outputs; o++) {
        float *panel = packed_weight + (size_t)(o / CAIRN_PANEL_WIDTH) * (size_t)inputs * CAIRN_PANEL_WIDTH;
        for (int i = 0; i < inputs; i++) {
            panel[(size_t)i * CAIRN_PANEL_WIDTH + o % CAIRN_PANEL_WIDTH] = weight[(size_t)o * (size_t)inputs + i];
        }
        packed_bias[o] = bias[o];
    }
}

const cairn_encoder_kernels *cairn_encoder_kernels_for(int isa) {
#if defined(__x86_64__)
    const int avx512 = cairn_cpu_avx512(), avx2 = cairn_cpu_avx2();
    switch (isa) {
    case CAIRN_KERNELS_BEST: return avx512 ? &kernels_avx512 : avx2 ? &kernels_avx2 : &kernels_baseline;
    case CAIRN_KERNELS_AVX512: return avx512 ? &kernels_avx512 : NULL;
    case CAIRN_KERNELS_AVX2: return avx2 ? &kernels_avx2 : NULL;
    case CAIRN_KERNELS_BASELINE: return &kernels_baseline;
    default: return NULL;
    }
#else
    return isa == CAIRN_KERNELS_BEST || isa == CAIRN_KERNELS_BASELINE ? &kernels_baseline : NULL;
#endif
}
