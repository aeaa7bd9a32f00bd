#ifndef CAIRN_STREAM_VFS_H
#define CAIRN_STREAM_VFS_H

/// Registers (once; later calls return at once) the SQLite VFS "cairn-stream": the default VFS,
/// except that a main database file's reads that run in sequence are served from buffers that
/// it fills with large direct (O_DIRECT) reads, past the page cache. For one pass over a file
/// that was just written and will not be read whole again (an install's verifying pass): the
/// pass then neither waits on page-sized reads nor pushes the serving version out of the page
/// cache. Reads out of sequence, and every read where direct I/O is refused, go through the
/// default VFS. Nothing is written through the buffers: connections must be read-only, on a
/// file that does not change while they are open. Returns an SQLite result code.
int cairn_stream_vfs_register(void);

/// The VFS's name, for sqlite3_open_v2.
extern const char *const cairn_stream_vfs_name;

#endif
