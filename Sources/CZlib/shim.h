#ifndef CAIRN_CZLIB_SHIM_H
#define CAIRN_CZLIB_SHIM_H
#include <zlib.h>

// deflateInit / inflateInit are macros over the *_ functions that Swift cannot see.
static inline int cairn_deflateInit(z_streamp stream, int level) {
    return deflateInit(stream, level);
}
static inline int cairn_inflateInit(z_streamp stream) {
    return inflateInit(stream);
}
#endif
