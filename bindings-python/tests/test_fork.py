"""fork(): a process forked while honker was open cannot use honker.

Its inherited handles raise Closed and, dropped there, touch nothing of the
parent's; every honker.open in it raises Unsafe, decided before any call into
SQLite (reopening lost commits and could hang). A process forked with nothing
open opens files normally, and spawn/forkserver children work.

Scenarios whose outcome depends on what the whole process has open run in a
fresh interpreter (``run_script``), so other tests' databases don't count.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import honker
import pytest
from conftest import integrity_ok

PARENT_DB = None


def run_script(code: str, *args: str) -> str:
    """Runs ``code`` in a fresh interpreter; returns its stdout (fails on a
    non-zero exit or after 60 s)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def wait_child(pid: int, timeout: float = 10.0) -> int | None:
    """The child's exit code, or None if it hung (it is then killed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got == pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


def open_outcome(path: str) -> str:
    """What honker.open does in this process: "opened", or the error code."""
    try:
        honker.open(path)
        return "opened"
    except honker.Unsafe as e:
        return e.code


def child_uses_the_parents_handles(path: str, results) -> None:
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
    # Opening the file again (the old advice) is refused: it lost commits.
    results.put(open_outcome(path))


def test_a_forked_child_cannot_use_the_parents_database_nor_reopen(path):
    global PARENT_DB
    db = honker.open(path)
    PARENT_DB = db
    q = db.queue("q")
    q.enqueue("before")
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    p = ctx.Process(target=child_uses_the_parents_handles, args=(str(path), results))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert results.get(timeout=5) == "CLOSED"
    assert results.get(timeout=5) == "UNSAFE"
    # The parent's connections still work after the child dropped its copy.
    q.enqueue("after")
    assert [j.payload for j in q.claim_batch("parent", 10)] == ["before", "after"]
    PARENT_DB = None
    db.close()
    assert integrity_ok(path)


def test_closed_message_says_what_to_do(path):
    db = honker.open(path)
    db.close()
    with pytest.raises(honker.Closed):
        db.query("SELECT 1")


def test_reopen_in_a_child_is_refused_and_no_commit_is_lost(tmp_path):
    # The reproduction of the lost commits: the child reopens and writes,
    # then the parent closes (and used to unlink the WAL under the child).
    out = run_script(
        """
        import os, sys, honker
        path = sys.argv[1]
        db = honker.open(path)
        db.queue("q").enqueue("parent")
        pid = os.fork()
        if pid == 0:
            try:
                honker.open(path)
                os._exit(1)
            except honker.Unsafe:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        db.close()
        check = honker.open(path)
        print(os.waitstatus_to_exitcode(status), check.queue("q").stats().ready)
        """,
        str(tmp_path / "a.db"),
    )
    assert out.split() == ["0", "1"]


def test_thirty_forks_while_a_thread_commits_never_hang(path):
    db = honker.open(path)
    q = db.queue("q")
    stop = threading.Event()
    committed = [0]

    def commit_back_to_back() -> None:
        while not stop.is_set():
            q.enqueue(committed[0])
            committed[0] += 1

    t = threading.Thread(target=commit_back_to_back)
    t.start()
    outcomes = []
    try:
        for _ in range(30):
            pid = os.fork()
            if pid == 0:
                try:
                    honker.open(path)
                    os._exit(1)
                except honker.Unsafe:
                    os._exit(0)
                except BaseException:
                    os._exit(2)
            outcomes.append(wait_child(pid))
    finally:
        stop.set()
        t.join()
    assert outcomes == [0] * 30
    assert q.stats().ready == committed[0]
    db.close()
    assert integrity_ok(path)


@pytest.mark.parametrize("how", ["drops the transaction", "just exits"])
def test_a_child_leaving_does_not_touch_the_parents_transaction(tmp_path, how):
    # A normal interpreter exit in the child finalizes its copy of the open
    # transaction; that must not roll back the parent's or zero its -shm
    # entries.
    out = run_script(
        """
        import gc, os, sys, honker
        path, how = sys.argv[1], sys.argv[2]
        db = honker.open(path)
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, v BLOB)")
        tx = db.transaction()
        for i in range(300):
            tx.execute("INSERT INTO orders (id, v) VALUES (?, randomblob(2000))", [i])
        db.queue("q").enqueue({"order": 1}, tx=tx)
        pid = os.fork()
        if pid == 0:
            if how == "drops the transaction":
                try:
                    tx.commit()
                except honker.Closed:
                    pass
                del tx
                gc.collect()
            sys.exit(0)  # a normal exit: finalizers run
        _, status = os.waitpid(pid, 0)
        tx.execute("INSERT INTO orders (id, v) VALUES (1000, 'after')")
        tx.commit()
        ok = db.query("PRAGMA integrity_check")[0][0]
        print(os.waitstatus_to_exitcode(status), db.query("SELECT count(*) FROM orders")[0][0],
              db.queue("q").stats().ready, ok)
        db.close()
        """,
        str(tmp_path / "a.db"),
        how,
    )
    assert out.split() == ["0", "301", "1", "ok"]
    assert integrity_ok(tmp_path / "a.db")


def enqueue_from_child(path: str) -> None:
    db = honker.open(path)
    db.queue("q").enqueue(f"from {os.getpid()}")
    db.close()


def open_from_child(path: str, results) -> None:
    results.put(open_outcome(path))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawn_and_forkserver_children_use_the_file(path, method):
    db = honker.open(path)  # open in the parent meanwhile: fine for these
    ctx = multiprocessing.get_context(method)
    procs = [ctx.Process(target=enqueue_from_child, args=(str(path),)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert db.queue("q").stats().ready == 2
    db.close()


def test_fork_start_method_children_are_refused(path):
    db = honker.open(path)
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    p = ctx.Process(target=open_from_child, args=(str(path), results))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert results.get(timeout=5) == "UNSAFE"
    db.close()


def test_a_child_forked_with_nothing_open_draws_its_own_lease_tokens(tmp_path):
    # Parent and child start from the same copy of SQLite's PRNG; the child,
    # forked after the parent closed everything, opens files and must not
    # draw the parent's next tokens (SQLite reseeds on a new pid).
    out = run_script(
        """
        import gc, os, sys, honker
        d = sys.argv[1]
        db = honker.open(d + "/warm.db")
        db.queue("q").enqueue("warm")
        db.queue("q").claim_batch("parent")  # the parent's PRNG is seeded now
        db.close()
        del db
        gc.collect()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            own = honker.open(d + "/child.db")
            own.queue("q").enqueue("x")
            [job] = own.queue("q").claim_batch("child")
            own.close()
            os.write(w, job.token.encode())
            os._exit(0)
        os.close(w)
        child_token = os.read(r, 100).decode()
        os.waitpid(pid, 0)
        mine = honker.open(d + "/parent.db")
        mine.queue("q").enqueue("x")
        [job] = mine.queue("q").claim_batch("parent")
        mine.close()
        print(child_token, job.token)
        """,
        str(tmp_path),
    )
    child_token, parent_token = out.split()
    assert len(child_token) == len(parent_token) == 32
    assert child_token != parent_token


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


def child_while_checkpointing(path: str, results) -> None:
    # The parent's copy (its checkpoint thread does not exist here) is
    # dropped without touching it; opening is refused.
    globals()["PARENT_DB"] = None
    gc.collect()
    results.put(open_outcome(path))


def test_fork_while_the_checkpoint_thread_runs(path):
    global PARENT_DB
    db = honker.open(path)
    PARENT_DB = db
    write_pages(db.queue("parent"), 30)
    assert "honker-ckpt" in thread_names()  # running in the parent
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    p = ctx.Process(target=child_while_checkpointing, args=(str(path), results))
    p.start()
    write_pages(db.queue("parent"), 30)  # meanwhile, in the parent
    p.join(60)
    assert p.exitcode == 0
    assert results.get(timeout=5) == "UNSAFE"
    write_pages(db.queue("parent"), 5)
    assert db.queue("parent").stats().ready == 65 * 50
    PARENT_DB = None
    db.close()
    assert integrity_ok(path)


def test_inherited_jobs_claimers_and_keep_alives_refuse_quietly_in_the_child(tmp_path):
    out = run_script(
        """
        import os, sys, honker
        db = honker.open(sys.argv[1])
        q = db.queue("q")
        q.enqueue_many(["a", "b", "c"])
        claimer = q.claim("w", batch=3)
        job = next(claimer)  # two more stay buffered in the claimer
        beating = job.keep_alive(every=0.01)
        beating.__enter__()
        pid = os.fork()
        if pid == 0:
            codes = []
            for call in (job.ack, lambda: next(claimer).ack(), lambda: q.claim_batch("w"),
                         job.heartbeat):
                try:
                    call()
                    codes.append("ok")
                except honker.HonkerError as e:
                    codes.append(e.code)
            claimer.close()  # gives nothing back: the jobs are the parent's
            with job.keep_alive(every=0.01) as k:  # stops at once on CLOSED
                pass
            beating.__exit__(None, None, None)
            os.write(1, (" ".join(codes) + "\\n").encode())
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        beating.__exit__(None, None, None)
        job.ack()
        claimer.close()
        s = q.stats()
        print(os.waitstatus_to_exitcode(status), s.ready, s.running,
              db.query("PRAGMA integrity_check")[0][0])
        db.close()
        """,
        str(tmp_path / "a.db"),
    )
    child, parent = out.strip().splitlines()
    assert child.split() == ["CLOSED"] * 4
    assert parent.split() == ["0", "2", "0", "ok"]


def test_inherited_streams_subscriptions_and_listeners_refuse_quietly_in_the_child(tmp_path):
    # The child's copies of a stream, a subscription (auto-commit on) and a
    # listener are CLOSED; closing or dropping them there commits nothing,
    # and the parent's subscription goes on from its own place.
    out = run_script(
        """
        import gc, os, sys, honker
        db = honker.open(sys.argv[1])
        s = db.stream("events")
        s.publish_many(["a", "b", "c"])
        sub = s.subscribe("projector", commit_every=1)
        listener = db.listen("ch")
        first = sub.next(wait=0)  # "a", handed out, not passed
        pid = os.fork()
        if pid == 0:
            codes = []
            for call in (lambda: s.publish("x"), lambda: sub.next(wait=0),
                         lambda: listener.next(wait=0), lambda: db.notify("ch", 1)):
                try:
                    call()
                    codes.append("ok")
                except honker.HonkerError as e:
                    codes.append(e.code)
            try:
                sub.close()
            except honker.HonkerError as e:
                codes.append(e.code)
            del sub, listener
            gc.collect()
            os.write(1, (" ".join(codes) + "\\n").encode())
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        untouched = s.position("projector")  # the child committed nothing
        rest = [sub.next(wait=0).payload, sub.next(wait=0).payload]
        sub.close()
        print(os.waitstatus_to_exitcode(status), untouched, first.payload, *rest,
              s.position("projector"),
              s.info().length, db.query("PRAGMA integrity_check")[0][0])
        db.close()
        """,
        str(tmp_path / "a.db"),
    )
    child, parent = out.strip().splitlines()
    assert child.split()[:4] == ["CLOSED"] * 4
    assert parent.split() == ["0", "1", "a", "b", "c", "3", "3", "ok"]
