"""The wheel ships the SQLite extension: honker.load_extension(conn) gives
a stdlib sqlite3 connection the same honker_* functions (docs/sql.md)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import honker


def stdlib(path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    honker.load_extension(conn)
    return conn


def test_the_extension_is_in_the_package():
    p = honker.extension_path()
    assert os.path.dirname(p) == os.path.dirname(honker.__file__)
    assert os.path.getsize(p) > 0


def test_stdlib_outbox_commits_and_rolls_back_with_the_business_row(tmp_path):
    path = tmp_path / "stdlib.db"
    conn = stdlib(path)
    conn.execute("SELECT honker_bootstrap()")
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT)")
    enqueue = "SELECT honker_enqueue('emails', ?, NULL, NULL, 0, 3, NULL)"
    conn.execute("BEGIN")
    conn.execute("INSERT INTO orders (status) VALUES ('rolled back')")
    conn.execute(enqueue, [json.dumps({"order": 1})])
    conn.execute("ROLLBACK")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO orders (status) VALUES ('paid')")
    conn.execute(enqueue, [json.dumps({"order": 2})])
    conn.execute("COMMIT")
    conn.close()

    # The Python API, in another process, claims what SQL enqueued.
    script = (
        "import honker, sys; q = honker.open(sys.argv[1]).queue('emails'); "
        "jobs = q.claim_batch('py', 10); print([j.payload for j in jobs]); "
        "[j.ack() for j in jobs]"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[{'order': 2}]"
