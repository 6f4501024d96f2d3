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


def test_a_python_that_cannot_load_extensions_is_told_how_to_get_one():
    """pyenv's default build has no ``enable_load_extension``: the error
    names the configure flag, Debian's Python and pyenv's own form (issue 53)."""

    class NoExtensions:  # what such a Python's sqlite3.Connection lacks
        pass

    try:
        honker.load_extension(NoExtensions())  # type: ignore[arg-type]
    except honker.InvalidArgument as e:
        message = str(e)
    else:
        raise AssertionError("accepted a connection that cannot load extensions")
    assert "--enable-loadable-sqlite-extensions" in message
    assert "/usr/bin/python3" in message
    assert "PYTHON_CONFIGURE_OPTS=--enable-loadable-sqlite-extensions pyenv install" in message


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


def test_a_sql_only_worker_sleeps_until_next_claim_at_and_sweeps_expired(tmp_path):
    """Honker's contracts, as its clients call them over stdlib sqlite3:
    ``honker_queue_next_claim_at`` in unix seconds (0: nothing coming), then
    the job is claimable from that second; ``honker_sweep_expired`` counts."""
    import time

    conn = stdlib(tmp_path / "worker.db")
    conn.execute("SELECT honker_bootstrap()")
    one = lambda sql, *args: conn.execute(sql, args).fetchone()[0]  # noqa: E731
    assert one("SELECT honker_queue_next_claim_at('q')") == 0
    one("SELECT honker_enqueue('q', '{\"n\": 1}', NULL, 1.2, 0, 3, NULL)")
    before = time.time()
    assert json.loads(one("SELECT honker_claim_batch('q', 'w', 1, 30)")) == []
    at = one("SELECT honker_queue_next_claim_at('q')")
    assert int(before + 1.2) <= at <= int(before + 1.2) + 2, (before, at)
    time.sleep(max(0.0, at - time.time()))
    jobs = json.loads(one("SELECT honker_claim_batch('q', 'w', 1, 30)"))
    assert [j["attempts"] for j in jobs] == [1], "claimable from that second"
    # The lease is the next claim time now: a lapse 30 s on, rounded up.
    assert (
        int(time.time()) + 29
        <= one("SELECT honker_queue_next_claim_at('q')")
        <= int(time.time()) + 31
    )

    one("SELECT honker_enqueue('q', '{}', NULL, NULL, 0, 3, 0.05)")
    time.sleep(0.1)
    assert one("SELECT honker_sweep_expired('q')") == 1
    assert one("SELECT honker_sweep_expired('q')") == 0
    stats = json.loads(one("SELECT honker_queue_stats('q')"))
    assert (stats["expired"], stats["running"]) == (1, 1)
    conn.close()
