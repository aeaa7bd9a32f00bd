// One instruction set's encoder kernels, included once per instruction set by encoder_kernels.c
// with KERNEL_ATTR (the target attribute), KERNEL(name) (the name with its suffix) and
// LINEAR_ROWS (tokens per step of the linear kernel: as many as leave the accumulators in
// registers) defined. No include guard: that is the point.

#define INLINE KERNEL_ATTR static inline __attribute__((always_inline))

INLINE vf16 KERNEL(load)(const float *p) {
    vf16 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

INLINE void KERNEL(store)(float *p, vf16 v) { __builtin_memcpy(p, &v, sizeof v); }

/// `count` (< 16) floats from p, the other lanes `fill`.
INLINE vf16 KERNEL(load_tail)(const float *p, int count, float fill) {
    float lanes[16];
    for (int i = 0; i < 16; i++) lanes[i] = i < count ? p[i] : fill;
    return KERNEL(load)(lanes);
}

INLINE void KERNEL(store_tail)(float *p, vf16 v, int count) {
    float lanes[16];
    KERNEL(store)(lanes, v);
    for (int i = 0; i < count; i++) p[i] = lanes[i];
}

INLINE float KERNEL(sum)(vf16 v) {
    float lanes[16];
    KERNEL(store)(lanes, v);
    float total = 0;
    for (int i = 0; i < 16; i++) total += lanes[i];
    return total;
}

INLINE float KERNEL(max)(vf16 v) {
    float lanes[16];
    KERNEL(store)(lanes, v);
    float maximum = lanes[0];
    for (int i = 1; i < 16; i++) maximum = lanes[i] > maximum ? lanes[i] : maximum;
    return maximum;
}

/// e^x, accurate to about 2 ulp for x in [-87, 88]: x = n·ln2 + r, a degree-6 polynomial for e^r
/// on |r| ≤ ln2/2, and 2^n built in the exponent bits. Adding 1.5·2²³ rounds n and leaves it in
/// the low bits of the float, with no conversion instruction.
INLINE vf16 KERNEL(exp)(vf16 input) {
    const vf16 x = __builtin_elementwise_min(__builtin_elementwise_max(input, SPLAT(-87.3f)), SPLAT(88.3f));
    const vf16 shifted = x * 1.44269504f + 12582912.0f;
    const vf16 n = shifted - 12582912.0f;
    // Cody–Waite: ln2 in two parts, so that x − n·ln2 keeps its low bits.
    const vf16 r = x - n * 0.69314575f - n * 1.4286068e-6f;
    vf16 p = SPLAT(1.0f / 720);
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    // bits(shifted) = 0x4B40_0000 + n, so the biased exponent n + 127 is bits − 0x4B3F_FF81.
    return p * (vf16)(((vi16)shifted - 0x4B3FFF81) << 23);
}

/// erf(x) with absolute error below 3e-7: Abramowitz & Stegun 7.1.26, with e^(−x²) from exp.
INLINE vf16 KERNEL(erf)(vf16 x) {
    const vf16 a = (vf16)((vi16)x & 0x7FFFFFFF);
    const vf16 t = 1.0f / (1.0f + 0.3275911f * a);
    vf16 poly = SPLAT(1.061405429f);
    poly = poly * t - 1.453152027f;
    poly = poly * t + 1.421413741f;
    poly = poly * t - 0.284496736f;
    poly = poly * t + 0.254829592f;
    const vf16 y = 1.0f - poly * t * KERNEL(exp)(-a * a);
    return (vf16)((vi16)y | ((vi16)x & SIGN_BIT));
}

INLINE vf16 KERNEL(gelu16)(vf16 x) { return x * 0.5f * (1.0f + KERNEL(erf)(x * 0.70710677f)); }

KERNEL_ATTR static void KERNEL(gelu)(float *x, size_t count) {
    size_t i = 0;
    for (; i + 16 <= count; i += 16) KERNEL(store)(x + i, KERNEL(gelu16)(KERNEL(load)(x + i)));
    if (i < count) {
        const int rest = (int)(count - i);
        KERNEL(store_tail)(x + i, KERNEL(gelu16)(KERNEL(load_tail)(x + i, rest, 0)), rest);
    }
}

KERNEL_ATTR static void KERNEL(softmax_rows)(float *x, int rows, int columns, int stride) {
    const int whole = columns & ~15, rest = columns - whole;
    for (int row = 0; row < rows; row++) {
        float *v = x + (size_t)row * stride;
        vf16 maximum = SPLAT(-FLT_MAX);
        for (int i = 0; i < whole; i += 16) maximum = __builtin_elementwise_max(maximum, KERNEL(load)(v + i));
        if (rest) maximum = __builtin_elementwise_max(maximum, KERNEL(load_tail)(v + whole, rest, -FLT_MAX));
        const float top = KERNEL(max)(maximum);
        vf16 sum = SPLAT(0);
        for (int i = 0; i < whole; i += 16) {
            const vf16 e = KERNEL(exp)(KERNEL(load)(v + i) - top);
            KERNEL(store)(v + i, e);
            sum += e;
        }
        if (rest) {
            // The padding lanes (filled with the maximum, so e^0 = 1) are neither stored nor
            // summed: the sum reads the stored values back with zeros around them.
            const vf16 e = KERNEL(exp)(KERNEL(load_tail)(v + whole, rest, top) - top);
            KERNEL(store_tail)(v + whole, e, rest);
            sum += KERNEL(load_tail)(v + whole, rest, 0);
        }
        const float scale = 1.0f / KERNEL(sum)(sum);
        for (int i = 0; i < whole; i += 16) KERNEL(store)(v + i, KERNEL(load)(v + i) * scale);
        for (int i = whole; i < columns; i++) v[i] *= scale;
    }
}

KERNEL_ATTR static void KERNEL(layer_norm)(float *x, int rows, int width, const float *gamma, const float *beta,
                                           float epsilon) {
    const int whole = width & ~15, rest = width - whole;
    for (int row = 0; row < rows; row++) {
        float *v = x + (size_t)row * width;
        vf16 sum = SPLAT(0);
        for (int i = 0; i < whole; i += 16) sum += KERNEL(load)(v + i);
        if (rest) sum += KERNEL(load_tail)(v + whole, rest, 0);
        const float mean = KERNEL(sum)(sum) / (float)width;
        vf16 squares = SPLAT(0);
        for (int i = 0; i < whole; i += 16) {
            const vf16 d = KERNEL(load)(v + i) - mean;
            squares += d * d;
        }
        if (rest) {
            const vf16 d = KERNEL(load_tail)(v + whole, rest, mean) - mean;
            squares += d * d;
        }
        const float inverse = 1.0f / __builtin_sqrtf(KERNEL(sum)(squares) / (float)width + epsilon);
        for (int i = 0; i < whole; i += 16) {
            const vf16 y = (KERNEL(load)(v + i) - mean) * inverse * KERNEL(load)(gamma + i) + KERNEL(load)(beta + i);
            KERNEL(store)(v + i, y);
        }
        for (int i = whole; i < width; i++) v[i] = (v[i] - mean) * inverse * gamma[i] + beta[i];
    }
}

/// LINEAR_ROWS tokens × one 32-output panel per step: the accumulators stay in registers while
/// the panel's weights stream through once per step, from L1/L2 after the first.
KERNEL_ATTR static void KERNEL(linear)(const float *x, int tokens, int inputs, const float *packed_weight,
                                       const float *packed_bias, float *y, int ldy, int outputs,
                                       int first_panel, int panel_count, int accumulate) {
    for (int panel = first_panel; panel < first_panel + panel_count; panel++) {
        const float *w = packed_weight + (size_t)panel * (size_t)inputs * CAIRN_PANEL_WIDTH;
        const int column = panel * CAIRN_PANEL_WIDTH;
        const int width = outputs - column < CAIRN_PANEL_WIDTH ? outputs - column : CAIRN_PANEL_WIDTH;
        const vf16 bias0 = KERNEL(load)(packed_bias + column), bias1 = KERNEL(load)(packed_bias + column + 16);
        for (int t = 0; t < tokens; t += LINEAR_ROWS) {
            const int count = tokens - t < LINEAR_ROWS ? tokens - t : LINEAR_ROWS;
            const float *row[LINEAR_ROWS];
            vf16 low[LINEAR_ROWS], high[LINEAR_ROWS];
            _Pragma("clang loop unroll(full)")
            for (int r = 0; r < LINEAR_ROWS; r++) {
                // Rows past the last token repeat token t; their sums are computed and dropped.
                row[r] = x + (size_t)(t + (r < count ? r : 0)) * (size_t)inputs;
                low[r] = bias0;
                high[r] = bias1;
            }
            for (int i = 0; i < inputs; i++) {
                const vf16 w0 = KERNEL(load)(w + (size_t)i * CAIRN_PANEL_WIDTH);
                const vf16 w1 = KERNEL(load)(w + (size_t)i * CAIRN_PANEL_WIDTH + 16);
                _Pragma("clang loop unroll(full)")
                for (int r = 0; r < LINEAR_ROWS; r++) {
                    low[r] += w0 * row[r][i];
                    high[r] += w1 * row[r][i];
                }
            }
            for (int r = 0; r < count; r++) {
                float *out = y + (size_t)(t + r) * (size_t)ldy + column;
                if (width == CAIRN_PANEL_WIDTH) {
                    if (accumulate) {
                        low[r] += KERNEL(load)(out);
                        high[r] += KERNEL(load)(out + 16);
                    }
                    KERNEL(store)(out, low[r]);
                    KERNEL(store)(out + 16, high[r]);
                } else {
                    float lanes[CAIRN_PANEL_WIDTH];
                    KERNEL(store)(lanes, low[r]);
                    KERNEL(store)(lanes + 16, high[r]);
                    for (int j = 0; j < width; j++) out[j] = (accumulate ? out[j] : 0) + lanes[j];
                }
            }
        }
    }
}

static const cairn_encoder_kernels KERNEL(kernels) = {
    .name = KERNEL_NAME,
    .linear = KERNEL(linear),
    .gelu = KERNEL(gelu),
    .softmax_rows = KERNEL(softmax_rows),
    .layer_norm = KERNEL(layer_norm),
};

#undef INLINE
