"""Transactions belong to their context, not to the thread (issue 16 §1): while
one task's ``async with db.transaction_async()`` awaits a slow API call, every
other task, the in-process worker's acks and plain writes wait their turn off
the event loop and on no thread, in order, and none fails."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time

import honker
import pytest


class Ticker:
    """A 10 ms timer on the loop: the loop is blocked when it stops ticking."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now

    async def stop(self) -> tuple[float, float, int]:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        g = sorted(self.gaps)
        return g[-1], g[int(len(g) * 0.99)], len(g)


async def hold_writer(db: honker.Database) -> tuple[asyncio.Event, asyncio.Future]:
    """Starts a task whose transaction holds the writer until the returned
    event is set; returns once it holds it."""
    began, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with db.transaction_async():
            began.set()
            await release.wait()

    holding = asyncio.ensure_future(holder())
    await began.wait()
    return release, holding


async def post(port: int, body: dict) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    writer.write(
        b"POST /orders HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        + f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, text = raw.decode().partition("\r\n\r\n")
    return int(head.split()[1]), text


def order_server(db: honker.Database, emails: honker.Queue, stream: honker.Stream | None = None):
    """The web app: each POST /orders inserts an order and enqueues its email
    (and, with ``stream``, publishes its event and notifies the dashboard) in
    one transaction that awaits the payment API meanwhile."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.decode().lower().split("content-length:")[1].split("\r\n")[0])
        body = json.loads(await reader.readexactly(length))
        try:
            async with db.transaction_async() as tx:
                tx.execute("INSERT INTO orders (customer) VALUES (?)", [body["customer"]])
                [(order,)] = tx.query("SELECT last_insert_rowid()")
                await asyncio.sleep(random.uniform(0.005, 0.02))  # the payment API
                await emails.enqueue_async({"order": order}, tx=tx)
                if stream is not None:
                    await stream.publish_async({"order": order}, tx=tx)
                    await db.notify_async("dashboard", {"order": order}, tx=tx)
            status, text = 200, json.dumps({"id": order})
        except honker.HonkerError as e:
            status, text = 500, str(e)
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(text)}\r\n\r\n{text}".encode())
        await writer.drain()
        writer.close()

    return handle


async def place_orders(
    db: honker.Database, emails: honker.Queue, requests: int, stream: honker.Stream | None = None
) -> None:
    """Serves the app and posts ``requests`` orders, 64 at a time: every one
    succeeds, with ids 1..requests."""
    app = order_server(db, emails, stream)
    server = await asyncio.start_server(app, "127.0.0.1", 0, backlog=256)
    port = server.sockets[0].getsockname()[1]
    gate = asyncio.Semaphore(64)

    async def one(i: int) -> tuple[int, str]:
        async with gate:
            return await post(port, {"customer": f"c{i}"})

    responses = await asyncio.gather(*(one(i) for i in range(requests)))
    server.close()
    await server.wait_closed()
    assert [r for r in responses if r[0] != 200] == []
    ids = sorted(json.loads(text)["id"] for _, text in responses)
    assert ids == list(range(1, requests + 1))


def test_an_asyncio_server_with_400_requests_at_64_concurrent_and_an_in_process_worker(path):
    requests = 400
    db = honker.open(path)
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT)")
    emails = db.queue("emails")

    async def main() -> None:
        handled: list[int] = []

        async def worker() -> None:
            async for job in emails.claim("mailer", batch=8):
                await job.ack_async()
                handled.append(job.payload["order"])
                if len(handled) == requests:
                    return

        ticker = Ticker()
        working = asyncio.ensure_future(worker())
        await place_orders(db, emails, requests)
        await asyncio.wait_for(working, 60)
        worst, p99, ticks = await ticker.stop()

        assert sorted(handled) == list(range(1, requests + 1))
        assert worst < 0.25, f"the loop stalled for {worst * 1000:.1f} ms"
        print(f"event-loop lag, 64 concurrent transactions: p99 {p99 * 1000:.1f} ms, "
              f"worst {worst * 1000:.1f} ms over {ticks} ticks")  # fmt: skip

    asyncio.run(main())
    assert db.query("SELECT count(*) FROM orders") == [(requests,)]
    stats = emails.stats()
    assert (stats.ready, stats.running) == (0, 0)
    db.close()


def test_the_server_publishes_and_notifies_while_a_subscriber_and_listener_on_its_loop_keep_up(
    path,
):
    # 300 concurrent order transactions each publish an event and notify;
    # an auto-committing subscription and a listener on the same loop see
    # every one once, in commit order (offsets dense: no rolled-back gaps),
    # and the loop never stalls.
    requests = 300
    db = honker.open(path)
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT)")
    emails, orders = db.queue("emails"), db.stream("orders")

    async def main() -> None:
        events: list[tuple[int, int]] = []
        heard: list[int] = []
        listener = db.listen("dashboard")

        async def subscriber() -> None:
            async with orders.subscribe("projector", commit_every=50) as sub:
                async for event in sub:
                    events.append((event.offset, event.payload["order"]))
                    if len(events) == requests:
                        return

        async def listening() -> None:
            async for n in listener:
                heard.append(n.payload["order"])
                if len(heard) == requests:
                    return

        ticker = Ticker()
        tasks = [asyncio.ensure_future(subscriber()), asyncio.ensure_future(listening())]
        await place_orders(db, emails, requests, orders)
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        listener.close()
        worst, _, _ = await ticker.stop()
        assert [o for o, _ in events] == list(range(1, requests + 1))
        assert sorted(order for _, order in events) == list(range(1, requests + 1))
        # Commit order is the same for the stream and the channel.
        assert heard == [order for _, order in events]
        assert worst < 0.25, f"the loop stalled for {worst * 1000:.1f} ms"

    asyncio.run(main())
    assert orders.position("projector") == requests  # the last was handed out, then closed
    db.close()


def test_the_same_server_with_a_worker_runtime_on_its_loop_async_and_thread_handlers(path):
    """honker.Worker inside the web app's process and loop: an async handler
    records each email in its own transaction while requests keep arriving,
    a sync one (on the worker's threads) does the same for receipts; every
    order gets one email and one receipt, and the loop never stalls."""
    requests = 400
    db = honker.open(path)
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT)")
    db.execute("CREATE TABLE sent (job_id INTEGER, kind TEXT, order_id INTEGER)")
    emails, receipts = db.queue("emails"), db.queue("receipts")
    w = honker.Worker(db, concurrency=16)

    @w.task(emails, concurrency=8)
    async def send(job: honker.Job) -> None:
        await asyncio.sleep(random.uniform(0, 0.005))  # the mail API
        async with db.transaction_async() as tx:
            tx.execute("INSERT INTO sent VALUES (?, 'email', ?)", [job.id, job.payload["order"]])
            await receipts.enqueue_async({"order": job.payload["order"]}, tx=tx)

    @w.task(receipts, concurrency=4)
    def receipt(job: honker.Job) -> None:
        time.sleep(random.uniform(0, 0.002))
        with db.transaction() as tx:
            tx.execute("INSERT INTO sent VALUES (?, 'receipt', ?)", [job.id, job.payload["order"]])

    def finished() -> bool:
        [(n,)] = db.query("SELECT count(*) FROM sent WHERE kind = 'receipt'")
        return n == requests

    async def main() -> None:
        ticker = Ticker()
        running = asyncio.ensure_future(w.run_async())
        await place_orders(db, emails, requests)
        deadline = time.monotonic() + 60
        while not finished() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        w.stop()
        await running
        worst, p99, ticks = await ticker.stop()
        assert worst < 0.25, f"the loop stalled for {worst * 1000:.1f} ms"
        print(f"event-loop lag, 64 concurrent requests and a Worker: p99 {p99 * 1000:.1f} ms, "
              f"worst {worst * 1000:.1f} ms over {ticks} ticks")  # fmt: skip

    asyncio.run(main())
    for kind in ("email", "receipt"):
        rows = db.query("SELECT order_id FROM sent WHERE kind = ? ORDER BY 1", [kind])
        assert [r[0] for r in rows] == list(range(1, requests + 1)), kind
    for q in (emails, receipts):
        stats = q.stats()
        assert (stats.ready, stats.scheduled, stats.running, stats.dead) == (0, 0, 0, 0)
    db.close()


def test_the_loop_ticks_while_a_worker_drains_10000_jobs_with_async_handlers(path):
    jobs = 10_000
    db = honker.open(path)
    q = db.queue("q")
    for start in range(0, jobs, 1000):
        q.enqueue_many([{"i": i} for i in range(start, start + 1000)])
    w = honker.Worker(db, concurrency=32)
    seen: set[int] = set()

    @w.task(q)
    async def handle(job: honker.Job) -> None:
        await asyncio.sleep(0)
        seen.add(job.payload["i"])
        if len(seen) == jobs:
            w.stop()

    async def main() -> None:
        ticker = Ticker()
        t0 = time.perf_counter()
        await asyncio.wait_for(w.run_async(), 120)
        took = time.perf_counter() - t0
        worst, p99, ticks = await ticker.stop()
        assert worst < 0.25, f"the loop stalled for {worst * 1000:.1f} ms"
        print(f"10,000 jobs in {took:.1f} s; loop lag p99 {p99 * 1000:.1f} ms, "
              f"worst {worst * 1000:.1f} ms over {ticks} ticks")  # fmt: skip

    asyncio.run(main())
    assert seen == set(range(jobs))
    stats = q.stats()
    assert (stats.ready, stats.running) == (0, 0)
    db.close()


def test_the_loop_ticks_while_a_transaction_holds_the_writer_2_s_and_100_tasks_wait(path):
    db = honker.open(path)
    q = db.queue("q")

    async def main() -> None:
        began, release = asyncio.Event(), asyncio.Event()

        async def holder() -> None:
            async with db.transaction_async() as tx:
                await q.enqueue_async("in the transaction", tx=tx)
                began.set()
                await release.wait()
                # The holder's own calls run on honker's threads while 100
                # others wait: waiters occupy none of them.
                for _ in range(40):
                    await tx.query_async("SELECT 1")

        holding = asyncio.ensure_future(holder())
        await began.wait()
        ticker = Ticker()
        waiting = [asyncio.ensure_future(q.enqueue_async(n)) for n in range(100)]
        await asyncio.sleep(2)
        assert not any(w.done() for w in waiting)
        release.set()
        await holding
        done = await asyncio.gather(*waiting)
        worst, _, ticks = await ticker.stop()
        assert [e.id for e in done] == [done[0].id + i for i in range(100)]  # in order
        assert ticks > 150
        assert worst < 0.25, f"the loop stalled for {worst * 1000:.1f} ms"

    asyncio.run(main())
    assert q.stats().ready == 101
    db.close()


def test_waiting_ends_at_the_busy_timeout_with_busy_and_changes_nothing(path):
    db = honker.open(path, busy_timeout=0.3)
    q = db.queue("q")

    async def main() -> None:
        release, holding = await hold_writer(db)
        started = time.monotonic()
        with pytest.raises(honker.Busy):
            await q.enqueue_async("async waiter")
        assert time.monotonic() - started >= 0.25
        # A sync waiter on another thread too.
        with pytest.raises(honker.Busy):
            await asyncio.to_thread(q.enqueue, "sync waiter")
        release.set()
        await holding
        await q.enqueue_async("after")

    asyncio.run(main())
    assert [j.payload for j in q.claim_batch("w", 10)] == ["after"]
    db.close()


def test_a_sync_call_on_the_loop_while_a_transaction_of_that_loop_holds_the_writer_fails_at_once(
    path,
):
    db = honker.open(path)
    q = db.queue("q")

    async def main() -> None:
        release, holding = await hold_writer(db)
        started = time.monotonic()
        with pytest.raises(honker.InvalidArgument, match="use the async form"):
            q.enqueue("sync, on the loop")  # would block the loop the holder needs
        with pytest.raises(honker.InvalidArgument):
            db.transaction()
        assert time.monotonic() - started < 0.5
        release.set()
        await holding
        q.enqueue("sync, writer free")  # fine when nothing holds it

    asyncio.run(main())
    assert q.stats().ready == 1
    db.close()


def test_a_write_of_the_same_context_without_tx_fails_at_once(path):
    db = honker.open(path)
    q = db.queue("q")

    async def main() -> None:
        async with db.transaction_async() as tx:
            with pytest.raises(honker.InvalidArgument, match="tx="):
                await q.enqueue_async("x")
            with pytest.raises(honker.InvalidArgument, match="tx="):
                async with db.transaction_async():
                    pass
            await q.enqueue_async("y", tx=tx)

    asyncio.run(main())
    with db.transaction() as tx:
        with pytest.raises(honker.InvalidArgument, match="tx="):
            q.enqueue("z")
        q.enqueue("w", tx=tx)
    assert sorted(j.payload for j in q.claim_batch("w", 10)) == ["w", "y"]
    db.close()


def test_sync_transactions_on_threads_and_async_ones_share_the_writer_in_order(path):
    db = honker.open(path)
    db.execute("CREATE TABLE log (who TEXT)")
    errors: list[BaseException] = []

    def thread_side(i: int) -> None:
        try:
            for _ in range(20):
                with db.transaction() as tx:
                    tx.execute("INSERT INTO log VALUES (?)", [f"t{i}"])
                    time.sleep(0.001)
        except BaseException as e:  # reported below
            errors.append(e)

    async def main() -> None:
        async def task_side(i: int) -> None:
            for _ in range(20):
                async with db.transaction_async() as tx:
                    await tx.execute_async("INSERT INTO log VALUES (?)", [f"a{i}"])
                    await asyncio.sleep(0.001)

        await asyncio.gather(*(task_side(i) for i in range(4)))

    threads = [threading.Thread(target=thread_side, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    asyncio.run(main())
    for t in threads:
        t.join()
    assert errors == []
    assert db.query("SELECT count(*) FROM log") == [(160,)]
    db.close()


def test_a_cancelled_waiter_leaves_the_writer_to_the_others(path):
    db = honker.open(path)
    q = db.queue("q")

    async def main() -> None:
        release, holding = await hold_writer(db)

        async def second() -> None:
            async with db.transaction_async() as tx:
                await q.enqueue_async("never", tx=tx)

        waiting = asyncio.ensure_future(second())
        later = asyncio.ensure_future(q.enqueue_async("later"))
        await asyncio.sleep(0.05)
        waiting.cancel()
        release.set()
        await holding
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await later
        await q.enqueue_async("last")

    asyncio.run(main())
    assert sorted(j.payload for j in q.claim_batch("w", 10)) == ["last", "later"]
    db.close()


def test_a_transaction_dropped_without_commit_rolls_back_and_frees_the_writer(path):
    db = honker.open(path)
    q = db.queue("q")
    tx = db.transaction()
    q.enqueue("dropped", tx=tx)
    del tx
    q.enqueue("kept")  # not stuck behind the dropped transaction
    assert [j.payload for j in q.claim_batch("w", 10)] == ["kept"]
    db.close()


@pytest.mark.parametrize("durability", ["normal", "full"])
def test_idle_async_waits_hold_no_thread_so_writes_and_wake_ups_go_on(path, durability):
    """A web app's long waits, well past honker's 32 pool threads: 64
    consumers, 40 lock waiters, 40 result waiters and 40 group members, each
    waiting 30 s. None holds a thread while it waits (each sleeps on the
    loop), so every write still goes through at once and each wait ends
    with the commit that ends it. Before, the first 32 waits took the pool:
    each enqueue_async stalled until one of them ran out (30 s here), and
    the 33rd consumer did not wait at all. A claim that finds work runs on
    the loop when it needs no waiting, on a thread under "full" (an fsync
    per commit)."""
    db = honker.open(path, durability=durability)
    q, results = db.queue("q"), db.queue("r")
    lock = db.lock("l")
    stream = db.stream("s")
    group = stream.group("g")
    group.create()
    held = lock.try_acquire("holder", ttl=60)
    assert held is not None

    async def first(tasks: list[asyncio.Task]) -> object:
        done, _ = await asyncio.wait(tasks, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1, "no wait ended within 10 s of the commit that ends it"
        return done.pop().result()

    async def main() -> None:
        got: asyncio.Queue[int] = asyncio.Queue()

        async def consumer(i: int) -> None:
            async for job in q.claim(f"w{i}", wait=30):
                await job.ack_async()
                await got.put(job.id)

        owed = results.enqueue_many([{"n": i} for i in range(40)])
        consumers = [asyncio.create_task(consumer(i)) for i in range(64)]
        lockers = [
            asyncio.create_task(lock.acquire_async(f"o{i}", ttl=60, wait=30)) for i in range(40)
        ]
        waiters = [asyncio.create_task(results.wait_result_async(e.id, timeout=30)) for e in owed]
        members = [asyncio.create_task(group.claim_async(f"m{i}", wait=30)) for i in range(40)]
        limiter = db.rate_limiter("rl", limit=1, per=20)
        assert limiter.try_acquire().allowed
        raters = [asyncio.create_task(limiter.acquire_async(wait=30)) for _ in range(40)]
        await asyncio.sleep(0.5)  # every wait has begun
        for n in range(5):
            e = await asyncio.wait_for(q.enqueue_async({"now": n}), 10)
            assert await asyncio.wait_for(got.get(), 10) == e.id
        await asyncio.wait_for(stream.publish_async({"e": 1}), 10)
        claim = await first(members)
        assert [ev.payload for ev in claim] == [{"e": 1}]  # type: ignore[attr-defined]
        lock.release(held.token)
        grant = await first(lockers)
        assert grant is not None and grant.token > held.token  # type: ignore[attr-defined]
        [job] = results.claim_batch("x", 1)
        await asyncio.wait_for(job.ack_async(result={"id": job.id}), 10)
        assert await first(waiters) == {"id": job.id}
        assert not any(t.done() for t in raters)  # waiting for the limit, holding no thread
        everyone = consumers + lockers + waiters + members + raters
        for t in everyone:
            t.cancel()
        await asyncio.gather(*everyone, return_exceptions=True)

    asyncio.run(main())
    db.close()
