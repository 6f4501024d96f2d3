"""One benchmark process: runs one workload of bench/python/run.py with one
library and prints its result as JSON.

    python workloads.py LIBRARY WORKLOAD PATH COUNT

LIBRARY is `honker` (this repository's binding), `stdlib` (the same queue
operations as plain SQL through the stdlib sqlite3 module, with the same
pragmas: the baseline) or `honker024` (Honker 0.2.4 from PyPI, in its own
venv: it has the same module name). Each runs in its own process, so no two
SQLite libraries share one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time

WORKER = "bench-worker"
# W7's jobs: the task envelope both honker's Worker and Honker's read.
NOOP = {"task": "noop", "args": []}


def payload(i: int) -> dict:
    return {"to": f"user{i}@example.com", "template": "order-confirmed"}


class Honker:
    """This repository's binding."""

    def __init__(self, path: str) -> None:
        import honker

        self.db = honker.open(path)
        self.q = self.db.queue("bench")

    def enqueue_one(self, p) -> None:
        self.q.enqueue(p)

    def enqueue_batch(self, ps) -> None:
        self.q.enqueue_many(ps)

    def claim_ack(self, n: int) -> int:
        jobs = self.q.claim_batch(WORKER, n)
        if n == 1:
            for job in jobs:
                job.ack()
        elif jobs:
            self.q.ack_many(jobs)
        return len(jobs)

    async def consume(self, count: int, on_job) -> None:
        async for job in self.q.claim(WORKER):
            on_job(job.payload)
            job.ack()
            count -= 1
            if count == 0:
                return

    def fill_tasks(self, count: int) -> None:
        for start in range(0, count, 1000):
            self.q.enqueue_many([NOOP] * (min(count, start + 1000) - start))

    async def run_worker(self, concurrency: int, count: int) -> None:
        """honker.Worker with an async no-op handler, until `count` ran."""
        import honker

        w = honker.Worker(self.db, concurrency=concurrency, worker_id=WORKER)
        done = 0

        @w.task("bench", task="noop")
        async def noop(job) -> None:
            nonlocal done
            done += 1
            if done == count:
                w.stop()

        await w.run_async()
        assert done == count, done

    async def run_hand_loop(self, count: int) -> None:
        """What users wrote before the worker: claim, run, ack."""

        async def noop(job) -> None:
            pass

        async for job in self.q.claim(WORKER):
            await noop(job)
            job.ack()
            count -= 1
            if count == 0:
                return

    def consume_sync(self, count: int, on_job) -> None:
        for job in self.q.claim(WORKER):
            on_job(job.payload)
            job.ack()
            count -= 1
            if count == 0:
                return


class Honker024:
    """Honker 0.2.4 from PyPI, through its documented API."""

    def __init__(self, path: str) -> None:
        import honker

        self.db = honker.open(path)
        self.q = self.db.queue("bench")

    def enqueue_one(self, p) -> None:
        self.q.enqueue(p)

    def enqueue_batch(self, ps) -> None:
        with self.db.transaction() as tx:
            for p in ps:
                self.q.enqueue(p, tx=tx)

    def claim_ack(self, n: int) -> int:
        jobs = self.q.claim_batch(WORKER, n)
        if n == 1:
            for job in jobs:
                job.ack()
        elif jobs:
            self.q.ack_batch([j.id for j in jobs], WORKER)
        return len(jobs)

    async def consume(self, count: int, on_job) -> None:
        async for job in self.q.claim(WORKER):
            on_job(job.payload)
            job.ack()
            count -= 1
            if count == 0:
                return

    consume_sync = None

    def _noop_task(self):
        if not hasattr(self, "_noop"):
            self._done = 0

            @self.q.task(name="noop", store_result=False)
            async def noop() -> None:
                self._done += 1
                if self._done == self._count:
                    self._stop.set()

            self._noop = noop
        return self._noop

    def fill_tasks(self, count: int) -> None:
        noop = self._noop_task()
        for _ in range(count):
            noop()

    async def run_worker(self, concurrency: int, count: int) -> None:
        """Honker's own worker (run_workers) over its task envelope."""
        import honker

        self._noop_task()
        self._count, self._stop = count, asyncio.Event()
        await honker.run_workers(
            self.db, queue="bench", concurrency=concurrency, stop_event=self._stop
        )
        assert self._done == count, self._done


