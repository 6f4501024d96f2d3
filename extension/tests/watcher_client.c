/* watcher_client: a client of Honker's watcher C ABI, written as Honker's
 * non-Rust bindings (Go, Bun, .NET, C++) use it: load libhonker_ext into a
 * connection, look the watcher symbols up in the same library, open_v2 on
 * the database file, wait with a timeout, close.
 *
 *   watcher_client EXT DB before      the ABI before the extension is loaded
 *                                     into any connection: open gives NULL
 *                                     and a message, never a crash
 *   watcher_client EXT DB wake        a wait ends at its timeout (0), then a
 *                                     commit by another process wakes it (1)
 *   watcher_client EXT DB bench N     N commits by another process; prints
 *                                     the wake latency of the watcher and of
 *                                     a busy-polling reader (the floor)
 *
 * Output: one "key value..." line per fact. Built by core/tests/extension.rs
 * and bench/watcher-abi.sh with the system's libsqlite3.so.0. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sqlite3.h"

typedef void *(*open_v2_fn)(const char *, const char *, uint64_t, char *, size_t);
typedef int (*wait_fn)(void *, uint64_t);
typedef void (*close_fn)(void *);

static open_v2_fn w_open;
static wait_fn w_wait;
static close_fn w_close;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "watcher_client: %s: %s\n", what, detail ? detail : "");
    exit(1);
}

static void symbols(const char *ext) {
    char path[4096];
    snprintf(path, sizeof path, "%s.so", ext);
    void *lib = dlopen(path, RTLD_NOW);
    if (!lib) die("dlopen", dlerror());
    w_open = (open_v2_fn)dlsym(lib, "honker_watcher_open_v2");
    w_wait = (wait_fn)dlsym(lib, "honker_watcher_wait");
    w_close = (close_fn)dlsym(lib, "honker_watcher_close");
    if (!w_open || !w_wait || !w_close || !dlsym(lib, "honker_watcher_open"))
        die("dlsym", "a watcher symbol is missing");
}

static sqlite3 *connect(const char *db, const char *ext) {
    sqlite3 *c;
    char *err = 0;
    if (sqlite3_open(db, &c) != SQLITE_OK) die("open", sqlite3_errmsg(c));
    sqlite3_busy_timeout(c, 5000);
    if (ext) {
        sqlite3_enable_load_extension(c, 1);
        if (sqlite3_load_extension(c, ext, 0, &err) != SQLITE_OK) die("load", err);
    }
    if (sqlite3_exec(c, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                           "CREATE TABLE IF NOT EXISTS t (x REAL)", 0, 0, &err))
        die("exec", err);
    return c;
}

/* A child process that commits one row each time it reads a byte from `go`,
 * after `delay_us`, writing the commit's start time (ms) to `done`; it ends
 * when `go` is closed. */
static pid_t committer(const char *db, int go[2], int done_[2], int delay_us) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    close(go[1]);
    close(done_[0]);
    int done = done_[1];
    sqlite3 *c = 0;
    char b;
    /* Opened at the first request: the parent creates the file first. */
    while (read(go[0], &b, 1) == 1) {
        if (!c) c = connect(db, NULL);
        usleep(delay_us);
        double t = now_ms();
        char sql[64];
        snprintf(sql, sizeof sql, "INSERT INTO t VALUES (%f)", t);
        if (sqlite3_exec(c, sql, 0, 0, 0) != SQLITE_OK) _exit(3);
        if (write(done, &t, sizeof t) != sizeof t) _exit(4);
    }
    if (c) sqlite3_close(c);
    _exit(0);
}

/* Threads of this process named honker-watcher (the extension's). */
static int watcher_threads(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f) && !strncmp(comm, "honker-watcher", 14)) n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

static int rows(sqlite3 *c) {
    sqlite3_stmt *s;
    sqlite3_prepare_v2(c, "SELECT count(*) FROM t", -1, &s, 0);
    sqlite3_step(s);
    int n = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return n;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *name, double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    printf("%s p50_ms %.3f p99_ms %.3f max_ms %.3f n %d\n", name, v[n / 2], v[(n * 99) / 100],
           v[n - 1], n);
}

