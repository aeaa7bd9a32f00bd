#ifndef CAIRN_PINNED_VFS_H
#define CAIRN_PINNED_VFS_H

/// Registers (once; later calls return at once) the SQLite VFS "cairn-pinned": the default VFS,
/// except that a file name under /proc/self/fd/ is kept as it is instead of being resolved
/// through its link to the path the descriptor was opened by. A connection opened on
/// /proc/self/fd/N reads the file descriptor N holds, whatever that path names now: a served
/// snapshot whose folder an install of the same version number replaced, or that was removed.
/// Returns an SQLite result code.
int cairn_pinned_vfs_register(void);

/// The VFS's name, for sqlite3_open_v2.
extern const char *const cairn_pinned_vfs_name;

#endif
