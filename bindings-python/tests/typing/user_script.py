"""A user's script over the whole queue API, type-checked with
`mypy --strict` against the installed wheel by the test command (type
checkers must see honker's types: py.typed and the stubs ship in it).
It is also run, so it must work as well as type-check."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import sys
import tempfile
from pathlib import Path

import honker


def main(path: Path) -> None:
    clock = honker.ManualClock(now=1_700_000_000)
    # The Honker importer on a file with nothing to import changes nothing.
    sqlite3.connect(path).close()
    imported: dict[str, object] = honker.import_honker(path, dry_run=True)
    assert imported["found"] == []
    db: honker.Database = honker.open(path, busy_timeout=5.0, clock=clock)
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT)")
    emails: honker.Queue = db.queue("emails", lease=30, max_attempts=5)

    with db.transaction() as tx:
        tx.execute("INSERT INTO orders (status) VALUES (?)", ["paid"])
        first: honker.Enqueued = emails.enqueue({"to": "a@example.com"}, tx=tx, priority=1)
    later = emails.enqueue_many(["b", "c"], delay=dt.timedelta(seconds=5))
    assert isinstance(first.id, int) and isinstance(later[0].existing, bool)

    jobs: list[honker.Job] = emails.claim_batch("worker-1", 10, lease=60)
    for job in jobs:
        expires: dt.datetime = job.heartbeat(extend=30)
        assert expires > job.created_at
        with job.keep_alive(every=10) as beat:
            job.ack(result={"sent": True})
        assert beat.lost is False
    result = emails.get_result(first.id)
    info: honker.JobInfo = emails.get_job(later[0].id)
    stats: honker.QueueStats = emails.stats()
    assert result == {"sent": True} and info.state == "scheduled" and stats.scheduled == 2

    clock.advance(10)
    retried = emails.claim_batch("worker-1", 1)[0]
    state: str = retried.retry(delay=1, error="smtp down")
    clock.advance(2)
    again = emails.claim_batch("worker-1", 1)[0]
    again.fail("bounced")
    dead = emails.dead_letters(limit=10)
    assert state == "scheduled" and dead[0].last_error == "bounced"
    assert emails.requeue_dead(dead[0].id) is True
    assert emails.cancel(dead[0].id, reason="customer left") is True
    purged: int = emails.purge_dead()

    rows: list[tuple[object, ...]] = db.query("SELECT status FROM orders")
    columns, _ = db.query_columns("SELECT id FROM orders")
    report: dict[str, int] = db.maintain()
    assert rows == [("paid",)] and columns == ["id"] and purged >= 0 and isinstance(report, dict)

    async def worker() -> int:
        async with db.transaction_async() as tx:
            await emails.enqueue_async("async", tx=tx)
        done = 0
        async for job in emails.claim("worker-2", batch=4, wait=0.1):
            async with job.keep_alive():
                await job.ack_async()
            done += 1
            break
        return done

    assert asyncio.run(worker()) == 1

    runner = honker.Worker(db, concurrency=2, worker_id="typed", grace=1.0)
    events: list[honker.WorkerEvent] = []
    runner.on("success", events.append)
    runner.on("success", lambda _: runner.stop())

    @runner.task("tasks", task="double", timeout=5, lease=30)
    def double(job: honker.Job) -> int:
        if job.cancelled:
            raise honker.Snooze(1)
        if job.attempts > 3:
            raise honker.Permanent("too many")
        return int(job.payload["args"]) * 2

    @runner.task("tasks", task="later")
    async def later_task(job: honker.Job) -> None:
        raise honker.Retry("not yet", delay=dt.timedelta(seconds=1))

    tasks = db.queue("tasks")
    doubled = tasks.enqueue({"task": "double", "args": 21}).id
    runner.run(signals=False)
    assert tasks.get_result(doubled) == 42 and events[0].seconds is not None
    assert callable(later_task) and runner.queues == ["tasks"]
    try:
        emails.enqueue(float("nan"))
    except honker.InvalidArgument as e:
        code: str = e.code
        assert code == "INVALID_ARGUMENT"
    orders = db.stream("orders")
    with db.transaction() as tx:
        at: int = orders.publish({"order": 1}, key="o-1", tx=tx)
    offsets: list[int] = orders.publish_many([2, 3])
    with orders.subscribe("billing", start="beginning", auto_commit=False) as sub:
        event: honker.Event | None = sub.next(wait=0)
        assert event is not None and event.offset == at and event.key == "o-1"
        sub.commit(event)
    sinfo: honker.StreamInfo = orders.info()
    assert sinfo.last_offset == offsets[-1] and sinfo.consumers[0].next_offset == 2
    orders.set_retention(max_age=dt.timedelta(days=1), max_count=None)
    kept: honker.StreamRetention = orders.retention()
    assert kept.max_age == 86400.0
    with db.listen("cache", wait=0.5) as listener:
        nid: int = db.notify("cache", {"evict": 1})
        note: honker.Notification | None = listener.next()
        assert note is not None and note.id == nid and note.payload == {"evict": 1}
    try:
        orders.subscribe("x", start=1).close()  # raises Trimmed below retention
    except honker.Trimmed as t:
        missed: int = t.missed
        assert missed >= 0
    billing: honker.Group = orders.group("billing")
    billing.create(start="beginning", max_deliveries=3, lease=dt.timedelta(seconds=30))
    claimed: honker.GroupClaim = billing.claim("member-1", 2)
    assert claimed.missed == 0 and claimed[0].deliveries == 1
    claimed[0].ack()
    died: bool = claimed[1].retry(delay=0, error="flaky")
    assert not died
    with billing.consume("member-1", batch=2, wait=0.5) as consumer:
        ge: honker.GroupEvent | None = consumer.next(wait=0)
        assert ge is not None and ge.offset == claimed[1].offset
        ge.fail("poison")
    dead_events: list[honker.GroupDeadLetter] = billing.dead()
    ginfo: honker.GroupInfo = billing.info()
    assert dead_events[0].last_error == "poison" and ginfo.dead == 1
    assert ginfo.options.max_deliveries == 3 and orders.info().groups[0].group == "billing"
    lock: honker.Lock = db.lock("reindex")
    grant: honker.LockGrant | None = lock.try_acquire("w1", ttl=dt.timedelta(seconds=30))
    assert grant is not None and lock.release(grant.token)
    with lock.hold("w1", ttl=30, wait=1) as held:
        with db.transaction() as ftx:
            held.fence(ftx)
        lost: bool = held.lost
        assert not lost
    holder: honker.LockInfo | None = lock.info()
    assert holder is None
    mail: honker.RateLimiter = db.rate_limiter("mail", limit=100, per=60, burst=10)
    decision: honker.RateDecision = mail.try_acquire("customer-42", cost=2)
    retry_after: float = decision.retry_after
    assert decision.allowed and retry_after == 0 and mail.params().burst == 10
    sched: honker.Scheduler = db.scheduler()
    changed: bool = sched.add(
        "nightly", "30 2 * * *", "reports", {"kind": "nightly"}, time_zone="Europe/Berlin"
    )
    assert changed and not sched.add(
        "nightly", "30 2 * * *", "reports", {"kind": "nightly"}, time_zone="Europe/Berlin"
    )
    synced: honker.SyncReport = sched.sync(
        [honker.Schedule("nightly", "30 2 * * *", "reports", {"kind": "nightly"}, "Europe/Berlin")]
    )
    assert synced.removed == []
    nightly: honker.ScheduleInfo | None = sched.get("nightly")
    assert nightly is not None and nightly.next_fire_at is not None and nightly.missed == 0
    upcoming: list[dt.datetime] = sched.next_fires("nightly", 2)
    fired: list[honker.Fire] = sched.tick()
    assert len(upcoming) == 2 and fired == []
    conn = sqlite3.connect(":memory:")
    ext: str = honker.extension_path()
    assert ext.endswith(".so") and conn is not None
    db.close()
    print("typed user script ok,", honker.__version__)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as d:
            main(Path(d) / "app.db")
