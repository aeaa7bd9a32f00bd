#include "vector_kernels.h"
#include "cpu_features.h"

#include <math.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

// A row's estimate is an integer sum: its int8 codes times the query rounded to int16 with one
// scale for the whole query (query ≈ scale · q16). Integer sums are exact, so every instruction
// set gives the same estimate, bit for bit, and the codes are widened to 16 bits (one
// instruction) where a float dot product widened them to 32 and converted them (two). Rounding
// the query moves an estimate by about 1e-5 of its size, against the codes' own 1e-3.

// The sum over one row's d codes; each level's kernels are built around its own.
static inline int32_t row_sum_baseline(const signed char *row, int d, const int16_t *q) {
    int32_t sum = 0;
    for (int j = 0; j < d; j++) sum += (int32_t)row[j] * q[j];
    return sum;
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bw"))) static inline int32_t row_sum_avx512(const signed char *row, int d,
                                                                               const int16_t *q) {
    __m512i sum = _mm512_setzero_si512();
    int j = 0;
    for (; j + 32 <= d; j += 32) {
        __m512i codes = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(row + j)));
        sum = _mm512_add_epi32(sum, _mm512_madd_epi16(codes, _mm512_loadu_si512(q + j)));
    }
    int32_t total = _mm512_reduce_add_epi32(sum);
    for (; j < d; j++) total += (int32_t)row[j] * q[j];
    return total;
}

__attribute__((target("avx2"))) static inline int32_t row_sum_avx2(const signed char *row, int d, const int16_t *q) {
    // Two sums, so that consecutive blocks do not wait on each other's addition.
    __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
    int j = 0;
    for (; j + 32 <= d; j += 32) {
        __m256i low = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(row + j)));
        __m256i high = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(row + j + 16)));
        even = _mm256_add_epi32(even, _mm256_madd_epi16(low, _mm256_loadu_si256((const __m256i *)(q + j))));
        odd = _mm256_add_epi32(odd, _mm256_madd_epi16(high, _mm256_loadu_si256((const __m256i *)(q + j + 16))));
    }
    for (; j + 16 <= d; j += 16) {
        __m256i codes = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(row + j)));
        even = _mm256_add_epi32(even, _mm256_madd_epi16(codes, _mm256_loadu_si256((const __m256i *)(q + j))));
    }
    __m256i both = _mm256_add_epi32(even, odd);
    __m128i half = _mm_add_epi32(_mm256_castsi256_si128(both), _mm256_extracti128_si256(both, 1));
    half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0x4E));
    half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0xB1));
    int32_t total = _mm_cvtsi128_si32(half);
    for (; j < d; j++) total += (int32_t)row[j] * q[j];
    return total;
}
#endif

// One instruction set's scoring kernels, a table of them per set (as encoder_kernels.c does).
typedef struct {
    void (*similarities)(const signed char *codes, const float *scales, size_t first, size_t count, int d,
                         const int16_t *q, float scale, float *y);
    void (*similarities_rows)(const signed char *codes, const float *scales, const int32_t *rows, size_t count, int d,
                              const int16_t *q, float scale, float *y);
} scoring_kernels;

// One level's kernels: a range of rows, and a list of rows far apart in memory (the next rows'
// codes asked for ahead of their turn). The float product is written once, here, for all levels.
#define SCORING_KERNELS(suffix, attribute)                                                           \
    attribute static void similarities_##suffix(const signed char *codes, const float *scales, size_t first, \
                                                size_t count, int d, const int16_t *q, float scale, float *y) { \
        for (size_t r = first; r < first + count; r++) {                                            \
            y[r] = (float)row_sum_##suffix(codes + r * (size_t)d, d, q) * (scale * scales[r]);      \
        }                                                                                            \
    }                                                                                                \
    attribute static void similarities_rows_##suffix(const signed char *codes, const float *scales,  \
                                                     const int32_t *rows, size_t count, int d,       \
                                                     const int16_t *q, float scale, float *y) {      \
        for (size_t i = 0; i < count; i++) {                                                        \
            if (i + 8 < count) {                                                                     \
                const signed char *ahead = codes + (size_t)rows[i + 8] * (size_t)d;                  \
                for (int line = 0; line < d; line += 64) __builtin_prefetch(ahead + line);           \
            }                                                                                        \
            size_t r = (size_t)rows[i];                                                              \
            y[i] = (float)row_sum_##suffix(codes + r * (size_t)d, d, q) * (scale * scales[r]);      \
        }                                                                                            \
    }                                                                                                \
    static const scoring_kernels scoring_##suffix = {similarities_##suffix, similarities_rows_##suffix};

