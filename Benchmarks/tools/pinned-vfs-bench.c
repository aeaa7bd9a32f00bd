// A/B of the query path's reads (Benchmarks/tools/pinned-vfs builds and runs it): SQLite's default
// VFS by path against cairn-pinned on /proc/self/fd/N, both immutable and read only, on one file in
// the page cache, in alternated rounds.
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
int cairn_pinned_vfs_register(void);
extern const char *const cairn_pinned_vfs_name;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static char queries[400][256]; static int nq;  // the first 400 lines of the queries file
static double run(const char *name, const char *vfs) {
    sqlite3 *db; 
    if (sqlite3_open_v2(name, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, vfs) != SQLITE_OK) { fprintf(stderr, "open %s\n", sqlite3_errmsg(db)); exit(1); }
    sqlite3_stmt *q, *get;
    sqlite3_prepare_v2(db, "SELECT rowid FROM fts WHERE fts MATCH ?1 ORDER BY bm25(fts) LIMIT 10", -1, &q, 0);
    sqlite3_prepare_v2(db, "SELECT length(content) FROM chunks WHERE id = ?1", -1, &get, 0);
    double start = now(); long sum = 0;
    for (int i = 0; i < nq; i++) {
        sqlite3_bind_text(q, 1, queries[i], -1, SQLITE_STATIC);
        while (sqlite3_step(q) == SQLITE_ROW) {
            sqlite3_bind_int64(get, 1, sqlite3_column_int64(q, 0));
            if (sqlite3_step(get) == SQLITE_ROW) sum += sqlite3_column_int(get, 0);
            sqlite3_reset(get);
        }
        sqlite3_reset(q);
    }
    // Point reads across the file (a fused query's rescoring: lookups by rowid).
    srand(7);
    for (int i = 0; i < 20000; i++) {
        sqlite3_bind_int64(get, 1, 1 + rand() % 101850);
        if (sqlite3_step(get) == SQLITE_ROW) sum += sqlite3_column_int(get, 0);
        sqlite3_reset(get);
    }
    double elapsed = now() - start;
    sqlite3_finalize(q); sqlite3_finalize(get); sqlite3_close(db);
    if (sum == 0) fprintf(stderr, "nothing read\n");
    return elapsed;
}
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    FILE *f = fopen(argv[2], "r");
    while (nq < 400 && fgets(queries[nq], 256, f)) { queries[nq][strcspn(queries[nq], "\n")] = 0; nq++; }
    char byPath[512], byFd[512];
    snprintf(byPath, sizeof byPath, "file:%s?immutable=1", argv[1]);
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    snprintf(byFd, sizeof byFd, "file:/proc/self/fd/%d?immutable=1", fd);
    cairn_pinned_vfs_register();
    run(byPath, NULL); run(byFd, cairn_pinned_vfs_name);  // warm
    enum { ROUNDS = 11 };
    double a[ROUNDS], b[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) { a[r] = run(byPath, NULL); b[r] = run(byFd, cairn_pinned_vfs_name); }
    qsort(a, ROUNDS, sizeof(double), cmp); qsort(b, ROUNDS, sizeof(double), cmp);
    printf("%d FTS queries (top 10, each row read) + 20,000 rowid reads, median of %d alternated rounds:\n", nq, ROUNDS);
    printf("  default VFS, by path:        %.1f ms (min %.1f, max %.1f)\n", a[ROUNDS/2]*1e3, a[0]*1e3, a[ROUNDS-1]*1e3);
    printf("  cairn-pinned, /proc/self/fd: %.1f ms (min %.1f, max %.1f)\n", b[ROUNDS/2]*1e3, b[0]*1e3, b[ROUNDS-1]*1e3);
    printf("  ratio pinned / default: %.3f\n", b[ROUNDS/2] / a[ROUNDS/2]);
    return 0;
}
