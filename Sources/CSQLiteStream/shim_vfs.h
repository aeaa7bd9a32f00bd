// A VFS that is the default VFS but for the calls a shim replaces (its xOpen, and for some its
// xFullPathname): the shared part of the "cairn-stream" and "cairn-pinned" VFSs. The default VFS
// is the shim's pAppData, and every call passed on is made with it (its own calls may read their
// `pAppData`).
#ifndef CAIRN_SHIM_VFS_H
#define CAIRN_SHIM_VFS_H

#include <sqlite3.h>

static inline sqlite3_vfs *shim_base(sqlite3_vfs *vfs) { return (sqlite3_vfs *)vfs->pAppData; }

static int shim_delete(sqlite3_vfs *v, const char *n, int sync) { return shim_base(v)->xDelete(shim_base(v), n, sync); }
static int shim_access(sqlite3_vfs *v, const char *n, int flags, int *out) { return shim_base(v)->xAccess(shim_base(v), n, flags, out); }
static int shim_full_pathname(sqlite3_vfs *v, const char *n, int size, char *out) {
    return shim_base(v)->xFullPathname(shim_base(v), n, size, out);
}
static void *shim_dl_open(sqlite3_vfs *v, const char *n) { return shim_base(v)->xDlOpen(shim_base(v), n); }
static void shim_dl_error(sqlite3_vfs *v, int size, char *out) { shim_base(v)->xDlError(shim_base(v), size, out); }
static void (*shim_dl_sym(sqlite3_vfs *v, void *h, const char *s))(void) { return shim_base(v)->xDlSym(shim_base(v), h, s); }
static void shim_dl_close(sqlite3_vfs *v, void *h) { shim_base(v)->xDlClose(shim_base(v), h); }
static int shim_randomness(sqlite3_vfs *v, int size, char *out) { return shim_base(v)->xRandomness(shim_base(v), size, out); }
static int shim_sleep(sqlite3_vfs *v, int micros) { return shim_base(v)->xSleep(shim_base(v), micros); }
static int shim_current_time(sqlite3_vfs *v, double *out) { return shim_base(v)->xCurrentTime(shim_base(v), out); }
static int shim_last_error(sqlite3_vfs *v, int size, char *out) { return shim_base(v)->xGetLastError(shim_base(v), size, out); }
static int shim_current_time64(sqlite3_vfs *v, sqlite3_int64 *out) { return shim_base(v)->xCurrentTimeInt64(shim_base(v), out); }

/// The shim named `name` over `base`, with files of `size` bytes opened by `open`; nil
/// `full_pathname` keeps the default VFS's.
static inline sqlite3_vfs shim_vfs(sqlite3_vfs *base, const char *name, int size,
                                   int (*open)(sqlite3_vfs *, const char *, sqlite3_file *, int, int *),
                                   int (*full_pathname)(sqlite3_vfs *, const char *, int, char *)) {
    return (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = size,
        .mxPathname = base->mxPathname,
        .zName = name,
        .pAppData = base,
        .xOpen = open,
        .xDelete = shim_delete,
        .xAccess = shim_access,
        .xFullPathname = full_pathname ? full_pathname : shim_full_pathname,
        .xDlOpen = shim_dl_open,
        .xDlError = shim_dl_error,
        .xDlSym = shim_dl_sym,
        .xDlClose = shim_dl_close,
        .xRandomness = shim_randomness,
        .xSleep = shim_sleep,
        .xCurrentTime = shim_current_time,
        .xGetLastError = shim_last_error,
        .xCurrentTimeInt64 = shim_current_time64,
    };
}

#endif