#define HAMMING_BODY                                                                                 \
    for (size_t r = first; r < first + count; r++) {                                                \
        const uint64_t *row = bits + r * (size_t)words;                                              \
        int distance = 0;                                                                            \
        for (int w = 0; w < words; w++) distance += __builtin_popcountll(row[w] ^ query[w]);         \
        distances[r] = (uint16_t)distance;                                                           \
    }

#if defined(__x86_64__)
SCORING_KERNELS(avx512, __attribute__((target("avx512f,avx512bw"))))
SCORING_KERNELS(avx2, __attribute__((target("avx2"))))

__attribute__((target("popcnt")))
static void hamming_popcnt(const uint64_t *bits, size_t first, size_t count, int words, const uint64_t *query,
                           uint16_t *distances) {
    HAMMING_BODY
}

// A row's words (up to eight at a time) in one register: masked loads, one population count of
// eight words, one sum across the lanes. About twice the scalar kernel's speed at 384 bits.
__attribute__((target("avx512f,avx512vpopcntdq")))
static void hamming_avx512(const uint64_t *bits, size_t first, size_t count, int words, const uint64_t *query,
                           uint16_t *distances) {
    for (size_t r = first; r < first + count; r++) {
        const uint64_t *row = bits + r * (size_t)words;
        __m512i sum = _mm512_setzero_si512();
        for (int w = 0; w < words; w += 8) {
            __mmask8 lanes = (__mmask8)(words - w >= 8 ? 0xFF : (1u << (words - w)) - 1);
            __m512i x = _mm512_xor_si512(_mm512_maskz_loadu_epi64(lanes, row + w), _mm512_maskz_loadu_epi64(lanes, query + w));
            sum = _mm512_add_epi64(sum, _mm512_popcnt_epi64(x));
        }
        distances[r] = (uint16_t)_mm512_reduce_add_epi64(sum);
    }
}

// The rows at or below `threshold` in row order, 32 distances compared at once (most rows are
// farther: a shortlist keeps a few percent).
__attribute__((target("avx512f,avx512bw")))
static size_t select_within_avx512(const uint16_t *distances, size_t n, int threshold, size_t at_threshold, size_t keep,
                                   int32_t *rows) {
    size_t kept = 0, r = 0;
    __m512i limit = _mm512_set1_epi16((short)threshold);
    for (; r + 32 <= n && kept < keep; r += 32) {
        __mmask32 near = _mm512_cmple_epu16_mask(_mm512_loadu_si512(distances + r), limit);
        while (near != 0 && kept < keep) {
            size_t row = r + (size_t)__builtin_ctz(near);
            near &= near - 1;
            if (distances[row] == threshold) {
                if (at_threshold == 0) continue;
                at_threshold--;
            }
            rows[kept++] = (int32_t)row;
        }
    }
    for (; r < n && kept < keep; r++) {
        if (distances[r] > threshold) continue;
        if (distances[r] == threshold) {
            if (at_threshold == 0) continue;
            at_threshold--;
        }
        rows[kept++] = (int32_t)r;
    }
    return kept;
}
#endif
SCORING_KERNELS(baseline, )

static void hamming_baseline(const uint64_t *bits, size_t first, size_t count, int words, const uint64_t *query,
                             uint16_t *distances) {
    HAMMING_BODY
}

typedef void (*hamming_fn)(const uint64_t *, size_t, size_t, int, const uint64_t *, uint16_t *);

