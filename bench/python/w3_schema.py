"""W2 and W3 as plain SQL on one SQLite library with honker's own schema and
statements, to separate the cost of the schema and of each statement form
from the cost of the bindings (bench/python/run.py measures those).

    /usr/bin/python3 bench/python/w3_schema.py [--smoke]

Python's sqlite3 module links the system SQLite; to measure another build,
point LD_LIBRARY_PATH at its libsqlite3.so.0. Prints jobs/s for each
variant; numbers compare within one run only. Nothing is asserted.
`--smoke` runs tiny counts (scripts/test.sh: the statements it reads from
core/src/queue/statements.rs must keep working); its numbers mean nothing.

Variants:
- W3 claim forms: honker's claim (PICK, then LEASE per job with a token made
  by the caller) against the single `UPDATE ... WHERE id IN (SELECT ...)
  RETURNING` it replaced, which opens ephemeral tables on every call;
- state CHECKs: schema 2's OR chains against schema 1's `state IN (...)`,
  which SQLite evaluates through an ephemeral table for every row written
  (three or more constants), for W3 and for W2 (1,000 enqueues per tx);
- the running-lease index and the per-claim housekeeping probe, each
  dropped, for W3.
"""

import itertools
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SQL = (ROOT / "core/src/queue/statements.rs").read_text()
MIGRATIONS = sorted((ROOT / "core/src/migrations").glob("*.sql"))
SMOKE = "--smoke" in sys.argv[1:]
N = 50 if SMOKE else 10_000
# The databases, removed when the interpreter exits.
SCRATCH = tempfile.TemporaryDirectory(prefix="honker-w3-")
_files = itertools.count()
W2_BATCHES = 2 if SMOKE else 50

# The claim schema 1 used, kept here to measure what replaced it.
OLD_CLAIM = """
UPDATE _honker_jobs
SET state = 'running', attempts = attempts + 1, worker_id = ?3,
    lease_token = lower(hex(randomblob(16))), lease_expires_at = ?4
WHERE id IN (
    SELECT id FROM _honker_jobs
    WHERE queue = ?1 AND state = 'ready'
    ORDER BY priority DESC, run_at, id
    LIMIT ?2)
RETURNING id, payload, attempts, max_attempts, priority, run_at, created_at,
          lease_token, lease_expires_at"""


def const(name: str) -> str:
    return re.search(rf'pub const {name}: &str = "(.*?)";', SQL, re.S).group(1)


def payload(i: int) -> str:
    # The payload of the Python and core benchmarks.
    return json.dumps({"to": f"user{i}@example.com", "template": "order-confirmed"})


def connect(in_check: bool, drop_running_index: bool = False) -> sqlite3.Connection:
    path = os.path.join(SCRATCH.name, f"bench-{next(_files)}.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    # Schema 1 has the IN checks; schema 2 only rewrites them as OR chains.
    for m in MIGRATIONS[:1] if in_check else MIGRATIONS:
        conn.executescript(m.read_text())
    if in_check:
        # The statements read and write the columns schemas 11, 13 and 14
        # added, and the pick reads the pauses from the settings schema 4
        # added (ADR 33).
        conn.execute("ALTER TABLE _honker_jobs ADD COLUMN trace_context TEXT")
        conn.execute("ALTER TABLE _honker_jobs ADD COLUMN concurrency_key TEXT")
        conn.execute("ALTER TABLE _honker_jobs ADD COLUMN turn INTEGER")
        # and the pick walks schema 14's ready index (turn after priority).
        conn.execute("DROP INDEX _honker_jobs_ready")
        conn.execute(
            "CREATE INDEX _honker_jobs_ready ON _honker_jobs"
            " (queue, priority DESC, turn, run_at, id) WHERE state = 'ready'"
        )
        conn.executescript(MIGRATIONS[3].read_text())
    if drop_running_index:
        conn.execute("DROP INDEX _honker_jobs_running")
    return conn


def fill(conn: sqlite3.Connection, n: int) -> None:
    now = int(time.time() * 1000)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO _honker_jobs (queue, state, payload, priority, run_at, max_attempts,"
        " backoff_base_ms, backoff_max_ms, backoff_jitter, created_at)"
        " VALUES ('b', 'ready', ?, 0, ?, 3, 1000, 3600000, 0.5, ?)",
        [(payload(i), now, now) for i in range(n)],
    )
    conn.execute("COMMIT")


def w3(in_check=False, old_claim=False, drop_running_index=False, probe=True) -> float:
    conn = connect(in_check, drop_running_index)
    fill(conn, N)
    housekeeping, pick, lease, ack = (
        const("HOUSEKEEPING_DUE"),
        const("PICK"),
        const("LEASE"),
        const("ACK"),
    )
    started = time.perf_counter()
    for _ in range(N):
        now = int(time.time() * 1000)
        conn.execute("BEGIN IMMEDIATE")
        if probe:
            conn.execute(housekeeping, ("b", now)).fetchone()
        if old_claim:
            job = conn.execute(OLD_CLAIM, ("b", 1, "w", now + 60000)).fetchall()[0]
            job_id, token = job[0], job[7]
        else:
            job_id = conn.execute(pick, ("b", 1)).fetchall()[0][0]
            token = os.urandom(16).hex()
            conn.execute(lease, (job_id, "w", token, now + 60000))
        conn.execute("COMMIT")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(ack, (job_id, "b", token))
        conn.execute("COMMIT")
    conn.close()
    return N / (time.perf_counter() - started)


def w2(in_check=False, batches=W2_BATCHES) -> float:
    conn = connect(in_check)
    enqueue = const("ENQUEUE")
    rows = [
        (
            "b",
            "ready",
            payload(i),
            0,
            1,
            3,
            1000,
            3600000,
            0.5,
            None,
            None,
            1,
            None,
            None,
        )
        for i in range(1000)
    ]
    started = time.perf_counter()
    for _ in range(batches):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(enqueue, rows)
        conn.execute("COMMIT")
    conn.close()
    return batches * 1000 / (time.perf_counter() - started)


if __name__ == "__main__":
    print(f"SQLite {sqlite3.sqlite_version}, {N} jobs")
    rows = [
        ("W3 honker's claim and schema", lambda: w3()),
        ("W3 one UPDATE ... RETURNING claim", lambda: w3(old_claim=True)),
        ("W3 schema 1's IN check", lambda: w3(in_check=True)),
        ("W3 schema 1 and its claim", lambda: w3(in_check=True, old_claim=True)),
        ("W3 no housekeeping probe", lambda: w3(probe=False)),
        ("W3 no running index, probe kept", lambda: w3(drop_running_index=True)),
        (
            "W3 no running index, no probe",
            lambda: w3(drop_running_index=True, probe=False),
        ),
        ("W2 honker's schema", lambda: w2()),
        ("W2 schema 1's IN check", lambda: w2(in_check=True)),
    ]
    for name, run in rows:
        print(f"{name:40} {run():9.0f} jobs/s", flush=True)
