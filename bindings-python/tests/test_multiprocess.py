"""Several processes on one file: 4 workers drain a queue, each job exactly
once, with no error surfaced. Mirrors core/tests/multiprocess.rs."""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

import honker
from conftest import integrity_ok

JOBS = 2000


def drain(path: str, worker: str, ready: Any) -> None:
    db = honker.open(path)
    q = db.queue("work")
    # Every worker starts together: on a loaded machine the first process
    # up could otherwise drain the queue before the others have imported.
    ready.wait(60)
    idle = 0
    while idle < 3:
        jobs = q.claim_batch(worker, 16, wait=0.2)
        if not jobs:
            idle += 1
            continue
        idle = 0
        for job in jobs:
            # The effect and the ack commit together; a second processing of
            # the same job would violate the primary key and fail loudly.
            with db.transaction() as tx:
                tx.execute("INSERT INTO done (job_id, pid) VALUES (?, ?)", [job.id, os.getpid()])
                job.ack(tx=tx)
    db.close()


def test_four_processes_drain_one_queue_each_job_exactly_once(path):
    db = honker.open(path)
    db.execute("CREATE TABLE done (job_id INTEGER PRIMARY KEY, pid INTEGER)")
    db.queue("work").enqueue_many([{"i": i} for i in range(JOBS)])
    # spawn: a process forked while honker is open cannot use honker (UNSAFE).
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(5)
    procs = [ctx.Process(target=drain, args=(str(path), f"w{i}", ready)) for i in range(4)]
    for p in procs:
        p.start()
    ready.wait(60)
    for p in procs:
        p.join(120)
        assert p.exitcode == 0, "a worker failed (a BUSY error or a duplicate)"
    assert db.query("SELECT count(*), count(DISTINCT job_id) FROM done") == [(JOBS, JOBS)]
    workers = db.query("SELECT count(DISTINCT pid) FROM done")[0][0]
    assert workers >= 2, "the work should have been shared"
    s = db.queue("work").stats()
    assert (s.ready, s.running, s.dead) == (0, 0, 0)
    db.close()
    assert integrity_ok(path)
