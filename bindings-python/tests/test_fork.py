"""fork(): a child never reuses its parent's connections. The parent's
Database refuses every call in the child (CLOSED), dropping it there closes
nothing, and the child works by opening the file again."""

from __future__ import annotations

import gc
import multiprocessing
from pathlib import Path

import honker
import pytest
from conftest import integrity_ok

PARENT_DB = None


def child(path: str, results) -> None:
    db = PARENT_DB
    assert db is not None
    try:
        db.queue("q").enqueue("from the child")
        results.put("reused")
    except honker.Closed as e:
        results.put(e.code)
    # Dropping the parent's copy must not close the parent's connections.
    del db
    globals()["PARENT_DB"] = None
    gc.collect()
    own = honker.open(path)
    [job] = own.queue("q").claim_batch("child")
    job.ack()
    results.put(job.payload)
    own.close()


def test_a_forked_child_cannot_use_the_parents_database(path):
    global PARENT_DB
    db = honker.open(path)
    PARENT_DB = db
    q = db.queue("q")
    q.enqueue("for the child")
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    p = ctx.Process(target=child, args=(str(path), results))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert results.get(timeout=5) == "CLOSED"
    assert results.get(timeout=5) == "for the child"
    # The parent's connections still work after the child dropped its copy.
    q.enqueue("after")
    [job] = q.claim_batch("parent")
    assert job.payload == "after"
    job.ack()
    PARENT_DB = None
    db.close()
    assert integrity_ok(path)


def test_closed_message_says_what_to_do(path):
    db = honker.open(path)
    db.close()
    with pytest.raises(honker.Closed):
        db.query("SELECT 1")


def token_after_fork(path: str, results) -> None:
    db = honker.open(path)
    q = db.queue("q")
    q.enqueue("x")
    [job] = q.claim_batch("child")
    results.put(job.token)
    db.close()


def test_a_forked_child_draws_its_own_lease_tokens(tmp_path):
    # Parent and child start from the same copy of SQLite's PRNG; the child
    # must not draw the parent's next tokens (SQLite reseeds on a new pid).
    db = honker.open(tmp_path / "warm.db")
    db.queue("q").enqueue("warm")
    db.queue("q").claim_batch("parent")  # the parent's PRNG is seeded now
    db.close()
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    p = ctx.Process(target=token_after_fork, args=(str(tmp_path / "child.db"), results))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    child_token = results.get(timeout=5)
    mine = honker.open(tmp_path / "parent.db")
    mine.queue("q").enqueue("x")
    [job] = mine.queue("q").claim_batch("parent")
    mine.close()
    assert len(child_token) == len(job.token) == 32
    assert child_token != job.token


def thread_names() -> set[str]:
    tasks = Path("/proc/self/task")
    if not tasks.exists():  # not Linux: nothing to look at
        return {"honker-ckpt"}
    return {(t / "comm").read_text().strip() for t in tasks.iterdir()}


def write_pages(q, commits: int) -> None:
    """About 50 WAL frames per commit: past 1,000 frames the database's
    checkpoint thread runs."""
    for _ in range(commits):
        q.enqueue_many(["p" * 3500] * 50)


def child_with_checkpoints(path: str, results) -> None:
    # The parent's copy (its checkpoint thread does not exist here) is
    # dropped without touching it; the child's own database starts its own.
    globals()["PARENT_DB"] = None
    gc.collect()
    own = honker.open(path)
    q = own.queue("child")
    write_pages(q, 30)
    own.close()
    results.put("done")


def test_fork_while_the_checkpoint_thread_runs(path):
    global PARENT_DB
    db = honker.open(path)
    PARENT_DB = db
    write_pages(db.queue("parent"), 30)
    assert "honker-ckpt" in thread_names()  # running in the parent
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    p = ctx.Process(target=child_with_checkpoints, args=(str(path), results))
    p.start()
    write_pages(db.queue("parent"), 30)  # meanwhile, in the parent
    p.join(60)
    assert p.exitcode == 0
    assert results.get(timeout=5) == "done"
    write_pages(db.queue("parent"), 5)
    assert db.queue("parent").stats().ready == 65 * 50
    PARENT_DB = None
    db.close()
    assert integrity_ok(path)
    check = honker.open(path)
    assert check.queue("child").stats().ready == 30 * 50
    check.close()
