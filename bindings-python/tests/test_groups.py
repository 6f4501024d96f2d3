"""Consumer groups through Python: competing members, each event handled by
one of them under a lease and a token; per-key order; retries, dead letters
and re-drive; fenced late outcomes; iterators (sync and async,
cancellation losing nothing); another process; and typed errors that change
nothing. Mirrors core/tests/groups.rs; the cases every surface shares (the
ack in the caller's transaction, the poison event, a lapsed lease) are
tests-interop's group_outbox, group_lease_lapse and consumer_group."""

from __future__ import annotations

import asyncio
import datetime as dt
import subprocess
import sys
import threading
import time

import honker
import pytest
from conftest import stop_when


def group_rows(db: honker.Database) -> list:
    """Everything a group stores, to prove a failed call changed nothing."""
    return [
        db.query(f"SELECT * FROM {t} ORDER BY 1, 2")
        for t in (
            "_honker_stream_groups",
            "_honker_stream_group_events",
            "_honker_stream_group_members",
        )
    ]


def test_members_compete_and_each_event_goes_to_one_of_them(db):
    s = db.stream("orders")
    s.publish_many([{"n": i} for i in range(6)])
    g = s.group("billing")
    assert g.create() == 1
    a = g.claim("a", 4)
    b = g.claim("b", 4)
    assert [e.offset for e in a] == [1, 2, 3, 4]
    assert [e.offset for e in b] == [5, 6]
    assert a.missed == 0 and isinstance(a, honker.GroupClaim)
    first = a[0]
    assert (first.payload, first.key, first.deliveries) == ({"n": 0}, None, 1)
    assert isinstance(first.created_at, dt.datetime) and first.group is g
    assert first.lease_expires_at > first.created_at
    info = g.info()
    assert (info.next_offset, info.lag, info.pending, info.delivered, info.dead) == (7, 6, 6, 6, 0)
    assert {m.member: m.holds for m in info.members} == {"a": 4, "b": 2}
    assert info.options == honker.GroupOptions(5, 60.0, 86400.0)
    for e in [*a, *b]:
        e.ack()
    assert g.claim("a", 10) == []
    info = g.info()
    assert (info.lag, info.pending, info.oldest_pending_age) == (0, 0, None)
    # The stream's info lists the group; a second group is independent.
    s.group("search").create(start="latest")
    assert [(gi.group, gi.next_offset) for gi in s.info().groups] == [
        ("billing", 7),
        ("search", 7),
    ]


def test_a_group_event_carries_its_priority(db):
    s = db.stream("alerts")
    s.publish({"n": 1}, priority=3)
    g = s.group("pagers")
    g.create()
    [e] = g.claim("a")
    assert (e.offset, e.priority) == (1, 3)


def test_create_is_idempotent_keeps_the_place_and_takes_new_options(db):
    s = db.stream("orders")
    s.publish_many([1, 2, 3])
    g = s.group("g")
    assert g.create(2, max_deliveries=3, lease=30) == 2
    assert g.create(start="beginning", max_deliveries=7) == 2  # the place is kept
    assert g.info().options == honker.GroupOptions(7, 60.0, 86400.0)
    assert asyncio.run(g.create_async(lease=dt.timedelta(seconds=5))) == 2
    assert g.info().options == honker.GroupOptions(5, 5.0, 86400.0)  # not given: defaults
    assert g.delete() is True
    assert g.delete() is False
    with pytest.raises(honker.NotFound):
        g.claim("m")


def test_heartbeat_extends_and_release_gives_back_without_counting(db, clock):
    s = db.stream("orders")
    s.publish("work")
    g = s.group("g")
    g.create(lease=10)
    [e] = g.claim("m")
    clock.advance(8)
    new_end = e.heartbeat(30)
    assert e.lease_expires_at == new_end
    assert new_end == dt.datetime.fromtimestamp(clock.now() + 30, tz=dt.timezone.utc)
    clock.advance(20)  # past the first lease, inside the renewed one
    assert g.claim("other") == []
    e.release()
    [back] = g.claim("other")
    assert back.deliveries == 1  # the release did not count a delivery


