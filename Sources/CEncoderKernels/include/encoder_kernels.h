#ifndef CAIRN_ENCODER_KERNELS_H
#define CAIRN_ENCODER_KERNELS_H
// The encoder's own kernels: a linear layer on weights packed once for short sequences (where
// OpenBLAS spends most of a call re-packing the weights), and the element-wise steps (GELU,
// softmax, LayerNorm). Each exists compiled for AVX-512, for AVX2 + FMA and for the baseline
// instruction set; `cairn_encoder_kernels_for` hands out the set that this CPU can run.

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Outputs per panel of the packed weight layout.
#define CAIRN_PANEL_WIDTH 32

/// Floats of a packed (outputs × inputs) weight matrix: `panels(outputs) · inputs · 32`.
size_t cairn_packed_weight_count(int outputs, int inputs);
/// Floats of a packed bias: the outputs rounded up to whole panels.
size_t cairn_packed_bias_count(int outputs);
/// Packs `weight` (outputs × inputs, row-major) and `bias` (outputs): panel p holds, for each
/// input i, the weights of outputs 32p … 32p + 31 side by side; the last panel and the bias are
/// padded with zeros.
void cairn_pack_linear(const float *weight, const float *bias, int outputs, int inputs,
                       float *packed_weight, float *packed_bias);

typedef struct cairn_encoder_kernels {
    /// "avx512", "avx2" or "baseline".
    const char *name;
    /// For the panels [first_panel, first_panel + panel_count):
    /// y[t][o] = (accumulate ? y[t][o] : 0) + bias[o] + Σᵢ x[t][i] · W[o][i], for t < tokens,
    /// with x (tokens × inputs, row stride inputs) and y (row stride ldy, `outputs` columns).
    void (*linear)(const float *x, int tokens, int inputs, const float *packed_weight,
                   const float *packed_bias, float *y, int ldy, int outputs,
                   int first_panel, int panel_count, int accumulate);
    /// x ← x · ½(1 + erf(x/√2)), the exact GELU of BERT, for `count` floats.
    void (*gelu)(float *x, size_t count);
    /// Softmax of each of `rows` rows of `columns` floats (row stride `stride`), in place.
    void (*softmax_rows)(float *x, int rows, int columns, int stride);
    /// Each of `rows` rows of `width` floats ← (x − mean)/√(var + epsilon) · gamma + beta.
    void (*layer_norm)(float *x, int rows, int width, const float *gamma, const float *beta, float epsilon);
} cairn_encoder_kernels;

enum {
    CAIRN_KERNELS_BEST = 0,
    CAIRN_KERNELS_BASELINE = 1,
    CAIRN_KERNELS_AVX2 = 2,
    CAIRN_KERNELS_AVX512 = 3,
};

/// The kernels for `isa` (one of the constants above), or NULL when this CPU cannot run them.
/// CAIRN_KERNELS_BEST is the widest this CPU supports.
const cairn_encoder_kernels *cairn_encoder_kernels_for(int isa);

#ifdef __cplusplus
}
#endif
#endif
