/* musl-sql DB EXTENSION SQL...: a process linked against musl's C library
 * (built by scripts/musl-load.sh with musl-gcc, dynamically, so that musl's
 * own loader resolves the extension's needed libraries) opens DB, loads the
 * honker SQL extension built for linux-x64-musl, and runs each SQL statement,
 * printing the first column of every row. Exits 1 with SQLite's message on
 * the first error. */
#include <stdio.h>
#include "sqlite3.h"

int main(int argc, char **argv) {
    sqlite3 *db;
    char *err = NULL;
    if (argc < 3) {
        fprintf(stderr, "usage: musl-sql DB EXTENSION SQL...\n");
        return 2;
    }
    if (sqlite3_open(argv[1], &db) != SQLITE_OK) {
        fprintf(stderr, "musl-sql: open %s: %s\n", argv[1], sqlite3_errmsg(db));
        return 1;
    }
    sqlite3_enable_load_extension(db, 1);
    if (sqlite3_load_extension(db, argv[2], NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "musl-sql: load %s: %s\n", argv[2], err ? err : "?");
        return 1;
    }
    for (int i = 3; i < argc; i++) {
        sqlite3_stmt *stmt;
        if (sqlite3_prepare_v2(db, argv[i], -1, &stmt, NULL) != SQLITE_OK) {
            fprintf(stderr, "musl-sql: %s: %s\n", argv[i], sqlite3_errmsg(db));
            return 1;
        }
        int rc;
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
            const unsigned char *text = sqlite3_column_text(stmt, 0);
            printf("%s\n", text ? (const char *)text : "NULL");
        }
        if (rc != SQLITE_DONE) {
            fprintf(stderr, "musl-sql: %s: %s\n", argv[i], sqlite3_errmsg(db));
            return 1;
        }
        sqlite3_finalize(stmt);
    }
    return sqlite3_close(db) == SQLITE_OK ? 0 : 1;
}
