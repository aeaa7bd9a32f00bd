#ifndef CAIRN_CSQLITE_SHIM_H
#define CAIRN_CSQLITE_SHIM_H
#include <sqlite3.h>

// Swift cannot call C variadic functions, nor use SQLITE_TRANSIENT (a cast function pointer).

/// sqlite3_bind_text / _blob with SQLITE_TRANSIENT: SQLite copies the bytes before returning.
static inline int cairn_sqlite3_bind_text_transient(sqlite3_stmt *stmt, int index, const char *text, int length) {
    return sqlite3_bind_text(stmt, index, text, length, SQLITE_TRANSIENT);
}
static inline int cairn_sqlite3_bind_blob_transient(sqlite3_stmt *stmt, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(stmt, index, bytes, length, SQLITE_TRANSIENT);
}
/// sqlite3_config(SQLITE_CONFIG_MULTITHREAD): connections are not shared across threads at once.
static inline int cairn_sqlite3_config_multithread(void) {
    return sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
}
/// sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, on, 0): refuse writes that can corrupt a file.
static inline int cairn_sqlite3_db_config_defensive(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, on, (int *)0);
}
#endif