class Stdlib:
    """The same operations as plain SQL on the stdlib sqlite3 module: WAL,
    synchronous=NORMAL, BEGIN IMMEDIATE, a partial index for ready jobs,
    claim as one UPDATE ... RETURNING, ack as DELETE."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS jobs (
        id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT NOT NULL,
        state TEXT NOT NULL, priority INTEGER NOT NULL, run_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0, worker TEXT, lease_until INTEGER);
    CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (queue, priority DESC, run_at, id)
        WHERE state = 'ready';
    """

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=10)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.executescript(self.SCHEMA)

    def _insert(self, ps) -> None:
        now = int(time.time() * 1000)
        self.conn.executemany(
            "INSERT INTO jobs (queue, payload, state, priority, run_at) "
            "VALUES ('bench', ?, 'ready', 0, ?)",
            [(json.dumps(p), now) for p in ps],
        )

    def enqueue_one(self, p) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self._insert([p])
        self.conn.execute("COMMIT")

    def enqueue_batch(self, ps) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self._insert(ps)
        self.conn.execute("COMMIT")

    def claim_ack(self, n: int) -> int:
        now = int(time.time() * 1000)
        self.conn.execute("BEGIN IMMEDIATE")
        rows = self.conn.execute(
            "UPDATE jobs SET state = 'running', worker = ?, lease_until = ?, "
            "attempts = attempts + 1 WHERE id IN (SELECT id FROM jobs WHERE queue = 'bench' "
            "AND state = 'ready' AND run_at <= ? ORDER BY priority DESC, run_at, id LIMIT ?) "
            "RETURNING id, payload",
            (WORKER, now + 60_000, now, n),
        ).fetchall()
        self.conn.execute("COMMIT")
        [json.loads(p) for _, p in rows]
        if rows:
            ids = [r[0] for r in rows]
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(
                f"DELETE FROM jobs WHERE id IN ({','.join('?' * len(ids))}) AND worker = ?",
                [*ids, WORKER],
            )
            self.conn.execute("COMMIT")
        return len(rows)

    async def consume(self, count: int, on_job) -> None:
        # No wake-ups in plain SQLite: poll every millisecond.
        while count:
            now = int(time.time() * 1000)
            self.conn.execute("BEGIN IMMEDIATE")
            rows = self.conn.execute(
                "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE queue = 'bench' "
                "AND state = 'ready' AND run_at <= ? ORDER BY priority DESC, run_at, id "
                "LIMIT 1) RETURNING payload",
                (now,),
            ).fetchall()
            self.conn.execute("COMMIT")
            for (p,) in rows:
                on_job(json.loads(p))
                count -= 1
            if not rows:
                await asyncio.sleep(0.001)

    consume_sync = None


LIBRARIES = {"honker": Honker, "honker024": Honker024, "stdlib": Stdlib}


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    library, workload, path, count = (
        sys.argv[1],
        sys.argv[2],
        sys.argv[3],
        int(sys.argv[4]),
    )
    lib = LIBRARIES[library](path)
    out: dict = {}
    if workload == "fill":  # setup for the claim workloads
        for start in range(0, count, 1000):
            lib.enqueue_batch(
                [payload(i) for i in range(start, min(count, start + 1000))]
            )
    elif workload == "W1":
        out["seconds"] = timed(
            lambda: [lib.enqueue_one(payload(i)) for i in range(count)]
        )
        out["ops"] = count
    elif workload == "W2":
        batch = [payload(i) for i in range(1000)]
        out["seconds"] = timed(lambda: [lib.enqueue_batch(batch) for _ in range(count)])
        out["ops"] = count * 1000
    elif workload in ("W3", "W4", "drain"):
        n = {"W3": 1, "W4": 32, "drain": 32}[workload]
        done = 0

        def run() -> None:
            nonlocal done
            while True:
                got = lib.claim_ack(n)
                if not got:
                    return
                done += got

        if workload == "drain":
            # W5: start together once every drainer is open, so the figure
            # is the drain and not four interpreters starting up.
            print("ready", flush=True)
            sys.stdin.readline()
            out["start"] = time.monotonic()
        out["seconds"] = timed(run)
        out["end"] = time.monotonic()
        out["ops"] = done
    elif workload in ("W6", "W6-sync"):
        # Idle first: CPU used by a consumer waiting with nothing to do.
        idle_s = float(os.environ.get("HONKER_BENCH_IDLE_S", "3"))
        cpu0, wall0 = time.process_time(), time.monotonic()

        async def idle() -> None:
            consumer = asyncio.ensure_future(lib.consume(1, lambda p: None))
            await asyncio.sleep(idle_s)
            consumer.cancel()
            try:
                await consumer
            except asyncio.CancelledError:
                pass

        asyncio.run(idle())
        out["idle_cpu_percent"] = (
            100 * (time.process_time() - cpu0) / (time.monotonic() - wall0)
        )
        latencies: list[float] = []

        def on_job(p) -> None:
            latencies.append(time.monotonic() - p["t"])

        print("ready", flush=True)  # the producer starts now
        if workload == "W6-sync":
            lib.consume_sync(count, on_job)
        else:
            asyncio.run(lib.consume(count, on_job))
        out["latencies_ms"] = sorted(x * 1000 for x in latencies)
    elif workload.startswith("W7-"):
        # The worker runtime with a no-op handler: jobs/s, and how late a
        # 5 ms timer on the same event loop fires meanwhile (loop lag).
        lib.fill_tasks(count)
        lags: list[float] = []

        async def run() -> float:
            async def tick() -> None:
                while True:
                    t = time.perf_counter()
                    await asyncio.sleep(0.005)
                    lags.append((time.perf_counter() - t - 0.005) * 1000)

            ticker = asyncio.ensure_future(tick())
            t0 = time.perf_counter()
            if workload == "W7-hand":
                await lib.run_hand_loop(count)
            else:
                await lib.run_worker(int(workload.split("-")[1]), count)
            elapsed = time.perf_counter() - t0
            ticker.cancel()
            return elapsed

        out["seconds"] = asyncio.run(run())
        out["ops"] = count
        lags.sort()
        out["lag_p99_ms"] = (
            lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else 0.0
        )
    elif workload == "W6-producer":
        for i in range(count):
            lib.enqueue_one({"t": time.monotonic(), "i": i})
            time.sleep(0.005)  # the consumer is idle again before the next
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
