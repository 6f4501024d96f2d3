"""asyncio: claims wait off the event loop, cancellation is clean, and the
loop keeps its rhythm while a claim waits or another process holds the write
lock. Mirrors the async parts of core/tests/queue.rs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import honker


class Ticker:
    """Ticks every 5 ms on the loop; `worst` is the longest gap seen."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.ticks = 0

    async def run(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            self.worst = max(self.worst, now - last)
            self.ticks += 1
            last = now


def test_the_loop_keeps_ticking_while_a_claim_waits(path):
    db = honker.open(path)
    q = db.queue("q")

    async def main():
        ticker = Ticker()
        tick_task = asyncio.ensure_future(ticker.run())
        claimer = q.claim("w", wait=5)

        async def first():
            async for job in claimer:
                return job

        waiting = asyncio.ensure_future(first())
        await asyncio.sleep(0.3)  # the claim waits all this time
        assert not waiting.done()
        await asyncio.get_running_loop().run_in_executor(None, q.enqueue, {"n": 1})
        job = await asyncio.wait_for(waiting, 5)
        await job.ack_async()
        tick_task.cancel()
        return ticker

    ticker = asyncio.run(main())
    assert ticker.ticks > 30
    assert ticker.worst < 0.1, f"the loop stalled for {ticker.worst:.3f} s"
    db.close()


HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def test_the_loop_keeps_ticking_while_another_process_holds_the_write_lock(path):
    db = honker.open(path)
    q = db.queue("q")
    q.enqueue({"n": 1})
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path), "0.5"], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"

    async def main():
        ticker = Ticker()
        tick_task = asyncio.ensure_future(ticker.run())
        started = time.monotonic()
        claimer = q.claim("w")
        job = await claimer.__anext__()  # waits for the lock, off the loop
        waited = time.monotonic() - started
        await job.ack_async()
        tick_task.cancel()
        return ticker, waited

    ticker, waited = asyncio.run(main())
    holder.wait()
    assert waited > 0.2, "the claim should have waited for the other process"
    assert ticker.worst < 0.1, f"the loop stalled for {ticker.worst:.3f} s"
    db.close()


async def cancel_a_waiting_claim(q: honker.Queue) -> asyncio.Task:
    """Starts ``async for`` on an empty queue and cancels it while its
    claim waits on honker's thread (which goes on waiting)."""

    async def consume():
        async for _ in q.claim("w", wait=2):
            raise AssertionError("nothing was enqueued yet")

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.1)
    task.cancel()
    return task


async def claim_once_released(q: honker.Queue) -> honker.Job:
    deadline = time.monotonic() + 5
    while True:
        jobs = q.claim_batch("w2")
        if jobs:
            return jobs[0]
        assert time.monotonic() < deadline, "the orphaned claim kept the job"
        await asyncio.sleep(0.01)


def test_cancelling_a_waiting_claim_loses_no_job(path, async_waits):
    db = honker.open(path)
    q = db.queue("q")

    async def main():
        task = await cancel_a_waiting_claim(q)
        try:
            await task
        except asyncio.CancelledError:
            pass
        # On honker's threads the cancelled claim is still waiting: this
        # job wakes it, and the job it claims for nobody must come back at
        # once. On the loop the wait ended with the task.
        e = q.enqueue({"n": 1})
        await asyncio.sleep(0.3)
        return e, await claim_once_released(q)

    e, job = asyncio.run(main())
    assert job.id == e.id
    assert job.attempts == 1  # the orphan's claim did not count
    job.ack()
    db.close()


def test_a_claim_that_outlives_its_event_loop_gives_its_jobs_back(path):
    db = honker.open(path)
    q = db.queue("q")
    asyncio.run(cancel_a_waiting_claim(q))  # the loop closes; the claim still waits
    e = q.enqueue({"n": 1})
    time.sleep(0.3)  # the orphaned claim wakes and takes the job first
    job = asyncio.run(claim_once_released(q))
    assert (job.id, job.attempts) == (e.id, 1)
    job.ack()
    db.close()


def test_async_job_methods_and_results(db):
    q = db.queue("q")

    async def main():
        e = q.enqueue({"n": 1})
        waiter = asyncio.ensure_future(q.wait_result_async(e.id, timeout=5))
        async with q.claim("w") as jobs:
            async for job in jobs:
                async with job.keep_alive(every=0.01):
                    await asyncio.sleep(0.05)
                await job.heartbeat_async()
                await job.ack_async(result={"ok": True})
                break
        return await waiter

    assert asyncio.run(main()) == {"ok": True}


def test_batched_claims_release_what_was_not_handed_out(db, async_waits):
    q = db.queue("q")
    q.enqueue_many(range(5))

    async def main():
        async with q.claim("w", batch=5) as jobs:
            async for job in jobs:
                await job.ack_async()
                break

    asyncio.run(main())
    s = q.stats()
    assert (s.ready, s.running) == (4, 0)


def test_a_consumer_that_starts_waiting_later_wakes_when_the_scheduled_job_comes_due(path):
    """Consumers of one queue on one loop share a look while nothing moved
    (no commit, no claim): the second consumer starts waiting 1.5 s after
    the first looked and saw the job due in 2 s. It must wake when the job
    comes due (0.5 s later), not 2 s after it began waiting. The first is
    cancelled, so only the second can take the job."""
    db = honker.open(path)
    q = db.queue("q")

    async def main() -> float:
        start = time.monotonic()
        e = q.enqueue({"n": 1}, delay=2)

        async def first_job(worker: str) -> int:
            async for job in q.claim(worker, wait=30):
                await job.ack_async()
                return job.id
            return -1

        a = asyncio.create_task(first_job("a"))
        await asyncio.sleep(1.5)
        b = asyncio.create_task(first_job("b"))
        await asyncio.sleep(0.05)  # b has looked (or reused a's look)
        a.cancel()
        got = await asyncio.wait_for(b, 10)
        assert got == e.id
        return time.monotonic() - start

    took = asyncio.run(main())
    # Due at 2 s; a look reused as "2 s from now" would wake b at 3.5 s.
    assert took < 3.0, took
    db.close()
