"""Opening, options, your own SQL, maintenance, closing, and sharing one
Database between threads. Mirrors core/tests/database.rs."""

from __future__ import annotations

import sqlite3
import threading
import time

import honker
import pytest


def test_open_creates_the_file_in_wal_mode_and_leaves_user_version_alone(path):
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version = 7")
    raw.close()
    with honker.open(path, durability="full", busy_timeout=2, readers=2) as db:
        assert db.query("PRAGMA journal_mode") == [("wal",)]
        assert db.query("PRAGMA user_version") == [(7,)]
        assert db.path.endswith("app.db")


def test_a_newer_schema_is_refused_without_writing(path):
    honker.open(path).close()
    raw = sqlite3.connect(path)
    raw.execute("INSERT INTO _honker_schema (version, name, applied_at) VALUES (999, 'x', 0)")
    raw.commit()
    raw.close()
    before = path.read_bytes()
    with pytest.raises(honker.SchemaTooNew):
        honker.open(path)
    assert path.read_bytes() == before


def test_maintain_prunes_past_retention(db, clock):
    q = db.queue("q", max_attempts=1)
    q.enqueue("x")
    [job] = q.claim_batch("w")
    job.fail("bad")
    clock.advance(8 * 86400)  # dead letters are kept 7 days
    assert db.maintain()["dead"] == 1
    assert q.stats().dead == 0


def test_handles_are_shared_between_threads_each_job_once(db):
    q = db.queue("q")
    q.enqueue_many(range(400))
    seen: list[int] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        while True:
            jobs = q.claim_batch(name, 8)
            if not jobs:
                return
            for job in jobs:
                job.ack()
                with lock:
                    seen.append(job.payload)

    threads = [threading.Thread(target=worker, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == list(range(400))


def test_waiting_releases_the_gil(db):
    q = db.queue("q")
    done = threading.Event()

    def wait() -> None:
        q.claim_batch("w", wait=0.5)  # nothing comes
        done.set()

    t = threading.Thread(target=wait)
    t.start()
    spins = 0
    started = time.monotonic()
    while not done.is_set():
        spins += 1  # pure Python: runs only while the waiter holds no GIL
    t.join()
    assert time.monotonic() - started >= 0.4
    assert spins > 100_000


def test_context_manager_closes(path):
    with honker.open(path) as db:
        q = db.queue("q")
    with pytest.raises(honker.Closed):
        q.stats()


def test_the_version_is_the_one_version_of_every_package():
    import importlib.metadata
    import re
    from pathlib import Path

    cargo = (Path(__file__).resolve().parents[2] / "Cargo.toml").read_text()
    m = re.search(r'\[workspace\.package\][^\[]*?^version = "([^"]+)"', cargo, re.S | re.M)
    assert m is not None
    assert honker.__version__ == m.group(1) == importlib.metadata.version("honker")
