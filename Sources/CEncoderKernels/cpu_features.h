#ifndef CAIRN_CPU_FEATURES_H
#define CAIRN_CPU_FEATURES_H
// Which of the kernels' instruction sets this CPU runs (internal to CEncoderKernels). Both
// kernel files choose with these, so the encoder and the dense scan agree on the machine.

#if defined(__x86_64__)
/// AVX-512 (F, DQ, BW, VL) with FMA; __builtin_cpu_supports also checks that the OS saves the
/// wide registers (XCR0).
static inline int cairn_cpu_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw")
        && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

/// AVX-512 F with the population count of 64-bit lanes (VPOPCNTDQ): the sign bits' Hamming pass.
static inline int cairn_cpu_avx512_popcount(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq");
}

/// AVX2 with FMA.
static inline int cairn_cpu_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif
#endif
