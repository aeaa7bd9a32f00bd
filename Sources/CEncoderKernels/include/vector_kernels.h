#ifndef CAIRN_VECTOR_KERNELS_H
#define CAIRN_VECTOR_KERNELS_H
// The dense search's kernels: vectors kept in memory as int8 codes with one scale per row
// (symmetric, per row: code = round(x / scale), scale = max |x| / 127), scored against a float
// query, and the exact float32 dot product used to rescore the best of them. Compiled for
// AVX-512, AVX2 + FMA and the baseline instruction set; the widest this CPU runs is used.

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Quantizes one row of `d` little-endian float32 values at `values` (any alignment) into
/// `code` (d values in [-127, 127]) and `*scale`; a zero row gets scale 0 and zero codes.
void cairn_quantize_row_i8(const void *values, int d, signed char *code, float *scale);

/// y[r] = scales[r] · Σⱼ codes[r·d + j] · query[j], for r in [first, first + count).
void cairn_similarities_i8(const signed char *codes, const float *scales, size_t first, size_t count, int d,
                           const float *query, float *y);

/// Σⱼ values[j] · query[j] for `d` little-endian float32 values at `values` (any alignment).
float cairn_dot_f32(const void *values, const float *query, int d);

#ifdef __cplusplus
}
#endif
#endif