// Each choice is made at its first use; threads that race there store the same value.
#define CHOOSE(type, kernel, choice)                                                                 \
    static type kernel = NULL;                                                                       \
    type chosen = __atomic_load_n(&kernel, __ATOMIC_RELAXED);                                        \
    if (chosen == NULL) {                                                                            \
        chosen = choice;                                                                             \
        __atomic_store_n(&kernel, chosen, __ATOMIC_RELAXED);                                         \
    }

// The scoring kernels of one level (0 baseline, 1 AVX2, 2 AVX-512 BW), NULL when this CPU does
// not run it.
static const scoring_kernels *scoring_level(int level) {
#if defined(__x86_64__)
    if (level == 2) return cairn_cpu_avx512() ? &scoring_avx512 : NULL;
    if (level == 1) return cairn_cpu_avx2() ? &scoring_avx2 : NULL;
#endif
    return level == 0 ? &scoring_baseline : NULL;
}

static const scoring_kernels *widest_scoring(void) {
    for (int level = 2; level > 0; level--) {
        const scoring_kernels *kernels = scoring_level(level);
        if (kernels != NULL) return kernels;
    }
    return &scoring_baseline;
}

static const scoring_kernels *scoring(void) {
    CHOOSE(const scoring_kernels *, kernels, widest_scoring())
    return chosen;
}

// The Hamming kernels, widest first; a CPU without one of them is given NULL.
static hamming_fn hamming_kernel(int level) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (level == 2) return cairn_cpu_avx512_popcount() ? hamming_avx512 : NULL;
    if (level == 1) return __builtin_cpu_supports("popcnt") ? hamming_popcnt : NULL;
#endif
    return level == 0 ? hamming_baseline : NULL;
}

static hamming_fn chosen_hamming(void) {
    for (int level = 2; level > 0; level--) {
        hamming_fn kernel = hamming_kernel(level);
        if (kernel != NULL) return kernel;
    }
    return hamming_baseline;
}

// Rounds the query to int16 (query ≈ *scale · q), its largest magnitude to the largest value
// for which no row's sum can leave int32 (127 · limit · d < 2³¹), and scores the rows `rows`
// lists, or the range first ..< first + count when `rows` is NULL. A query that is not finite
// scores every row NaN, as a float product would have.
static void similarities(const scoring_kernels *kernels, const signed char *codes, const float *scales,
                         const int32_t *rows, size_t first, size_t count, int d, const float *query, float *y) {
    float largest = 0;
    int finite = 1;
    for (int j = 0; j < d; j++) {
        float magnitude = fabsf(query[j]);
        finite &= isfinite(magnitude) != 0;
        if (magnitude > largest) largest = magnitude;
    }
    int16_t local[1024];
    int16_t *q = !finite ? NULL : d <= 1024 ? local : malloc(sizeof(int16_t) * (size_t)d);
    if (q == NULL) {  // not finite, or out of memory
        float *out = rows == NULL ? y + first : y;
        for (size_t i = 0; i < count; i++) out[i] = NAN;
        return;
    }
    long limit = 2147483647L / (127L * (d > 0 ? d : 1));
    if (limit > 32767) limit = 32767;
    float scale = largest > 0 ? largest / (float)limit : 0;
    for (int j = 0; j < d; j++) q[j] = scale > 0 ? (int16_t)lrintf(query[j] / scale) : 0;
    if (rows == NULL) {
        kernels->similarities(codes, scales, first, count, d, q, scale, y);
    } else {
        kernels->similarities_rows(codes, scales, rows, count, d, q, scale, y);
    }
    if (q != local) free(q);
}

void cairn_similarities_i8(const signed char *codes, const float *scales, size_t first, size_t count, int d,
                           const float *query, float *y) {
    similarities(scoring(), codes, scales, NULL, first, count, d, query, y);
}

void cairn_similarities_i8_rows(const signed char *codes, const float *scales, const int32_t *rows, size_t count, int d,
                                const float *query, float *y) {
    similarities(scoring(), codes, scales, rows, 0, count, d, query, y);
}