def test_dead_letters_are_listed_and_redriven(db):
    # The poison event dying at its last delivery while the rest flows, and
    # an ack in the caller's transaction: tests-interop's group_outbox.
    s = db.stream("orders")
    s.publish("poison", key="k")
    g = s.group("g")
    g.create(max_deliveries=1)
    [poison] = g.claim("m", 10)
    assert poison.retry(error="boom") is True  # its last delivery: dead
    [dead] = g.dead()
    assert (dead.offset, dead.payload, dead.deliveries, dead.last_error) == (
        1,
        "poison",
        1,
        "boom",
    )
    assert isinstance(dead.died_at, dt.datetime)
    assert g.info().dead == 1
    g.redrive(1)
    [redriven] = g.claim("m")
    assert (redriven.offset, redriven.deliveries) == (1, 1)
    redriven.fail("still broken")
    assert [d.last_error for d in g.dead()] == ["still broken"]
    assert g.redrive_all() == 1
    assert g.dead() == []
    with pytest.raises(honker.NotFound):
        g.redrive(3)


def test_ack_many_and_outcomes_by_offset_and_token_from_another_surface(db, clock):
    s = db.stream("orders")
    s.publish_many(range(4))
    g = s.group("g")
    g.create()
    got = g.claim("m", 4)
    # All or none: one stale token acks nothing.
    with pytest.raises(honker.LeaseLost):
        g.ack_many([got[0], (got[1].offset, "not-the-token")])
    assert g.info().delivered == 4
    g.ack_many([got[0], (got[1].offset, got[1].token)])
    g.ack((got[2].offset, got[2].token))  # as a Node or SQL claimer hands it over
    end = g.heartbeat((got[3].offset, got[3].token), 30)
    assert end == dt.datetime.fromtimestamp(clock.now() + 30, tz=dt.timezone.utc)
    g.release((got[3].offset, got[3].token))
    [back] = g.claim("m")
    assert g.retry((back.offset, back.token), error="flaky") is False
    [back] = g.claim("m")
    g.fail((back.offset, back.token), "poison")
    assert [d.offset for d in g.dead()] == [4]
    info = g.info()
    assert (info.pending, info.dead) == (0, 1)
    with pytest.raises(honker.InvalidArgument):
        g.ack_many([("1", "t")])  # type: ignore[list-item]


def test_a_consumer_iterates_acks_and_releases_its_buffer_on_close(db):
    s = db.stream("orders")
    s.publish_many(range(10))
    g = s.group("g")
    g.create()
    got = []
    with g.consume("m", batch=4) as consumer:
        for event in consumer:
            got.append(event.payload)
            event.ack()
            if len(got) == 5:
                break
        # Claimed 8 (two batches), handed out 5: three are buffered.
        assert consumer._native.buffered == 3
    assert consumer.closed
    assert got == [0, 1, 2, 3, 4]
    info = g.info()
    # The buffer went back (pending, not delivered); 9 and 10 were never taken in.
    assert (info.pending, info.delivered, info.lag) == (3, 0, 5)
    [e] = g.claim("other")
    assert (e.offset, e.deliveries) == (6, 1)  # released: no delivery counted


def test_a_consumer_polling_an_idle_group_takes_no_write_lock(db, path):
    s = db.stream("orders")
    g = s.group("g")
    g.create()
    consumer = g.consume("m")
    # Another connection holds the write lock: an idle poll still answers.
    other = honker.open(path)
    with other.transaction() as tx:
        tx.execute("INSERT INTO orders (id) VALUES (1)")
        assert consumer.next(wait=0) is None
    s.publish("now")
    assert consumer.next(wait=0).payload == "now"
    consumer.close()
    other.close()


def test_sync_iteration_wakes_on_a_publish_from_another_thread(db):
    s = db.stream("orders")
    g = s.group("g")
    g.create()
    consumer = g.consume("m", wait=5)

    def later() -> None:
        time.sleep(0.2)
        s.publish("woke")

    t = threading.Thread(target=later)
    t.start()
    started = time.monotonic()
    event = next(iter(consumer))
    t.join()
    assert event.payload == "woke"
    assert time.monotonic() - started < 4  # woken, not timed out
    event.ack()
    consumer.close()


