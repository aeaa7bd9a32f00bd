// The "cairn-stream" VFS (stream_vfs.h): a shim over the default VFS whose read-only main
// database files keep up to three streams. A stream holds a run of 8 MiB of the file, read with
// O_DIRECT, and reads the run after it in the background (POSIX AIO) while its own is used, so
// that the scan rarely waits for the disk. A read at or just past a stream's end moves the
// stream on; two reads in sequence outside every stream start one in place of the least recently
// used. A table scan reads one stream (its leaves and their overflow pages, up to a megabyte
// apart in a VACUUMed file: each run keeps the megabyte before it), and a second table read
// beside it (the row scan's document lengths) another. Any other read, and every read once
// direct I/O is refused, is the default VFS's.
#define _GNU_SOURCE
#include "stream_vfs.h"
#include "shim_vfs.h"

#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const cairn_stream_vfs_name = "cairn-stream";

enum {
    // Bytes each buffer holds: one direct read.
    STREAM_BYTES = 8 << 20,
    // Runs read in sequence at once: a table's pages, and another table read beside it.
    STREAMS = 3,
    // Direct I/O's alignment of offsets, sizes and memory.
    ALIGNMENT = 4096,
    // How much of the file before a read a buffer also holds: a table's overflow pages may lie
    // just before the leaf that points to them.
    BEHIND = 1 << 20,
};

typedef struct Stream {
    // The run of the file held: [start, start + length).
    unsigned char *data;
    sqlite3_int64 start;
    sqlite3_int64 length;
    sqlite3_int64 used;
    // The run after it, read while this one is used (POSIX AIO) when `reading`.
    unsigned char *ahead;
    struct aiocb request;
    int reading;
} Stream;

typedef struct StreamFile {
    sqlite3_file base;
    // The default VFS's file, in the memory right after this struct.
    sqlite3_file *real;
    // The file opened with O_DIRECT, or -1: no streams.
    int direct;
    Stream streams[STREAMS];
    // Where the last read that no stream served ended: a read starting there starts a stream.
    sqlite3_int64 missEnd;
    sqlite3_int64 clock;
} StreamFile;

static sqlite3_file *real(sqlite3_file *file) { return ((StreamFile *)file)->real; }

// Whether `*buffer` holds a run's room, allocated now if it did not.
static int allocated(unsigned char **buffer) {
    if (!*buffer && posix_memalign((void **)buffer, ALIGNMENT, STREAM_BYTES) != 0) *buffer = NULL;
    return *buffer != NULL;
}

// Waits for the stream's read ahead, if any: the bytes it read, or -1.
static ssize_t finish_ahead(Stream *stream) {
    if (!stream->reading) return -1;
    const struct aiocb *list[1] = {&stream->request};
    while (aio_error(&stream->request) == EINPROGRESS) aio_suspend(list, 1, NULL);
    stream->reading = 0;
    return aio_return(&stream->request);
}

// Starts reading the run that continues the stream's (from BEHIND before its end) into its
// second buffer, unless the stream already holds the file's end.
static void start_ahead(StreamFile *file, Stream *stream) {
    if (stream->reading || stream->length < STREAM_BYTES) return;
    if (!allocated(&stream->ahead)) return;
    memset(&stream->request, 0, sizeof stream->request);
    stream->request.aio_fildes = file->direct;
    stream->request.aio_buf = stream->ahead;
    stream->request.aio_nbytes = STREAM_BYTES;
    stream->request.aio_offset = stream->start + stream->length - BEHIND;
    stream->request.aio_sigevent.sigev_notify = SIGEV_NONE;
    stream->reading = aio_read(&stream->request) == 0;
}