int cairn_similarities_i8_level(int level, const signed char *codes, const float *scales, const int32_t *rows, size_t first,
                                size_t count, int d, const float *query, float *y) {
    const scoring_kernels *kernels = scoring_level(level);
    if (kernels == NULL) return 0;
    similarities(kernels, codes, scales, rows, first, count, d, query, y);
    return 1;
}

void cairn_hamming(const uint64_t *bits, size_t first, size_t count, int words, const uint64_t *query, uint16_t *distances) {
    CHOOSE(hamming_fn, kernel, chosen_hamming())
    chosen(bits, first, count, words, query, distances);
}

int cairn_hamming_level(int level, const uint64_t *bits, size_t first, size_t count, int words, const uint64_t *query,
                        uint16_t *distances) {
    hamming_fn kernel = hamming_kernel(level);
    if (kernel == NULL) return 0;
    kernel(bits, first, count, words, query, distances);
    return 1;
}

// Packs the signs of d values, `positive(j)` for value j, into (d + 63) / 64 words.
#define PACK_SIGNS(d, positive, out)                                                                 \
    for (int w = 0; w < ((d) + 63) / 64; w++) {                                                      \
        uint64_t word = 0;                                                                           \
        for (int j = w * 64; j < (d) && j < w * 64 + 64; j++) word |= (uint64_t)(positive) << (j - w * 64); \
        (out)[w] = word;                                                                             \
    }

void cairn_sign_bits_i8(const signed char *codes, size_t first, size_t count, int d, uint64_t *bits) {
    const size_t words = (size_t)(d + 63) / 64;
    for (size_t r = first; r < first + count; r++) {
        const signed char *row = codes + r * (size_t)d;
        PACK_SIGNS(d, row[j] > 0, bits + r * words)
    }
}