def test_async_iteration_and_cancellation_lose_nothing(db, async_waits):
    s = db.stream("orders")
    g = s.group("g")
    g.create()

    async def main() -> list[int]:
        got: list[int] = []
        async with g.consume("async", wait=5) as consumer:
            waiting = asyncio.ensure_future(consumer.__anext__())
            await asyncio.sleep(0.1)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await s.publish_many_async([1, 2, 3])
            async for event in consumer:
                got.append(event.payload)
                await event.ack_async()
                if len(got) == 3:
                    break
        claimed = await g.claim_async("other", 5)
        assert claimed == []
        return got

    assert asyncio.run(main()) == [1, 2, 3]
    assert g.info().pending == 0


def test_a_consumer_behind_age_retention_gets_trimmed_then_goes_on(db, clock):
    s = db.stream("metrics")
    s.set_retention(max_age=60)
    g = s.group("slow")
    g.create()
    s.publish_many(range(5))
    clock.advance(120)
    s.publish_many([5, 6])
    assert s.trim() == 5
    consumer = g.consume("m")
    with pytest.raises(honker.Trimmed) as trimmed:
        consumer.next(wait=0)
    assert trimmed.value.missed == 5
    assert [consumer.next(wait=0).payload for _ in range(2)] == [5, 6]
    consumer.close()


MEMBER = """
import honker, sys
db = honker.open(sys.argv[1])
g = db.stream("orders").group("g")
n = int(sys.argv[2])
for event in g.consume(sys.argv[3], batch=5, wait=10):
    print(event.offset, flush=True)
    event.ack()
    n -= 1
    if n == 0:
        break
db.close()
"""


def test_members_in_other_processes_share_the_events_each_once(path):
    db = honker.open(path)
    s = db.stream("orders")
    g = s.group("g")
    g.create()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MEMBER, str(path), "30", f"member-{i}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for start in range(0, 60, 10):
        s.publish_many([{"i": i} for i in range(start, start + 10)])
    seen = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        seen += [int(line) for line in out.split()]
    # Together they handled all 60, each exactly once (each stops at 30).
    assert sorted(seen) == list(range(1, 61))
    assert g.info().pending == 0
    db.close()


def test_bad_input_is_a_typed_error_and_changes_nothing(db):
    s = db.stream("orders")
    s.publish("kept")
    g = s.group("g")
    g.create()
    [held] = g.claim("m")
    before = group_rows(db)
    for name in ("", "x" * 1000, "nul\0"):
        with pytest.raises(honker.InvalidArgument):
            s.group(name)
        with pytest.raises(honker.InvalidArgument):
            g.claim(name)
        with pytest.raises(honker.InvalidArgument):
            g.consume(name)
    for bad in (
        lambda: g.create(max_deliveries=0),
        lambda: g.create(max_deliveries=1001),
        lambda: g.create(max_deliveries=-1),
        lambda: g.create(lease=0),
        lambda: g.create(lease=-5),
        lambda: g.create(lease=float("inf")),
        lambda: g.create(lease=86401),
        lambda: g.create(member_idle=0.5),
        lambda: g.create(start="middle"),
        lambda: g.claim("m", 0),
        lambda: g.claim("m", 10_001),
        lambda: g.claim("m", -1),
        lambda: g.claim("m", lease=0),
        lambda: g.claim("m", wait=-1),
        lambda: g.claim("m", wait=float("nan")),
        lambda: held.retry(delay=-1),
        lambda: held.heartbeat(0),
        lambda: g.consume("m", batch=0),
        lambda: g.consume("m", wait=0),
        lambda: g.dead(limit=-1),
        lambda: g.remove_member("m", force="yes"),  # type: ignore[arg-type]
    ):
        with pytest.raises(honker.InvalidArgument):
            bad()
    with pytest.raises(honker.InvalidArgument):
        s.group("g2").create(start=5)  # past the end (one past the last is 2)
    assert group_rows(db) == before
    held.ack()


# ----- the worker runtime running a group's events -------------------------