// Takes the stream's read ahead as its run when it holds [offset, offset + amount); whether it did.
static int take_ahead(Stream *stream, sqlite3_int64 offset, int amount) {
    if (!stream->reading) return 0;
    sqlite3_int64 start = stream->request.aio_offset;
    if (offset < start || offset + amount > start + STREAM_BYTES) return 0;
    ssize_t count = finish_ahead(stream);
    if (count < offset + amount - start) return 0;
    unsigned char *data = stream->data;
    stream->data = stream->ahead;
    stream->ahead = data;
    stream->start = start;
    stream->length = count;
    return 1;
}

// Waits for every read ahead, frees the buffers and closes the direct descriptor: no streams
// from now on.
static void release(StreamFile *file) {
    for (int i = 0; i < STREAMS; i++) {
        Stream *stream = &file->streams[i];
        finish_ahead(stream);
        free(stream->data);
        free(stream->ahead);
        stream->data = stream->ahead = NULL;
        stream->length = 0;
    }
    if (file->direct >= 0) close(file->direct);
    file->direct = -1;
}

// Fills `stream` with the run of the file that holds [offset, offset + amount); whether it does.
static int fill(StreamFile *file, Stream *stream, sqlite3_int64 offset, int amount) {
    if (!allocated(&stream->data)) return 0;
    sqlite3_int64 start = offset & ~(sqlite3_int64)(ALIGNMENT - 1);
    start = start > BEHIND ? start - BEHIND : 0;
    ssize_t count;
    do {
        count = pread(file->direct, stream->data, STREAM_BYTES, start);
    } while (count < 0 && errno == EINTR);
    if (count < 0 && errno == EINVAL) {
        // The file system takes O_DIRECT but not this read: no streams for this file.
        release(file);
        return 0;
    }
    if (count < offset + amount - start) {
        stream->length = 0;
        return 0;
    }
    stream->start = start;
    stream->length = count;
    return 1;
}

static int stream_read(sqlite3_file *handle, void *buffer, int amount, sqlite3_int64 offset) {
    StreamFile *file = (StreamFile *)handle;
    if (file->direct >= 0 && amount <= STREAM_BYTES / 2) {
        Stream *next = NULL, *oldest = &file->streams[0];
        for (int i = 0; i < STREAMS; i++) {
            Stream *stream = &file->streams[i];
            sqlite3_int64 end = stream->start + stream->length;
            if (stream->length > 0 && offset >= stream->start && offset + amount <= end) {
                memcpy(buffer, stream->data + (offset - stream->start), amount);
                stream->used = ++file->clock;
                return SQLITE_OK;
            }
            // A read at or a little past a stream's end continues it.
            if (stream->length > 0 && offset >= end - amount && offset < end + STREAM_BYTES) next = stream;
            if (stream->used < oldest->used) oldest = stream;
        }
        // A second read in sequence outside every stream starts one, in place of the oldest.
        if (!next && offset == file->missEnd) next = oldest;
        // Its read ahead when that holds the read, else a fill (once the read ahead is done
        // with the second buffer); then the next run is read ahead.
        int ready = 0;
        if (next && !(ready = take_ahead(next, offset, amount))) {
            finish_ahead(next);
            ready = fill(file, next, offset, amount);
        }
        if (ready) {
            start_ahead(file, next);
            memcpy(buffer, next->data + (offset - next->start), amount);
            next->used = ++file->clock;
            return SQLITE_OK;
        }
    }
    file->missEnd = offset + amount;
    return file->real->pMethods->xRead(file->real, buffer, amount, offset);
}

static int stream_close(sqlite3_file *handle) {
    StreamFile *file = (StreamFile *)handle;
    release(file);
    return file->real->pMethods ? file->real->pMethods->xClose(file->real) : SQLITE_OK;
}

