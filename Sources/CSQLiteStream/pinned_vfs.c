// The "cairn-pinned" VFS (pinned_vfs.h). SQLite's default VFS resolves symbolic links in a
// database's name and opens the result with O_NOFOLLOW, so /proc/self/fd/N, a link, would open
// whatever file the descriptor's original path names now, or fail. This VFS opens such a name
// as a duplicate of descriptor N and reads it with pread: a read-only, immutable main database
// (no locks, no journal; SQLITE_IOCAP_IMMUTABLE). Every other name, and every other call, is the
// default VFS's (shim_vfs.h).
#define _GNU_SOURCE
#include "pinned_vfs.h"
#include "shim_vfs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const cairn_pinned_vfs_name = "cairn-pinned";

static const char descriptors[] = "/proc/self/fd/";
static sqlite3_vfs pinned_vfs;
static int registered = SQLITE_ERROR;

typedef struct PinnedFile {
    sqlite3_file base;
    int fd;
} PinnedFile;

// The descriptor number a /proc/self/fd/N name gives, or -1 for any other name.
static int descriptor_of(const char *name) {
    if (!name || strncmp(name, descriptors, sizeof descriptors - 1) != 0) return -1;
    const char *digits = name + sizeof descriptors - 1;
    if (*digits < '0' || *digits > '9') return -1;
    char *end = NULL;
    errno = 0;
    long number = strtol(digits, &end, 10);
    if (errno != 0 || end == digits || *end != '\0' || number < 0 || number > 1 << 30) return -1;
    return (int)number;
}

static int pinned_close(sqlite3_file *file) {
    close(((PinnedFile *)file)->fd);
    return SQLITE_OK;
}

static int pinned_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    int fd = ((PinnedFile *)file)->fd;
    unsigned char *out = buffer;
    int got = 0;
    while (got < amount) {
        ssize_t n = pread(fd, out + got, (size_t)(amount - got), (off_t)(offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return SQLITE_IOERR_READ;
        if (n == 0) break;
        got += (int)n;
    }
    if (got < amount) {
        // SQLite expects the rest zeroed on a short read.
        memset(out + got, 0, (size_t)(amount - got));
        return SQLITE_IOERR_SHORT_READ;
    }
    return SQLITE_OK;
}

static int pinned_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) { (void)f; (void)b; (void)n; (void)o; return SQLITE_READONLY; }
static int pinned_truncate(sqlite3_file *f, sqlite3_int64 size) { (void)f; (void)size; return SQLITE_READONLY; }
static int pinned_sync(sqlite3_file *f, int flags) { (void)f; (void)flags; return SQLITE_OK; }

static int pinned_file_size(sqlite3_file *file, sqlite3_int64 *size) {
    struct stat info;
    if (fstat(((PinnedFile *)file)->fd, &info) != 0) return SQLITE_IOERR_FSTAT;
    *size = info.st_size;
    return SQLITE_OK;
}

static int pinned_lock(sqlite3_file *f, int lock) { (void)f; (void)lock; return SQLITE_OK; }
static int pinned_unlock(sqlite3_file *f, int lock) { (void)f; (void)lock; return SQLITE_OK; }
static int pinned_check_reserved(sqlite3_file *f, int *out) { (void)f; *out = 0; return SQLITE_OK; }
static int pinned_file_control(sqlite3_file *f, int op, void *arg) { (void)f; (void)op; (void)arg; return SQLITE_NOTFOUND; }
static int pinned_sector_size(sqlite3_file *f) { (void)f; return 4096; }
static int pinned_device(sqlite3_file *f) { (void)f; return SQLITE_IOCAP_IMMUTABLE; }

static const sqlite3_io_methods pinned_methods = {
    .iVersion = 1,
    .xClose = pinned_close,
    .xRead = pinned_read,
    .xWrite = pinned_write,
    .xTruncate = pinned_truncate,
    .xSync = pinned_sync,
    .xFileSize = pinned_file_size,
    .xLock = pinned_lock,
    .xUnlock = pinned_unlock,
    .xCheckReservedLock = pinned_check_reserved,
    .xFileControl = pinned_file_control,
    .xSectorSize = pinned_sector_size,
    .xDeviceCharacteristics = pinned_device,
};

static int pinned_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *handle, int flags, int *outFlags) {
    int fd = descriptor_of(name);
    if (fd < 0) return shim_base(vfs)->xOpen(shim_base(vfs), name, handle, flags, outFlags);
    handle->pMethods = NULL;
    // Only a read-only main database: anything else would need the default VFS's journal and locks.
    if (!(flags & SQLITE_OPEN_MAIN_DB) || (flags & (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE))) return SQLITE_CANTOPEN;
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) return SQLITE_CANTOPEN;
    PinnedFile *file = (PinnedFile *)handle;
    file->fd = own;
    file->base.pMethods = &pinned_methods;
    if (outFlags) *outFlags = SQLITE_OPEN_READONLY;
    return SQLITE_OK;
}

// The name as it is: resolving the link would name the descriptor's original path.
static int pinned_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    if (descriptor_of(name) >= 0) {
        size_t length = strlen(name);
        if (size < 0 || length >= (size_t)size) return SQLITE_CANTOPEN;
        memcpy(out, name, length + 1);
        return SQLITE_OK;
    }
    return shim_base(vfs)->xFullPathname(shim_base(vfs), name, size, out);
}

static void register_once(void) {
    sqlite3_vfs *base = sqlite3_vfs_find(NULL);
    if (!base || base->iVersion < 2) return;
    int size = base->szOsFile > (int)sizeof(PinnedFile) ? base->szOsFile : (int)sizeof(PinnedFile);
    pinned_vfs = shim_vfs(base, cairn_pinned_vfs_name, size, pinned_open, pinned_full_pathname);
    registered = sqlite3_vfs_register(&pinned_vfs, 0);
}

int cairn_pinned_vfs_register(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_once);
    return registered;
}
