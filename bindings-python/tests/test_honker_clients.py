"""The extension called exactly as Honker's clients call it (Go, Ruby, Bun,
.NET, C++, Elixir; reference/honker-ancestor.md §3): Honker's SQL names at
Honker's arities over stdlib ``sqlite3`` and the ``sqlite3`` shell, with
bound parameters, payloads that come back as JSON strings, unix seconds and
1/0 results, and a SQL-only worker that sleeps in
``honker_update_watcher_wait`` between claims."""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import honker
import pytest


def client(path) -> sqlite3.Connection:
    """A connection as Honker's clients open one: busy timeout, the
    extension, Honker's pragmas, honker_bootstrap()."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    honker.load_extension(conn)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("SELECT honker_bootstrap()")
    return conn


def caller(conn):
    def one(sql, *args):
        return conn.execute(sql, args).fetchone()[0]

    return one


def enqueue(one, queue, payload, run_at=None, delay=None, priority=0, max_attempts=3, expires=None):
    return one(
        "SELECT honker_enqueue(?, ?, ?, ?, ?, ?, ?)",
        queue, json.dumps(payload), run_at, delay, priority, max_attempts, expires,
    )  # fmt: skip


def claim(one, queue, worker, n=10, visibility=30):
    rows = json.loads(one("SELECT honker_claim_batch(?, ?, ?, ?)", queue, worker, n, visibility))
    for r in rows:
        assert set(r) == {"id", "queue", "payload", "worker_id", "attempts", "claim_expires_at"}
        r["payload"] = json.loads(r["payload"])  # Honker's rows: a JSON string
    return rows


def test_ready_priority_and_delayed_jobs(tmp_path):
    one = caller(client(tmp_path / "q.db"))
    low = enqueue(one, "q", {"n": "low"})
    high = enqueue(one, "q", {"n": "high"}, priority=10)
    later = enqueue(one, "q", {"n": "later"}, delay=2)
    before = time.time()
    rows = claim(one, "q", "w1")
    assert [r["id"] for r in rows] == [high, low], "priority, then age; not the delayed one"
    assert rows[0]["payload"] == {"n": "high"}
    assert rows[0]["worker_id"] == "w1" and rows[0]["attempts"] == 1
    assert int(before) + 29 <= rows[0]["claim_expires_at"] <= int(time.time()) + 30
    assert one("SELECT honker_ack_batch(?, ?)", json.dumps([high, low]), "w1") == 2
    # The delayed job: not yet; next_claim_at says when (unix seconds).
    assert claim(one, "q", "w1") == []
    at = one("SELECT honker_queue_next_claim_at(?)", "q")
    assert int(before + 2) <= at <= int(time.time() + 2) + 1
    job = json.loads(one("SELECT honker_get_job(?)", later))
    assert job["state"] == "pending" and json.loads(job["payload"]) == {"n": "later"}
    time.sleep(max(0.0, at - time.time()))
    assert [r["id"] for r in claim(one, "q", "w1")] == [later]
    # delay wins over run_at (Honker's rule for honker_enqueue).
    both = enqueue(one, "q", {}, run_at=int(time.time()) - 3600, delay=3600)
    assert json.loads(one("SELECT honker_get_job(?)", both))["run_at"] >= int(time.time()) + 3599


def test_lease_lapse_reclaim_and_heartbeat_ownership(tmp_path):
    one = caller(client(tmp_path / "q.db"))
    job = enqueue(one, "q", {"n": 1})
    claim(one, "q", "w1", visibility=1)
    # Only the holder can heartbeat, ack, retry or fail: others get 0.
    assert one("SELECT honker_heartbeat(?, ?, ?)", job, "w2", 30) == 0
    assert one("SELECT honker_ack(?, ?)", job, "w2") == 0
    assert one("SELECT honker_retry(?, ?, ?, ?)", job, "w2", 0, "e") == 0
    assert one("SELECT honker_fail(?, ?, ?)", job, "w2", "e") == 0
    assert one("SELECT honker_heartbeat(?, ?, ?)", job, "w1", 1) == 1
    assert json.loads(one("SELECT honker_get_job(?)", job))["state"] == "processing"
    time.sleep(1.1)
    # Lapsed: a late heartbeat is refused, and another worker reclaims it.
    assert one("SELECT honker_heartbeat(?, ?, ?)", job, "w1", 30) == 0
    [again] = claim(one, "q", "w2")
    assert (again["id"], again["attempts"]) == (job, 2)
    # The first worker's ack no longer lands; the fenced arity tells the
    # second worker's claims apart by attempt number.
    assert one("SELECT honker_ack(?, ?)", job, "w1") == 0
    assert one("SELECT honker_ack(?, ?, ?)", job, "w2", 1) == 0
    assert one("SELECT honker_ack(?, ?, ?)", job, "w2", 2) == 1
    assert one("SELECT honker_get_job(?)", job) == ""


def test_retry_to_dead_with_honkers_tables(tmp_path):
    conn = client(tmp_path / "q.db")
    one = caller(conn)
    job = enqueue(one, "q", {"n": 1}, max_attempts=2)
    claim(one, "q", "w")
    assert one("SELECT honker_retry(?, ?, ?, ?)", job, "w", 0, "first") == 1
    [r] = claim(one, "q", "w")
    assert r["attempts"] == 2
    assert one("SELECT honker_retry(?, ?, ?, ?)", job, "w", 0, "second") == 1
    assert one("SELECT honker_get_job(?)", job) == "", "dead: not live any more"
    # Operators read Honker's tables: here, views over honker's.
    dead = conn.execute(
        "SELECT id, queue, attempts, last_error FROM _honker_dead WHERE queue = 'q'"
    ).fetchall()
    assert dead == [(job, "q", 2, "second")]
    assert conn.execute("SELECT count(*) FROM _honker_live WHERE queue = 'q'").fetchone() == (0,)
    # A lease that lapses on the last attempt dies with Honker's words.
    last = enqueue(one, "q", {}, max_attempts=1)
    claim(one, "q", "w", visibility=1)
    time.sleep(1.1)
    assert claim(one, "q", "w") == []
    assert conn.execute("SELECT last_error FROM _honker_dead WHERE id = ?", [last]).fetchone() == (
        "max attempts exceeded",
    )
    # Cancel: 1 for a live job, 0 otherwise (queue-scoped arity too).
    c = enqueue(one, "q", {})
    assert one("SELECT honker_cancel(?, ?)", "other", c) == 0
    assert one("SELECT honker_cancel(?)", c) == 1
    assert one("SELECT honker_cancel(?)", c) == 0


def test_results_with_expiry_and_the_expiry_sweep(tmp_path):
    one = caller(client(tmp_path / "q.db"))
    job = enqueue(one, "q", {})
    assert one("SELECT honker_result_save(?, ?, ?)", job, json.dumps({"ok": True}), 1) == 1
    assert one("SELECT honker_result_save(?, ?, ?)", 4242, "val", 0) == 1
    assert json.loads(one("SELECT honker_result_get(?)", job)) == {"ok": True}
    assert one("SELECT honker_result_get(?)", 4242) == "val"
    assert one("SELECT honker_result_get(?)", 4243) is None
    time.sleep(1.1)
    assert one("SELECT honker_result_get(?)", job) is None, "expired"
    assert one("SELECT honker_result_sweep()") == 1
    assert one("SELECT honker_result_get(?)", 4242) == "val", "no ttl: kept"
    # expires <= 0: born expired, never handed out, swept.
    enqueue(one, "exp", {}, expires=0)
    soon = enqueue(one, "exp", {}, expires=1)
    time.sleep(1.1)
    assert one("SELECT honker_sweep_expired(?)", "exp") == 2
    assert one("SELECT honker_sweep_expired(?)", "exp") == 0
    assert one("SELECT honker_get_job(?)", soon) == ""


def test_a_sql_only_worker_waits_in_the_watcher_and_wakes_on_commit_and_deadline(tmp_path):
    """Honker's Elixir client's loop: claim; if nothing, sleep in
    honker_update_watcher_wait until the next claim time or a commit."""
    path = str(tmp_path / "q.db")
    one = caller(client(path))
    handle = one("SELECT honker_update_watcher_open(?, NULL)", path)
    got, waits = [], []

    def work():
        # The worker's own connection; the handle is the process's.
        one = caller(client(path))
        deadline = time.time() + 30
        while len(got) < 2 and time.time() < deadline:
            rows = claim(one, "q", "sqlw")
            for r in rows:
                assert one("SELECT honker_ack(?, ?)", r["id"], "sqlw") == 1
                got.append((r["payload"]["n"], time.time()))
            if rows:
                continue
            nxt = one("SELECT honker_queue_next_claim_at(?)", "q")
            timeout = 10_000 if nxt == 0 else max(0, math.ceil((nxt - time.time()) * 1000))
            started = time.time()
            code = one("SELECT honker_update_watcher_wait(?, ?)", handle, timeout)
            waits.append((code, timeout, time.time() - started))

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.5)  # the worker is asleep in the watcher (nothing is queued)
    producer = (
        "import honker, json, sqlite3, sys, time\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=5)\n"
        "honker.load_extension(c)\n"
        "sql = 'SELECT honker_enqueue(?, ?, NULL, ?, 0, 3, NULL)'\n"
        "c.execute(sql, ['q', json.dumps({'n': 'later'}), 2])\n"
        "c.execute(sql, ['q', json.dumps({'n': 'now'}), None])\n"
        "print(time.time())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", producer, path], capture_output=True, text=True, check=True
    )
    committed = float(out.stdout)
    t.join(40)
    assert not t.is_alive()
    assert [n for n, _ in got] == ["now", "later"], (got, waits)
    # Woken by the other process's commit (code 1), well before its 10 s timeout.
    assert waits[0][:2] == (1, 10_000), waits
    assert got[0][1] - committed < 2.0, (got, committed)
    # Then asleep until the delayed job's second, woken by the deadline (0).
    assert any(code == 0 and timeout < 10_000 for code, timeout, _ in waits), waits
    assert committed + 1.0 <= got[1][1] <= committed + 4.0, (got, committed)
    assert one("SELECT honker_update_watcher_close(?)", handle) == 1
    assert one("SELECT honker_update_watcher_wait(?, 10)", handle) == -1
    with pytest.raises(sqlite3.OperationalError, match="unknown watcher backend"):
        one("SELECT honker_update_watcher_open(?, 'bogus')", path)
    with pytest.raises(sqlite3.OperationalError, match="NOT_FOUND: cannot watch"):
        one("SELECT honker_update_watcher_open(?, NULL)", str(tmp_path / "missing.db"))


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 shell is not installed")
def test_the_sqlite3_shell_as_a_honker_client(tmp_path):
    path = tmp_path / "shell.db"
    script = "\n".join(
        [
            f".load {honker.extension_path()[: -len('.so')]}",
            "SELECT honker_bootstrap() > 0;",
            "SELECT honker_enqueue('emails', '{\"to\":\"a@x.com\"}', NULL, NULL, 0, 3, NULL);",
            "SELECT honker_enqueue('emails', '{\"to\":\"b@x.com\"}', NULL, NULL, 5, 3, NULL);",
            "SELECT honker_claim_batch('emails', 'mailer-1', 32, 300);",
            "SELECT honker_ack(2, 'mailer-2');",
            "SELECT honker_ack_batch('[1,2]', 'mailer-1');",
            "SELECT honker_get_job(1) = '';",
            "SELECT honker_result_save(1, '{\"sent\":true}', 60);",
            "SELECT honker_result_get(1);",
            "SELECT count(*) FROM _honker_live;",
        ]
    )
    out = subprocess.run(
        ["sqlite3", str(path)], input=script, capture_output=True, text=True, check=True
    )
    assert out.stderr == ""
    lines = out.stdout.splitlines()
    assert lines[:3] == ["1", "1", "2"]
    rows = json.loads(lines[3])
    assert [(r["id"], json.loads(r["payload"])["to"]) for r in rows] == [
        (2, "b@x.com"),
        (1, "a@x.com"),
    ]
    assert lines[4:] == ["0", "2", "1", "1", '{"sent":true}', "0"]


def bun() -> str:
    """The Bun runtime scripts/test.sh installs (scripts/bun.sh); in CI its
    absence is a failure, elsewhere a skip."""
    path = os.environ.get("HONKER_BUN")
    if not path:
        if os.environ.get("CI"):
            pytest.fail("HONKER_BUN is not set: scripts/test.sh installs Bun for this test")
        pytest.skip("HONKER_BUN is not set (scripts/bun.sh installs Bun)")
    return path


def test_a_bun_client_drains_a_queue_waiting_through_the_watcher_c_abi(tmp_path):
    """A non-Python host: Bun's own SQLite with the extension loaded, the
    watcher C ABI through bun:ffi (extension/tests/bun_client.ts, written from
    Honker's Bun client's calls). Jobs come from this process over stdlib
    sqlite3 while the Bun worker sleeps; a delayed one wakes it by deadline."""
    path = str(tmp_path / "bun.db")
    one = caller(client(path))
    ext = honker.extension_path()[: -len(".so")]
    script = Path(__file__).resolve().parents[2] / "extension" / "tests" / "bun_client.ts"
    worker = subprocess.Popen(
        [bun(), str(script), path, ext, "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(1.0)  # the worker has found nothing and sleeps in the watcher
    for i in range(3):
        enqueue(one, "bun", {"n": i})
        time.sleep(0.1)
    enqueue(one, "bun", {"n": "later"}, delay=1)
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err.decode()
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["done"] == [{"n": 0}, {"n": 1}, {"n": 2}, {"n": "later"}], result
    assert 1 in result["waits"], "woken by this process's commits"
    assert result["waits"][-1] == 0, "the delayed job: woken by its deadline"
    assert json.loads(one("SELECT honker_queue_stats(?)", "bun"))["ready"] == 0