def test_a_worker_runs_a_groups_events_in_key_order_beside_a_queue(path):
    db = honker.open(path)
    s = db.stream("orders")
    g = s.group("billing")
    g.create(max_deliveries=2)
    for i in range(30):
        s.publish({"i": i}, key=f"order-{i % 3}")
    s.publish("poison")
    db.queue("emails").enqueue_many([{"n": n} for n in range(5)])
    w = honker.Worker(db, concurrency=6)
    lock = threading.Lock()
    running: dict[str, int] = {}
    by_key: dict[str, list[int]] = {}
    overlap, mailed, events = [], [], []

    @w.task(stream="orders", group="billing")
    def bill(event: honker.GroupEvent) -> str:
        if event.payload == "poison":
            raise ValueError("cannot bill this")
        assert not event.cancelled and event.deliveries == 1
        with lock:
            running[event.key] = running.get(event.key, 0) + 1
            if running[event.key] > 1:
                overlap.append(event.key)
        time.sleep(0.002)
        with lock:
            running[event.key] -= 1
            by_key.setdefault(event.key, []).append(event.offset)
        return "ignored: a group keeps no results"

    @w.task("emails")
    def mail(job: honker.Job) -> None:
        mailed.append(job.payload["n"])

    w.on("success", events.append)
    w.on("retry", events.append)
    assert (w.queues, w.groups) == (["emails"], [("orders", "billing")])
    stop_when(w, lambda: len(mailed) == 5 and g.info().pending == 0 and g.info().dead == 1)
    w.run(signals=False)
    assert overlap == []  # never two events of one key at once
    for k in range(3):
        assert by_key[f"order-{k}"] == [1 + k + 3 * i for i in range(10)]
    assert sorted(mailed) == [0, 1, 2, 3, 4]
    [dead] = g.dead()
    assert (dead.offset, dead.deliveries) == (31, 2)
    assert "cannot bill this" in (dead.last_error or "")
    billed = [e for e in events if e.group == "billing"]
    assert len([e for e in billed if e.kind == "success"]) == 30
    # Its last delivery's failure is a retry whose new state is dead. (Each
    # handler thread reports its own outcome: the two reports can arrive in
    # either order, though the second delivery came after the first retry.)
    assert sorted(
        (e.queue, e.job_id, e.attempts, e.state) for e in billed if e.kind == "retry"
    ) == [
        ("orders", 31, 1, "ready"),
        ("orders", 31, 2, "dead"),
    ]
    assert all(e.group is None for e in events if e.queue == "emails")
    db.close()


def test_async_group_handlers_and_a_handler_that_acks_in_its_own_transaction(path):
    db = honker.open(path)
    db.execute("CREATE TABLE projected (offset INTEGER PRIMARY KEY)")
    s = db.stream("orders")
    g = s.group("projector")
    g.create()
    s.publish_many(list(range(10)))
    w = honker.Worker(db, concurrency=3)
    kinds: list[str] = []

    @w.task(stream="orders", group=g)
    async def project(event: honker.GroupEvent) -> None:
        await asyncio.sleep(0)
        if event.offset % 2:
            # Exactly-once local effect: the row and the ack commit together.
            async with db.transaction_async() as tx:
                await tx.execute_async("INSERT INTO projected VALUES (?)", [event.offset])
                await event.ack_async(tx=tx)

    w.on("success", lambda e: kinds.append(e.kind))
    w.on("settled", lambda e: kinds.append(e.kind))
    stop_when(w, lambda: g.info().pending == 0 and g.info().lag == 0)
    w.run(signals=False)
    assert db.query("SELECT count(*) FROM projected") == [(5,)]
    assert sorted(kinds) == ["settled"] * 5 + ["success"] * 5
    db.close()


def test_registering_a_group_checks_its_arguments(db):
    w = honker.Worker(db)
    with pytest.raises(honker.NotFound):
        w.task(stream="orders", group="missing")(lambda e: None)
    g = db.stream("orders").group("g")
    g.create()
    for bad in (
        lambda: w.task()(print),
        lambda: w.task(stream="orders")(print),
        lambda: w.task("emails", stream="orders", group="g")(print),
        lambda: w.task(stream="orders", group="g", task="x")(print),
        lambda: w.task(stream="other", group=g)(print),
        lambda: w.register_group("g", print),  # type: ignore[arg-type]
        lambda: w.register_group(g, "not callable"),  # type: ignore[arg-type]
        lambda: w.task(stream="orders", group="g", lease=0)(print),
    ):
        with pytest.raises(honker.InvalidArgument):
            bad()
    w.task(stream="orders", group="g")(print)
    with pytest.raises(honker.InvalidArgument):
        w.task(stream="orders", group="g")(print)  # one handler per group
