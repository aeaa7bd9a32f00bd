#ifndef CAIRN_VECTOR_KERNELS_H
#define CAIRN_VECTOR_KERNELS_H
// The dense search's kernels: vectors kept in memory as int8 codes with one scale per row
// (symmetric, per row: code = round(x / scale), scale = max |x| / 127), scored against the query
// rounded to int16, and the exact float32 dot product used to rescore the best of them. Compiled for
// AVX-512, AVX2 + FMA and the baseline instruction set; the widest this CPU runs is used.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Quantizes one row of `d` little-endian float32 values at `values` (any alignment) into
/// `code` (d values in [-127, 127]) and `*scale`; a zero row gets scale 0 and zero codes.
void cairn_quantize_row_i8(const void *values, int d, signed char *code, float *scale);

/// y[r] ≈ scales[r] · Σⱼ codes[r·d + j] · query[j], for r in [first, first + count). The query is
/// rounded to int16 with one scale (largest magnitude min(32767, ⌊(2³¹ − 1) / (127·d)⌋)) and the
/// sum taken in integers, so every instruction set gives the same value, bit for bit:
/// (float)Σⱼ codes[r·d + j] · q[j] · (qscale · scales[r]). A query that is not finite gives NaN.
void cairn_similarities_i8(const signed char *codes, const float *scales, size_t first, size_t count, int d,
                           const float *query, float *y);

/// y[i] = scales[rows[i]] · Σⱼ codes[rows[i]·d + j] · query[j], for i in [0, count): the same
/// estimate for a list of rows.
void cairn_similarities_i8_rows(const signed char *codes, const float *scales, const int32_t *rows, size_t count, int d,
                                const float *query, float *y);

/// `cairn_similarities_i8` (`rows` NULL) or `cairn_similarities_i8_rows` (y[0 ..< count] for the
/// rows listed; `first` ignored) with the kernels of one instruction-set level (0 baseline, 1
/// AVX2, 2 AVX-512 BW), so that tests can compare every level this CPU runs; returns 0, doing
/// nothing, when it runs no kernel of that level.
int cairn_similarities_i8_level(int level, const signed char *codes, const float *scales, const int32_t *rows, size_t first,
                                size_t count, int d, const float *query, float *y);

/// Each row's signs as bits, for r in [first, first + count): bit j % 64 of word
/// bits[r·words + j / 64] is set when codes[r·d + j] > 0, where words = (d + 63) / 64 (the
/// bits past d are 0). A value too small for its row's codes (code 0) counts as not positive.
void cairn_sign_bits_i8(const signed char *codes, size_t first, size_t count, int d, uint64_t *bits);

/// The query's signs as bits, the same layout (one row): bit j set when query[j] > 0.
void cairn_sign_bits_f32(const float *query, int d, uint64_t *bits);

/// distances[r] = the number of differing bits between row r of `bits` (`words` words a row)
/// and `query`, for r in [first, first + count).
void cairn_hamming(const uint64_t *bits, size_t first, size_t count, int words, const uint64_t *query, uint16_t *distances);

/// The rows of the `keep` smallest of `distances[0 ..< n]`, ascending, into `rows`: every row
/// at a distance below the last one kept's, then rows at that distance in row order until
/// `keep`; a distance above `maximum` (at most 4096) is never kept. Returns how many were kept
/// (fewer than `keep` only when fewer rows are within `maximum`).
size_t cairn_select_nearest(const uint16_t *distances, size_t n, size_t keep, int maximum, int32_t *rows);

/// `cairn_hamming` and `cairn_select_nearest` (its count in `*kept`) with the kernels of one
/// instruction-set level (0 baseline, 1 POPCNT, 2 AVX-512), so that tests can compare every
/// level this CPU runs; returns 0, doing nothing, when it runs no kernel of that level.
int cairn_hamming_level(int level, const uint64_t *bits, size_t first, size_t count, int words, const uint64_t *query,
                        uint16_t *distances);
int cairn_select_nearest_level(int level, const uint16_t *distances, size_t n, size_t keep, int maximum, int32_t *rows,
                               size_t *kept);

/// The rows (from `rows`) of the `k` highest of `scores[0 ..< n]`, ties to the lower row, into
/// `out` in no particular order; returns min(k, n) (0 if memory runs out).
size_t cairn_top_scores(const float *scores, const int32_t *rows, size_t n, size_t k, int32_t *out);

/// The k-th highest of `scores[0 ..< n]` (k from 1), counting equal scores apart: the score a row
/// needs to be among the k best. -∞ when k is 0 or above n, when a score is NaN, or when memory
/// runs out: then any row may be.
float cairn_kth_highest(const float *scores, size_t n, size_t k);

/// Σⱼ values[j] · query[j] for `d` little-endian float32 values at `values` (any alignment).
float cairn_dot_f32(const void *values, const float *query, int d);

#ifdef __cplusplus
}
#endif
#endif
