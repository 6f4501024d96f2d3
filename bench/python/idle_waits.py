"""Idle asyncio waiters in one process: what they cost the other calls.

    python bench/python/idle_waits.py [--smoke] [--consumers N ...]

For each N: N ``async for`` consumers wait for jobs on one queue (30 s
waits), then, ten times, ``enqueue_async`` one job and time it and the job's
way to a consumer (the worst of the ten is printed). Then, with the same N
consumers idle, another thread commits to another queue about 1,000 times a
second for 2 s: the process's CPU and the event loop's worst gap between 5 ms
ticks. These waits used to hold one of honker's 32 pool threads each, so
past 32 every async call waited up to a second (ADR 14's addendum). `--smoke`
runs tiny counts to check the benchmark works (scripts/test.sh); its numbers
mean nothing. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import threading
import time
from pathlib import Path

import honker


async def latencies(db: honker.Database, n: int, rounds: int) -> tuple[float, float]:
    q = db.queue("q")
    got: asyncio.Queue[int] = asyncio.Queue()

    async def consumer(i: int) -> None:
        async for job in q.claim(f"w{i}", wait=30):
            await job.ack_async()
            await got.put(job.id)

    tasks = [asyncio.create_task(consumer(i)) for i in range(n)]
    await asyncio.sleep(0.5)  # every consumer waits
    worst_enqueue = worst_arrival = 0.0
    for r in range(rounds):
        t0 = time.perf_counter()
        e = await q.enqueue_async({"r": r})
        t1 = time.perf_counter()
        while await got.get() != e.id:
            pass
        t2 = time.perf_counter()
        worst_enqueue = max(worst_enqueue, t1 - t0)
        worst_arrival = max(worst_arrival, t2 - t1)
        await asyncio.sleep(0.02)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return worst_enqueue, worst_arrival


async def herd(path: Path, n: int, seconds: float) -> tuple[int, float, float]:
    db = honker.open(path)
    q = db.queue("q")

    async def consumer(i: int) -> None:
        async for job in q.claim(f"w{i}", wait=30):
            await job.ack_async()

    tasks = [asyncio.create_task(consumer(i)) for i in range(n)]
    await asyncio.sleep(0.3)
    other = honker.open(path)
    stop = threading.Event()
    commits = [0]

    def produce() -> None:
        oq = other.queue("other")
        while not stop.is_set():
            oq.enqueue({"x": 1})
            commits[0] += 1
            time.sleep(0.001)

    producer = threading.Thread(target=produce)
    producer.start()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    worst_gap, last = 0.0, time.perf_counter()
    end = last + seconds
    while time.perf_counter() < end:
        await asyncio.sleep(0.005)
        now = time.perf_counter()
        worst_gap, last = max(worst_gap, now - last), now
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    stop.set()
    producer.join()
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    other.close()
    db.close()
    return commits[0], cpu / seconds, worst_gap


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--consumers", type=int, nargs="*", default=[1, 40, 200])
    a = ap.parse_args()
    counts = [2] if a.smoke else a.consumers
    rounds, seconds = (2, 0.2) if a.smoke else (10, 2.0)
    with tempfile.TemporaryDirectory(prefix="honker-idle-waits-") as d:
        tmp = Path(d)
        print(f"honker {honker.__version__}: idle asyncio consumers in one process")
        for n in counts:
            db = honker.open(tmp / f"lat-{n}.db")
            enq, arrival = asyncio.run(latencies(db, n, rounds))
            db.close()
            commits, cpu, gap = asyncio.run(herd(tmp / f"herd-{n}.db", n, seconds))
            print(
                f"{n:>4} idle consumers: enqueue_async worst {enqueue_ms(enq)}, "
                f"job to a consumer worst {enqueue_ms(arrival)}; "
                f"{commits / seconds:.0f} commits/s elsewhere: CPU {cpu * 100:.0f} % of a core, "
                f"worst loop gap {gap * 1000:.1f} ms",
                flush=True,
            )


def enqueue_ms(s: float) -> str:
    return f"{s * 1000:.1f} ms"


if __name__ == "__main__":
    main()