int main(int argc, char **argv) {
    if (argc < 4) die("usage", "watcher_client EXT DB before|wake|bench [N]");
    const char *ext = argv[1], *db = argv[2], *mode = argv[3];
    setvbuf(stdout, NULL, _IOLBF, 0);
    char err[256] = "";
    if (!strcmp(mode, "before")) {
        sqlite3 *c;
        if (sqlite3_open(db, &c) != SQLITE_OK) die("open", sqlite3_errmsg(c));
        symbols(ext);
        void *h = w_open(db, "", 1, err, sizeof err);
        printf("open %s\nerror %s\n", h ? "handle" : "NULL", err);
        printf("wait_null %d\n", w_wait(NULL, 10));
        w_close(NULL);
        return 0;
    }
    /* The committing process first, before this one has any SQLite state or
     * threads (the watcher's) that a fork would copy half-way. */
    int go[2], done[2];
    if (pipe(go) || pipe(done)) die("pipe", "");
    int bench = !strcmp(mode, "bench");
    pid_t pid = committer(db, go, done, bench ? 2000 : 500000);
    close(go[0]);
    close(done[1]);
    sqlite3 *c = connect(db, ext);
    symbols(ext);
    if (w_open(db, "bogus", 1, err, sizeof err)) die("open", "an unknown backend was accepted");
    printf("bad_backend %s\n", err);
    if (w_open(db, "", 0, err, sizeof err)) die("open", "a poll interval of 0 was accepted");
    printf("bad_poll %s\n", err);
    void *h = w_open(db, "", 1, err, sizeof err);
    if (!h) die("open_v2", err);
    if (!strcmp(mode, "wake")) {
        /* A SQL watcher on the same file shares the process's one watcher. */
        char sql[4200];
        snprintf(sql, sizeof sql, "SELECT honker_update_watcher_open('%s', NULL)", db);
        if (sqlite3_exec(c, sql, 0, 0, 0) != SQLITE_OK) die("sql watcher", sqlite3_errmsg(c));
        /* (A new thread takes its name as it starts: give it a moment.) */
        int threads = 0;
        for (int i = 0; i < 100 && watcher_threads() == 0; i++) usleep(10000);
        usleep(100000);
        threads = watcher_threads();
        printf("watcher_threads %d\n", threads);
        double t0 = now_ms();
        int r = w_wait(h, 300);
        printf("timeout %d after_ms %.0f\n", r, now_ms() - t0);
        t0 = now_ms();
        if (write(go[1], "x", 1) != 1) die("write", "");
        r = w_wait(h, 10000);
        double woke = now_ms(), committed;
        if (read(done[0], &committed, sizeof committed) != sizeof committed) die("read", "");
        printf("woke %d after_ms %.0f since_commit_ms %.3f rows %d\n", r, woke - t0,
               woke - committed, rows(c));
        close(go[1]);
        waitpid(pid, 0, 0);
        w_close(h);
        return 0;
    }
    if (bench) {
        int n = argc > 4 ? atoi(argv[4]) : 200;
        double *lat = calloc(n, sizeof *lat), *floor = calloc(n, sizeof *floor);
        int seen = rows(c);
        for (int i = 0; i < 2 * n; i++) {
            if (write(go[1], "x", 1) != 1) die("write", "");
            double woke;
            if (i < n) {
                /* The watcher: wait until the row is there (a wake is a hint). */
                do {
                    if (w_wait(h, 5000) != 1) die("wait", "no wake within 5 s");
                    woke = now_ms();
                } while (rows(c) <= seen);
            } else {
                /* The floor: a reader spinning on PRAGMA data_version. */
                sqlite3_stmt *s;
                sqlite3_prepare_v2(c, "PRAGMA data_version", -1, &s, 0);
                sqlite3_step(s);
                int v = sqlite3_column_int(s, 0), w;
                do {
                    sqlite3_reset(s);
                    sqlite3_step(s);
                    w = sqlite3_column_int(s, 0);
                } while (w == v);
                woke = now_ms();
                sqlite3_finalize(s);
                w_wait(h, 0); /* drop the wake this commit left */
            }
            double committed;
            if (read(done[0], &committed, sizeof committed) != sizeof committed) die("read", "");
            seen = rows(c);
            (i < n ? lat : floor)[i % n] = woke - committed;
        }
        close(go[1]);
        waitpid(pid, 0, 0);
        report("watcher", lat, n);
        report("spin_floor", floor, n);
        w_close(h);
        return 0;
    }
    die("mode", mode);
}