void cairn_sign_bits_f32(const float *query, int d, uint64_t *bits) {
    PACK_SIGNS(d, query[j] > 0, bits)
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

// The rows at or below `threshold` in row order, `at_threshold` of those at it (the first).
static size_t select_within_baseline(const uint16_t *distances, size_t n, int threshold, size_t at_threshold, size_t keep,
                                     int32_t *rows) {
    size_t kept = 0;
    for (size_t r = 0; r < n && kept < keep; r++) {
        int distance = distances[r];
        if (distance > threshold) continue;
        if (distance == threshold) {
            if (at_threshold == 0) continue;
            at_threshold--;
        }
        rows[kept++] = (int32_t)r;
    }
    return kept;
}

typedef size_t (*select_fn)(const uint16_t *, size_t, int, size_t, size_t, int32_t *);

// The selection kernels by level, as `hamming_kernel` (none at level 1).
static select_fn select_kernel(int level) {
#if defined(__x86_64__)
    if (level == 2) return cairn_cpu_avx512() ? select_within_avx512 : NULL;
#endif
    return level == 0 ? select_within_baseline : NULL;
}

static select_fn chosen_select(void) {
    for (int level = 2; level > 0; level--) {
        select_fn kernel = select_kernel(level);
        if (kernel != NULL) return kernel;
    }
    return select_within_baseline;
}

static size_t select_nearest(select_fn within, const uint16_t *distances, size_t n, size_t keep, int maximum, int32_t *rows) {
    // A count of each distance (0 ... maximum; larger ones are never kept), then the distance of
    // the last row kept, then one pass in row order. Four counts, one for each of four
    // neighbouring rows, so that rows at one distance do not wait on each other's increment.
    if (maximum < 0) return 0;
    if (maximum > 4096) maximum = 4096;
    uint32_t counts[4][4097];
    for (int part = 0; part < 4; part++) memset(counts[part], 0, sizeof(uint32_t) * (size_t)(maximum + 1));
    size_t r = 0;
    for (; r + 4 <= n; r += 4) {
        for (int part = 0; part < 4; part++) {
            if (distances[r + part] <= maximum) counts[part][distances[r + part]]++;
        }
    }
    for (; r < n; r++) {
        if (distances[r] <= maximum) counts[0][distances[r]]++;
    }
    size_t below = 0;
    int threshold = 0;
    for (; threshold <= maximum; threshold++) {
        size_t at = (size_t)counts[0][threshold] + counts[1][threshold] + counts[2][threshold] + counts[3][threshold];
        if (below + at >= keep) break;
        below += at;
    }
    if (threshold > maximum) threshold = maximum;
    return within(distances, n, threshold, keep > below ? keep - below : 0, keep, rows);
}

size_t cairn_select_nearest(const uint16_t *distances, size_t n, size_t keep, int maximum, int32_t *rows) {
    CHOOSE(select_fn, kernel, chosen_select())
    return select_nearest(chosen, distances, n, keep, maximum, rows);
}

int cairn_select_nearest_level(int level, const uint16_t *distances, size_t n, size_t keep, int maximum, int32_t *rows,
                               size_t *kept) {
    select_fn kernel = select_kernel(level);
    if (kernel == NULL) return 0;
    *kept = select_nearest(kernel, distances, n, keep, maximum, rows);
    return 1;
}

typedef struct {
    float score;
    int32_t row;
} scored_row;

// Whether a ranks before b: the higher score, then the lower row.
static inline int ranks_before(scored_row a, scored_row b) {
    return a.score > b.score || (a.score == b.score && a.row < b.row);
}

// Restores the min-heap `heap[0 ..< k]` below `parent`.
static void sift_down_min(float *heap, size_t k, size_t parent) {
    for (;;) {
        size_t least = parent, left = 2 * parent + 1, right = left + 1;
        if (left < k && heap[left] < heap[least]) least = left;
        if (right < k && heap[right] < heap[least]) least = right;
        if (least == parent) return;
        float t = heap[parent];
        heap[parent] = heap[least];
        heap[least] = t;
        parent = least;
    }
}

float cairn_kth_highest(const float *scores, size_t n, size_t k) {
    if (k == 0 || k > n) return -INFINITY;
    // The k highest so far as a min-heap: one comparison with its root a score, a replacement
    // only for a score above it (a few thousand in a million scores in random order).
    float *heap = malloc(k * sizeof(float));
    if (heap == NULL) return -INFINITY;
    float found = -INFINITY;
    for (size_t i = 0; i < k; i++) {
        if (isnan(scores[i])) goto done;
        heap[i] = scores[i];
    }
    for (size_t i = k / 2; i-- > 0;) sift_down_min(heap, k, i);
    for (size_t i = k; i < n; i++) {
        float x = scores[i];
        if (isnan(x)) goto done;
        if (x > heap[0]) {
            heap[0] = x;
            sift_down_min(heap, k, 0);
        }
    }
    found = heap[0];
done:
    free(heap);
    return found;
}

size_t cairn_top_scores(const float *scores, const int32_t *rows, size_t n, size_t k, int32_t *out) {
    if (k > n) k = n;
    if (k == 0) return 0;
    scored_row *items = malloc(n * sizeof(scored_row));
    if (items == NULL) return 0;
    for (size_t i = 0; i < n; i++) items[i] = (scored_row){scores[i], rows[i]};
    // Quickselect: the first k items end up the k that rank first (in no particular order).
    size_t low = 0, high = n - 1;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        // The median of three as the pivot, moved to `high`.
        if (ranks_before(items[middle], items[low])) { scored_row t = items[middle]; items[middle] = items[low]; items[low] = t; }
        if (ranks_before(items[high], items[low])) { scored_row t = items[high]; items[high] = items[low]; items[low] = t; }
        if (ranks_before(items[middle], items[high])) { scored_row t = items[middle]; items[middle] = items[high]; items[high] = t; }
        scored_row pivot = items[high];
        size_t store = low;
        for (size_t i = low; i < high; i++) {
            if (ranks_before(items[i], pivot)) { scored_row t = items[i]; items[i] = items[store]; items[store] = t; store++; }
        }
        { scored_row t = items[store]; items[store] = items[high]; items[high] = t; }
        if (store == k - 1 || store == k) break;
        if (store < k) low = store + 1; else high = store - 1;
    }
    for (size_t i = 0; i < k; i++) out[i] = items[i].row;
    free(items);
    return k;
}
