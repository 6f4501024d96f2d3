"""W3 (claim 1 + ack 1) as plain SQL on Debian's SQLite with honker's own
schema and statements, to separate the cost of the schema from the cost of
the bindings (bench/python/run.py measures those).

    /usr/bin/python3 bench/python/w3_schema.py

Prints jobs/s for: honker's schema as is; without the per-claim
housekeeping probe; without the running-lease index (probe kept, then
dropped). Numbers are for comparison within one run only.
"""

import json
import os
import re
import sqlite3
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SQL = (ROOT / "core/src/queue/sql.rs").read_text()
SCHEMA = (ROOT / "core/src/migrations/0001_queue.sql").read_text()
N = 3000


def const(name: str) -> str:
    return re.search(rf'pub const {name}: &str = "(.*?)";', SQL, re.S).group(1)


def run(drop_running_index: bool, housekeeping: bool) -> float:
    path = os.path.join(tempfile.mkdtemp(), "w3.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(SCHEMA)
    if drop_running_index:
        conn.execute("DROP INDEX _honker_jobs_running")
    now = int(time.time() * 1000)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO _honker_jobs (queue, state, payload, priority, run_at, max_attempts,"
        " backoff_base_ms, backoff_max_ms, backoff_jitter, created_at)"
        " VALUES ('b', 'ready', ?, 0, ?, 3, 1000, 3600000, 0.5, ?)",
        [(json.dumps({"i": i}), now, now) for i in range(N)],
    )
    conn.execute("COMMIT")
    probe, claim, ack = const("HOUSEKEEPING_DUE"), const("CLAIM"), const("ACK")
    started = time.perf_counter()
    for _ in range(N):
        now = int(time.time() * 1000)
        conn.execute("BEGIN IMMEDIATE")
        if housekeeping:
            conn.execute(probe, ("b", now)).fetchone()
        job = conn.execute(claim, ("b", 1, "w", now + 60000)).fetchall()[0]
        conn.execute("COMMIT")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(ack, (job[0], "b", job[7]))
        conn.execute("COMMIT")
    conn.close()
    return N / (time.perf_counter() - started)


if __name__ == "__main__":
    print(
        f"honker schema, as is:                        {run(False, True):8.0f} jobs/s"
    )
    print(
        f"honker schema, no housekeeping probe:        {run(False, False):8.0f} jobs/s"
    )
    print(f"no running-lease index, probe kept:          {run(True, True):8.0f} jobs/s")
    print(
        f"no running-lease index, no probe:            {run(True, False):8.0f} jobs/s"
    )
