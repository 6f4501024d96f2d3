"""honker's SQLite and the stdlib ``sqlite3`` module's (another library) on one
file in one process: the natural layout of a web app with an ORM and honker
(issue 15 §1, ADR 13). Each scenario runs 50 times; another process then
checks every file: every row and job present, ``integrity_check`` ok."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import honker
import pytest

RUNS = 50
THREADS = 3
ROWS = 500

CHECK = """
import json, sqlite3, sys
out = []
for path in json.loads(sys.argv[1]):
    conn = sqlite3.connect(path)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM orders").fetchone()[0]
        jobs = conn.execute("SELECT count(*) FROM _honker_jobs").fetchone()[0]
        out.append([integrity, rows, jobs])
    except sqlite3.DatabaseError as e:
        out.append([str(e), -1, -1])
    conn.close()
print(json.dumps(out))
"""


def seen_by_another_process(paths: list[Path]) -> list[list]:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps([str(p) for p in paths])],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def stdlib(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, t INTEGER, n INTEGER)")
    return conn


def concurrent_writers(path: Path, stdlib_first: bool) -> None:
    """The issue's reproduction: a stdlib connection open before (or after)
    ``honker.open``; three threads each open a stdlib connection, commit 500
    rows one by one and close it, while three threads enqueue 500 jobs."""
    holder = stdlib(path) if stdlib_first else None
    db = honker.open(path)
    if holder is None:
        holder = stdlib(path)
    q = db.queue("work")
    errors: list[BaseException] = []

    def inserts(t: int) -> None:
        try:
            conn = sqlite3.connect(path, timeout=30, isolation_level=None)
            for n in range(ROWS):
                conn.execute("INSERT INTO orders (t, n) VALUES (?, ?)", (t, n))
            conn.close()
        except BaseException as e:  # reported below
            errors.append(e)

    def enqueues(t: int) -> None:
        try:
            for n in range(ROWS):
                q.enqueue({"t": t, "n": n})
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [
        threading.Thread(target=f, args=(t,)) for t in range(THREADS) for f in (inserts, enqueues)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    db.close()
    holder.close()
    assert errors == []


@pytest.mark.parametrize(
    "stdlib_first", [True, False], ids=["stdlib-opened-first", "honker-opened-first"]
)
def test_concurrent_writers_of_both_libraries_lose_nothing(tmp_path, stdlib_first):
    paths = [tmp_path / f"app{i}.db" for i in range(RUNS)]
    for p in paths:
        concurrent_writers(p, stdlib_first)
    expected = [["ok", THREADS * ROWS, THREADS * ROWS]] * RUNS
    assert seen_by_another_process(paths) == expected


HELPER = """
import sqlite3, sys
for line in sys.stdin:
    conn = sqlite3.connect(line.strip(), timeout=30, isolation_level=None)
    for n in range(3):
        conn.execute("INSERT INTO orders (t, n) VALUES (2, ?)", (n,))
    seen = conn.execute("SELECT count(*) FROM orders WHERE t = 1").fetchone()[0]
    conn.close()
    print(seen, flush=True)
"""


def test_honker_closing_beside_an_open_stdlib_connection_loses_nothing(tmp_path):
    """The quiet variant: a stdlib connection stays open while honker opens,
    enqueues and closes; its later commits must stay visible to another
    process (before ADR 13, honker's close deleted -wal/-shm under it), and its
    own close must not checkpoint over that process's rows."""
    other = subprocess.Popen(
        [sys.executable, "-c", HELPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    paths = [tmp_path / f"app{i}.db" for i in range(RUNS)]
    try:
        for p in paths:
            conn = stdlib(p)
            conn.execute("INSERT INTO orders (t, n) VALUES (0, 0)")
            db = honker.open(p)
            db.queue("work").enqueue({"file": p.name})
            db.close()
            for n in range(3):
                conn.execute("INSERT INTO orders (t, n) VALUES (1, ?)", (n,))
            other.stdin.write(f"{p}\n")
            other.stdin.flush()
            assert other.stdout.readline().strip() == "3", (
                "the other process sees the stdlib commits"
            )
            conn.close()
    finally:
        other.stdin.close()
        other.wait(timeout=30)
    assert seen_by_another_process(paths) == [["ok", 7, 1]] * RUNS


def test_the_extension_in_a_stdlib_connection_beside_honker_open(path):
    """Loading libhonker_ext into a stdlib connection on a file honker.open has
    open is safe too (two libraries, each locking as another process would):
    both enqueue at once and every job is there."""
    db = honker.open(path)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    honker.load_extension(conn)
    errors: list[BaseException] = []
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, t INTEGER, n INTEGER)")

    def sql_side() -> None:
        try:
            for n in range(ROWS):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO orders (t, n) VALUES (0, ?)", (n,))
                conn.execute(
                    "SELECT honker_enqueue('work', ?, NULL, NULL, 0, 3, NULL)", [json.dumps(n)]
                )
                conn.execute("COMMIT")
        except BaseException as e:  # reported below
            errors.append(e)

    t = threading.Thread(target=sql_side)
    t.start()
    q = db.queue("work")
    for n in range(ROWS):
        q.enqueue(n)
    t.join()
    conn.close()
    db.close()
    assert errors == []
    assert seen_by_another_process([path]) == [["ok", ROWS, 2 * ROWS]]
