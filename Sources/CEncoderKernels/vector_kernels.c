#include "vector_kernels.h"
#include "cpu_features.h"

#include <math.h>
#include <string.h>

// Sixteen lanes whatever the instruction set (see encoder_kernels.c).
typedef float vf16 __attribute__((vector_size(64), aligned(4)));
typedef signed char vc16 __attribute__((vector_size(16), aligned(1)));
#pragma clang diagnostic ignored "-Wpsabi"

#define SIMILARITIES_BODY                                                                            \
    for (size_t r = first; r < first + count; r++) {                                                \
        const signed char *row = codes + r * (size_t)d;                                              \
        vf16 acc = {0};                                                                              \
        int j = 0;                                                                                   \
        for (; j + 16 <= d; j += 16) {                                                               \
            vc16 c;                                                                                  \
            vf16 q;                                                                                  \
            memcpy(&c, row + j, sizeof c);                                                           \
            memcpy(&q, query + j, sizeof q);                                                         \
            acc += __builtin_convertvector(c, vf16) * q;                                             \
        }                                                                                            \
        float sum = 0;                                                                               \
        for (int lane = 0; lane < 16; lane++) sum += acc[lane];                                      \
        for (; j < d; j++) sum += (float)row[j] * query[j];                                          \
        y[r] = sum * scales[r];                                                                      \
    }

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))
static void similarities_avx512(const signed char *codes, const float *scales, size_t first, size_t count, int d,
                                const float *query, float *y) {
    SIMILARITIES_BODY
}

__attribute__((target("avx2,fma")))
static void similarities_avx2(const signed char *codes, const float *scales, size_t first, size_t count, int d,
                              const float *query, float *y) {
    SIMILARITIES_BODY
}
#endif

static void similarities_baseline(const signed char *codes, const float *scales, size_t first, size_t count, int d,
                                  const float *query, float *y) {
    SIMILARITIES_BODY
}

typedef void (*similarities_fn)(const signed char *, const float *, size_t, size_t, int, const float *, float *);

static similarities_fn chosen_similarities(void) {
#if defined(__x86_64__)
    if (cairn_cpu_avx512()) return similarities_avx512;
    if (cairn_cpu_avx2()) return similarities_avx2;
#endif
    return similarities_baseline;
}

void cairn_similarities_i8(const signed char *codes, const float *scales, size_t first, size_t count, int d,
                           const float *query, float *y) {
    // Chosen at the first call; threads that race there store the same function.
    static similarities_fn kernel = NULL;
    similarities_fn chosen = __atomic_load_n(&kernel, __ATOMIC_RELAXED);
    if (chosen == NULL) {
        chosen = chosen_similarities();
        __atomic_store_n(&kernel, chosen, __ATOMIC_RELAXED);
    }
    chosen(codes, scales, first, count, d, query, y);
}

void cairn_quantize_row_i8(const void *values, int d, signed char *code, float *scale) {
    float largest = 0;
    for (int j = 0; j < d; j++) {
        float x;
        memcpy(&x, (const char *)values + 4 * (size_t)j, 4);
        float magnitude = fabsf(x);
        if (magnitude > largest) largest = magnitude;
    }
    if (!(largest > 0) || !isfinite(largest)) {
        memset(code, 0, (size_t)d);
        *scale = 0;
        return;
    }
    // Rounded half away from zero by adding ±0.5 and truncating: a loop the compiler
    // vectorises (roundf is a call per value, a quarter of a million-row start-up's time).
    const float inverse = 127.0f / largest;
    for (int j = 0; j < d; j++) {
        float x;
        memcpy(&x, (const char *)values + 4 * (size_t)j, 4);
        float q = x * inverse;
        q += q >= 0 ? 0.5f : -0.5f;
        q = q > 127 ? 127 : (q < -127 ? -127 : q);
        code[j] = (signed char)(int)q;
    }
    *scale = largest / 127.0f;
}

float cairn_dot_f32(const void *values, const float *query, int d) {
    float sum = 0;
    for (int j = 0; j < d; j++) {
        float x;
        memcpy(&x, (const char *)values + 4 * (size_t)j, 4);
        sum += x * query[j];
    }
    return sum;
}
