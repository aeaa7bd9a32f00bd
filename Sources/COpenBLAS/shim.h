#ifndef CAIRN_COPENBLAS_SHIM_H
#define CAIRN_COPENBLAS_SHIM_H
// Types and enums only: the functions are resolved at run time with dlsym.
#include <cblas.h>

typedef void (*cairn_sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                               const blasint, const blasint, const blasint, const float,
                               const float *, const blasint, const float *, const blasint,
                               const float, float *, const blasint);
typedef void (*cairn_sgemv_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const blasint, const blasint,
                               const float, const float *, const blasint, const float *, const blasint,
                               const float, float *, const blasint);
typedef void (*cairn_set_num_threads_fn)(int);
typedef int (*cairn_get_num_threads_fn)(void);
typedef char *(*cairn_get_corename_fn)(void);
typedef char *(*cairn_get_config_fn)(void);
#endif