// Everything else is the default VFS's file's own. No mapping (xFetch gives none): every read
// comes through xRead.
static int stream_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) { return real(f)->pMethods->xWrite(real(f), b, n, o); }
static int stream_truncate(sqlite3_file *f, sqlite3_int64 size) { return real(f)->pMethods->xTruncate(real(f), size); }
static int stream_sync(sqlite3_file *f, int flags) { return real(f)->pMethods->xSync(real(f), flags); }
static int stream_file_size(sqlite3_file *f, sqlite3_int64 *size) { return real(f)->pMethods->xFileSize(real(f), size); }
static int stream_lock(sqlite3_file *f, int lock) { return real(f)->pMethods->xLock(real(f), lock); }
static int stream_unlock(sqlite3_file *f, int lock) { return real(f)->pMethods->xUnlock(real(f), lock); }
static int stream_check_reserved(sqlite3_file *f, int *out) { return real(f)->pMethods->xCheckReservedLock(real(f), out); }
static int stream_file_control(sqlite3_file *f, int op, void *arg) { return real(f)->pMethods->xFileControl(real(f), op, arg); }
static int stream_sector_size(sqlite3_file *f) { return real(f)->pMethods->xSectorSize(real(f)); }
static int stream_device(sqlite3_file *f) { return real(f)->pMethods->xDeviceCharacteristics(real(f)); }
static int stream_shm_map(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    return real(f)->pMethods->xShmMap(real(f), region, size, extend, out);
}
static int stream_shm_lock(sqlite3_file *f, int offset, int n, int flags) { return real(f)->pMethods->xShmLock(real(f), offset, n, flags); }
static void stream_shm_barrier(sqlite3_file *f) { real(f)->pMethods->xShmBarrier(real(f)); }
static int stream_shm_unmap(sqlite3_file *f, int delete) { return real(f)->pMethods->xShmUnmap(real(f), delete); }
static int stream_fetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **out) {
    (void)f, (void)offset, (void)amount;
    *out = NULL;
    return SQLITE_OK;
}
static int stream_unfetch(sqlite3_file *f, sqlite3_int64 offset, void *pointer) {
    (void)f, (void)offset, (void)pointer;
    return SQLITE_OK;
}

static const sqlite3_io_methods stream_methods = {
    3, stream_close, stream_read, stream_write, stream_truncate, stream_sync, stream_file_size, stream_lock,
    stream_unlock, stream_check_reserved, stream_file_control, stream_sector_size, stream_device, stream_shm_map,
    stream_shm_lock, stream_shm_barrier, stream_shm_unmap, stream_fetch, stream_unfetch,
};

static int stream_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *handle, int flags, int *outFlags) {
    StreamFile *file = (StreamFile *)handle;
    memset(file, 0, sizeof *file);
    file->real = (sqlite3_file *)&file[1];
    file->missEnd = -1;
    // Opened first, and kept only if the name still leads to the same file once the default VFS
    // has opened it: both then read one file.
    file->direct = name && (flags & SQLITE_OPEN_MAIN_DB) && (flags & SQLITE_OPEN_READONLY)
        ? open(name, O_RDONLY | O_DIRECT | O_CLOEXEC) : -1;
    int rc = shim_base(vfs)->xOpen(shim_base(vfs), name, file->real, flags, outFlags);
    if (rc != SQLITE_OK) {
        if (file->real->pMethods) file->real->pMethods->xClose(file->real);
        if (file->direct >= 0) close(file->direct);
        return rc;
    }
    struct stat named, opened;
    if (file->direct >= 0 && (stat(name, &named) != 0 || fstat(file->direct, &opened) != 0
                              || named.st_dev != opened.st_dev || named.st_ino != opened.st_ino)) {
        close(file->direct);
        file->direct = -1;
    }
    file->base.pMethods = &stream_methods;
    return SQLITE_OK;
}

static sqlite3_vfs stream_vfs;
static int registered = SQLITE_ERROR;

static void register_once(void) {
    sqlite3_vfs *base = sqlite3_vfs_find(NULL);
    if (!base || base->iVersion < 2) return;
    stream_vfs = shim_vfs(base, cairn_stream_vfs_name, (int)sizeof(StreamFile) + base->szOsFile, stream_open, NULL);
    registered = sqlite3_vfs_register(&stream_vfs, 0);
}

int cairn_stream_vfs_register(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_once);
    return registered;
}
