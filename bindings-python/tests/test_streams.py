"""Streams with independent consumers, and notify/listen, through Python:
a consumer's commit inside the caller's transaction, each event once per
consumer, TRIMMED with the missed count, cancellation that loses nothing,
several processes, bounded memory, and typed errors that change nothing.
Publishing with the business row and what a listener hears are
tests-interop's stream_consumer and notify_listen, every surface."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import honker
import pytest
from honker import _loopwait


def events_of(db: honker.Database, stream: str) -> list[tuple]:
    return db.query(
        "SELECT offset, payload FROM _honker_stream_events WHERE stream = ? ORDER BY offset",
        [stream],
    )


def test_a_priority_is_stored_with_the_event_and_handed_to_its_readers(db):
    s = db.stream("alerts")
    s.publish({"n": 1})
    s.publish({"n": 2}, priority=9)
    asyncio.run(s.publish_async({"n": 3}, priority=-1))
    assert [(e.offset, e.priority) for e in s.read()] == [(1, 0), (2, 9), (3, -1)]
    with s.subscribe("pager") as sub:
        assert [sub.next(0.1).priority for _ in range(3)] == [0, 9, -1]
    # Not a 32-bit int: refused before anything is written.
    for bad in (2**31, "high", 1.5, True):
        with pytest.raises(honker.InvalidArgument, match="priority"):
            s.publish({"n": 4}, priority=bad)
    assert s.info().length == 3


def test_publish_many_read_pages_and_bytes_payloads(db):
    s = db.stream("log")
    assert s.publish_many([{"n": i} for i in range(5)]) == [1, 2, 3, 4, 5]
    assert s.publish(b"\x00\xffraw") == 6
    assert [e.offset for e in s.read(after=2, limit=2)] == [3, 4]
    assert s.read(after=5)[0].payload == b"\x00\xffraw"
    assert isinstance(s.read()[0].created_at, dt.datetime)
    assert s.read(after=6) == []


def test_events_and_notifications_are_read_only_values(db):
    s = db.stream("log")
    s.publish({"n": 1}, key="k")
    first, again = s.read()[0], s.read()[0]
    assert first == again and first is not again
    assert first.payload is first.payload  # decoded once, on first use
    assert repr(first).startswith("Event(offset=1, key='k', payload={'n': 1}, created_at=")
    for name, value in (("offset", 2), ("payload", {}), ("created_at", None), ("extra", 1)):
        with pytest.raises(AttributeError):
            setattr(first, name, value)
    s.publish({"n": 1}, key="k")
    assert s.read(after=1)[0] != first  # another offset (and time)
    assert first != (1, "k", {"n": 1})
    with pytest.raises(TypeError):
        hash(first)  # like a frozen dataclass holding a dict
    listener = db.listen("ch")
    db.notify("ch", [1])
    heard = listener.next(wait=1)
    assert heard is not None and (heard.seq, heard.payload) == (1, [1])
    assert repr(heard).startswith(f"Notification(id={heard.id}, seq=1, payload=[1], ")
    with pytest.raises(AttributeError):
        heard.seq = 2  # type: ignore[misc]
    listener.close()


def test_each_consumer_reads_every_event_once_in_order_from_its_own_place(db):
    s = db.stream("orders")
    s.publish_many(range(1, 6))
    with s.subscribe("billing", auto_commit=False) as billing:
        got = [billing.next(wait=0).payload for _ in range(3)]
        billing.commit(2)  # events up to 2 are processed: billing reads 3 next
    assert got == [1, 2, 3]
    assert s.position("billing") == 3
    with s.subscribe("billing", auto_commit=False) as billing:
        assert [billing.next(wait=0).offset for _ in range(3)] == [3, 4, 5]
        assert billing.next(wait=0) is None
    # Another consumer is independent and starts at the beginning. Closing
    # commits what it passed: the fifth event was handed out but not passed
    # (its handler may have failed), so it is read again (at-least-once).
    with s.subscribe("search") as search:
        assert [e.payload for e in (search.next(wait=0) for _ in range(5))] == [1, 2, 3, 4, 5]
    info = s.info()
    assert (info.length, info.first_offset, info.last_offset) == (5, 1, 5)
    assert {c.consumer: (c.next_offset, c.lag) for c in info.consumers} == {
        "billing": (3, 3),
        "search": (5, 1),
    }


def test_commit_inside_the_callers_transaction_rolls_back_with_it(db):
    db.execute("CREATE TABLE totals (n INTEGER)")
    s = db.stream("orders")
    s.publish_many([5, 7])
    sub = s.subscribe("projection", auto_commit=False)
    e = sub.next(wait=0)
    with pytest.raises(RuntimeError), db.transaction() as tx:
        tx.execute("INSERT INTO totals VALUES (?)", [e.payload])
        sub.commit(e, tx=tx)
        raise RuntimeError("crash before commit")
    assert s.position("projection") == 1
    assert db.query("SELECT n FROM totals") == []
    with db.transaction() as tx:
        tx.execute("INSERT INTO totals VALUES (?)", [e.payload])
        sub.commit(e, tx=tx)
    assert s.position("projection") == 2
    assert db.query("SELECT n FROM totals") == [(5,)]
    sub.close()


def test_auto_commit_every_n_events_and_at_close(db):
    s = db.stream("orders")
    s.publish_many(range(10))
    sub = s.subscribe("audit", commit_every=4, commit_interval=3600)
    for _ in range(6):
        sub.next(wait=0)
    # Six handed out; five processed (the sixth counts when the next is
    # asked for): one automatic commit after the fourth event passed.
    assert s.position("audit") == 5
    sub.close()
    assert s.position("audit") == 6
    assert sub.closed
    assert list(sub) == []


def test_start_positions(db, clock):
    s = db.stream("orders")
    s.publish_many(["a", "b"])
    clock.advance(60)
    s.publish("c")
    with s.subscribe("late", start="latest") as late:
        assert late.next(wait=0) is None
        s.publish("d")
        assert late.next(wait=0).payload == "d"
    with s.subscribe("mid", start=2) as mid:
        assert mid.next(wait=0).payload == "b"
    since = dt.datetime.fromtimestamp(clock.now() - 1, tz=dt.timezone.utc)
    with s.subscribe("since", start=since) as by_time:
        assert by_time.next(wait=0).payload == "c"
    # A stored place wins over start: "late" resumes at "d", which it was
    # handed but never passed.
    with s.subscribe("late", start="beginning") as late:
        assert late.next(wait=0).payload == "d"
        assert late.next(wait=0) is None
    assert s.position("late") == 5


def test_sync_iteration_wakes_on_a_publish_from_another_thread(db):
    s = db.stream("orders")
    sub = s.subscribe("t", wait=5)

    def later() -> None:
        time.sleep(0.2)
        s.publish("woke")

    t = threading.Thread(target=later)
    t.start()
    started = time.monotonic()
    event = next(iter(sub))
    t.join()
    assert event.payload == "woke"
    assert time.monotonic() - started < 4  # woken, not timed out
    sub.close()


def test_async_iteration_and_cancellation_lose_nothing(db, async_waits):
    s = db.stream("orders")

    async def main() -> list[int]:
        got: list[int] = []
        async with s.subscribe("async", wait=5) as sub:
            # A task waiting on an empty stream is cancelled mid-wait...
            waiting = asyncio.ensure_future(sub.__anext__())
            await asyncio.sleep(0.1)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            # ...and the event published next is still handed out, once.
            await s.publish_many_async([1, 2, 3])
            async for event in sub:
                got.append(event.payload)
                if len(got) == 3:
                    break
            await sub.commit_async(3)
        return got

    assert asyncio.run(main()) == [1, 2, 3]
    assert s.position("async") == 4


def test_a_consumer_behind_age_retention_gets_trimmed_once_with_the_missed_count(db, clock):
    s = db.stream("metrics")
    assert s.retention() == (7 * 86400.0, None, False)
    s.set_retention(max_age=60)
    assert s.retention() == (60.0, None, False)
    s.publish_many(range(5))
    s.subscribe("slow").close()  # stores its place: offset 1
    clock.advance(120)
    s.publish_many([5, 6])
    assert s.trim() == 5
    sub = s.subscribe("slow")
    with pytest.raises(honker.Trimmed) as trimmed:
        sub.next(wait=0)
    assert trimmed.value.missed == 5
    assert trimmed.value.code == "TRIMMED"
    assert [sub.next(wait=0).payload for _ in range(2)] == [5, 6]
    sub.close()
    # An explicit start below the first retained offset is TRIMMED too.
    with pytest.raises(honker.Trimmed):
        s.subscribe("new", start=2).next(wait=0)


def test_count_retention_never_removes_what_a_consumer_has_not_passed(db):
    s = db.stream("audit")
    s.set_retention(max_age=None, max_count=2)
    s.publish_many(range(6))
    with s.subscribe("reader", auto_commit=False) as r:
        r.next(wait=0)
        r.commit(2)  # the next it reads is 3
    assert db.maintain()["stream_events"] == 2  # offsets 1 and 2: passed, over count
    assert [e.offset for e in s.read()] == [3, 4, 5, 6]


def test_notifications_carry_any_payload_a_seq_and_an_id_and_a_closed_listener_ends(db):
    # What is heard, in which order, and what never is (rolled back, before
    # listening, another channel): tests-interop's notify_listen, every surface.
    with db.listen("cache") as listener:
        db.notify("cache", {"evict": "user:1"})
        with db.transaction() as tx:
            tx.execute("INSERT INTO orders (id) VALUES (9)")
            db.notify("cache", "in-tx", tx=tx)
        db.notify("cache", b"bytes")
        got = [listener.next(wait=0) for _ in range(4)]
    assert [n.payload for n in got[:3]] == [{"evict": "user:1"}, "in-tx", b"bytes"]
    assert [n.seq for n in got[:3]] == [1, 2, 3]
    assert got[3] is None
    assert got[0].id < got[1].id < got[2].id
    assert listener.closed
    assert list(listener) == []


def test_async_listen_cancellation_loses_nothing(db, async_waits):
    async def main() -> list[str]:
        async with db.listen("ui", wait=5) as listener:
            waiting = asyncio.ensure_future(listener.__anext__())
            await asyncio.sleep(0.1)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await db.notify_async("ui", "one")
            await db.notify_async("ui", "two")
            got = []
            async for n in listener:
                got.append(n.payload)
                if len(got) == 2:
                    break
            return got

    assert asyncio.run(main()) == ["one", "two"]


def test_a_listener_behind_the_window_gets_trimmed_then_the_rest(db):
    assert db.channel_retention("busy") == (3600.0, 100_000)
    db.set_channel_retention("busy", max_age=60, max_count=3)
    assert db.channel_retention("busy") == (60.0, 3)
    listener = db.listen("busy")
    for i in range(10):
        db.notify("busy", i)
    assert db.maintain()["notifications"] == 7
    with pytest.raises(honker.Trimmed) as trimmed:
        listener.next(wait=0)
    assert trimmed.value.missed == 7
    assert [n.payload for n in iter(lambda: listener.next(wait=0), None)] == [7, 8, 9]
    listener.close()


def test_honkers_notifications_view_reads_ours(db):
    db.notify("orders", {"id": 1})
    assert db.query("SELECT channel, payload FROM _honker_notifications") == [
        ("orders", '{"id":1}')
    ]


PUBLISHER = """
import honker, sys
db = honker.open(sys.argv[1])
s = db.stream("orders")
for i in range(int(sys.argv[2])):
    s.publish({"n": i})
db.notify("done", "published")
db.close()
"""


def test_events_published_by_another_process_wake_this_one(path):
    db = honker.open(path)
    sub = db.stream("orders").subscribe("here", wait=10)
    listener = db.listen("done", wait=10)
    proc = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(path), "50"])
    got = [next(sub).payload["n"] for _ in range(50)]
    assert got == list(range(50))
    assert next(iter(listener)).payload == "published"
    assert proc.wait(60) == 0
    sub.close()
    listener.close()
    db.close()


@pytest.fixture
def submitted(monkeypatch) -> list:
    """What the test hands to honker's threads (the async readers' slow path)."""
    from honker import _threads

    calls: list = []
    real_submit = _threads.submit

    def submit(fn, *args, **kwargs):
        calls.append(fn)
        return real_submit(fn, *args, **kwargs)

    monkeypatch.setattr(_threads, "submit", submit)
    return calls


def test_async_readers_wake_on_the_loop_from_another_process_and_release_the_loop(path, submitted):
    # The asyncio iterators wait in the loop's selector on core's readiness
    # pipe (no thread): another process's commits wake them, a close from
    # another task ends them at once, and an iterator left after `break`
    # takes its pipe off the loop within one iteration.
    # Re-checks every 50 s (10 x the 5 s fallback): anything sooner is the
    # pipe's doing.
    db = honker.open(path, watch_fallback=5)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        sub = db.stream("orders").subscribe("here", wait=30)
        listener = db.listen("done", wait=30)
        proc = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(path), "50"])
        got = []
        started = time.monotonic()
        async for e in sub:
            if not got:
                assert time.monotonic() - started < 10  # woken, not re-checked
            got.append(e.payload["n"])
            if len(got) == 50:
                break
        assert got == list(range(50))
        async for n in listener:
            assert n.payload == "published"
            break
        assert await loop.run_in_executor(None, proc.wait, 60) == 0
        assert submitted == []  # nothing waited on honker's threads
        await asyncio.sleep(0)
        # They waited (the publisher started later) on the one pipe of this
        # database and loop, which left the loop when nobody waited.
        waits = _loopwait._by_db[db][1][loop]
        assert not waits._registered and not waits._ready.armed
        with pytest.raises(KeyError):
            loop._selector.get_key(waits._ready.fileno())  # type: ignore[attr-defined]

        # A close from another task ends a waiting iterator at once.
        async def close_soon() -> None:
            await asyncio.sleep(0.2)
            listener.close()

        closer = asyncio.ensure_future(close_soon())
        started = time.monotonic()
        async for _ in listener:
            raise AssertionError("nothing was sent")
        assert time.monotonic() - started < 5  # not its 30 s wait, nor the 50 s re-check
        await closer
        sub.close()

    asyncio.run(main())
    db.close()


MANY_READERS = """
import asyncio, json, os, resource, sys
import honker

# A low descriptor limit (Debian's default soft limit is 1,024): readers
# that each held a pipe (two descriptors) ran out of descriptors here.
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
db = honker.open(sys.argv[1])
stream = db.stream("orders")
group = stream.group("mailers")
group.create(start="beginning")


async def main() -> None:
    heard = []

    async def listen(i: int) -> None:
        async for n in db.listen("chat"):
            heard.append(("listener", n.payload))
            return

    async def subscribe(i: int) -> None:
        async for e in stream.subscribe(f"c{i}", start="beginning"):
            heard.append(("subscriber", e.payload))
            return

    async def consume(i: int) -> None:
        async for e in group.consume(f"m{i}", batch=1):
            heard.append(("member", e.payload))
            e.ack()
            return

    tasks = [asyncio.ensure_future(listen(i)) for i in range(600)]
    tasks += [asyncio.ensure_future(subscribe(i)) for i in range(300)]
    tasks += [asyncio.ensure_future(consume(i)) for i in range(100)]
    await asyncio.sleep(1.0)  # every reader is waiting
    waiting_fds = len(os.listdir("/proc/self/fd"))
    await asyncio.get_running_loop().run_in_executor(None, db.notify, "chat", "hi")
    await asyncio.wait(tasks[:600], timeout=30)
    await asyncio.get_running_loop().run_in_executor(None, stream.publish, "order")
    await asyncio.wait(tasks[600:900], timeout=30)
    await asyncio.get_running_loop().run_in_executor(None, stream.publish_many, ["x"] * 100)
    await asyncio.wait(tasks[900:], timeout=30)
    print(json.dumps({"fds": waiting_fds, "kinds": sorted(set(heard)), "heard": len(heard)}))


asyncio.run(main())
"""


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="counts /proc/self/fd")
def test_a_thousand_idle_async_readers_share_one_pipe(path):
    # 600 listeners, 300 subscribers and 100 group members waiting in one
    # process, each as a websocket handler would: together they hold no
    # thread and one readiness pipe, so a process with a 256-descriptor
    # limit serves them (with a pipe each, about the 120th reader failed
    # with EMFILE), and every one hears what is published.
    out = subprocess.run(
        [sys.executable, "-c", MANY_READERS, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["fds"] < 64, got
    assert got["kinds"] == [
        ["listener", "hi"],
        ["member", "order"],
        ["member", "x"],
        ["subscriber", "order"],
    ]
    assert got["heard"] == 1000


def test_async_readers_without_add_reader_wait_on_threads(db):
    # A loop without add_reader (Windows' proactor) still works: the
    # iterator falls back to waiting on honker's threads.
    class NoReaders(asyncio.SelectorEventLoop):
        def add_reader(self, *args: object) -> None:  # type: ignore[override]
            raise NotImplementedError

    s = db.stream("orders")
    sub = s.subscribe("t", wait=5)

    async def main() -> str:
        asyncio.get_running_loop().call_later(0.2, lambda: s.publish("woke"))
        async for e in sub:
            return str(e.payload)
        raise AssertionError("ended")

    loop = NoReaders()
    try:
        started = time.monotonic()
        assert loop.run_until_complete(main()) == "woke"
        assert time.monotonic() - started < 4
        assert not _loopwait._by_db[db][1][loop]._ready.armed  # left disarmed
    finally:
        loop.close()
    sub.close()


def test_an_async_subscription_goes_on_while_another_connection_holds_the_write_lock(
    path, submitted
):
    # Auto-commit after every event needs the write lock; while another
    # connection holds it, the fast path cannot commit (False, not None) and
    # the iterator takes the next event on a thread instead, without
    # waiting for the lock: nothing is lost, nothing spins, and the place is
    # committed once the lock is free.
    import sqlite3

    db = honker.open(path)
    s = db.stream("orders")
    s.publish_many([1, 2, 3])
    sub = s.subscribe("t", commit_every=1, wait=5)
    other = sqlite3.connect(path, isolation_level=None)

    async def main() -> list[int]:
        got = [(await sub.__anext__()).payload]
        other.execute("BEGIN IMMEDIATE")
        got.append((await sub.__anext__()).payload)
        got.append((await sub.__anext__()).payload)
        assert len(submitted) == 2  # each on a thread: the commit was refused
        other.execute("COMMIT")
        return got

    assert asyncio.run(main()) == [1, 2, 3]
    assert s.position("t") == 1  # event 1 counts as processed only at the next ask: locked out
    sub.close()
    assert s.position("t") == 3  # 1 and 2 passed; 3 was handed out, not passed
    other.close()
    db.close()


CONSUMER = """
import honker, sys, time
db = honker.open(sys.argv[1])
db.execute("CREATE TABLE IF NOT EXISTS seen (offset INTEGER PRIMARY KEY)")
sub = db.stream("orders").subscribe("projector", auto_commit=False, wait=1)
for event in sub:
    with db.transaction() as tx:
        tx.execute("INSERT INTO seen VALUES (?)", [event.offset])
        sub.commit(event, tx=tx)
    if event.offset == int(sys.argv[2]):
        print("ready", flush=True)
        time.sleep(60)  # killed here
"""


def test_a_sigkilled_consumer_resumes_at_its_committed_offset(path):
    db = honker.open(path)
    s = db.stream("orders")
    s.publish_many(range(20))
    proc = subprocess.Popen(
        [sys.executable, "-c", CONSUMER, str(path), "8"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert s.position("projector") == 9
    # A new process picks up exactly where the dead one committed; the
    # primary key on `seen` would fail if any event were processed twice.
    proc = subprocess.Popen(
        [sys.executable, "-c", CONSUMER, str(path), "20"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.kill()
    proc.wait(30)
    assert db.query("SELECT count(*), min(offset), max(offset) FROM seen") == [(20, 1, 20)]
    db.close()


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc")
def test_memory_stays_flat_while_a_consumer_reads_a_million_events(path):
    db = honker.open(path)
    s = db.stream("firehose")
    for start in range(0, 1_000_000, 10_000):
        s.publish_many([{"i": i} for i in range(start, start + 10_000)])
    sub = s.subscribe("reader", batch=500, commit_every=10_000)
    after_100k = 0
    for n, event in enumerate(sub, start=1):
        if n == 100_000:
            after_100k = rss_bytes()
        if n == 1_000_000:
            assert event.payload == {"i": 999_999}
            break
    growth = rss_bytes() - after_100k
    sub.close()
    assert s.position("reader") == 1_000_000  # the last was handed out, not passed
    assert growth < 32 * 1024 * 1024, f"RSS grew {growth / 2**20:.1f} MiB from 100k to 1M"
    db.close()


def test_bad_input_is_a_typed_error_and_changes_nothing(db):
    s = db.stream("orders")
    s.publish("kept")
    before = (events_of(db, "orders"), db.query("SELECT * FROM _honker_stream_offsets"))
    with pytest.raises(honker.InvalidArgument):
        db.stream("")
    with pytest.raises(honker.InvalidArgument):  # json.dumps's TypeError until issue 53
        s.publish(object())
    with pytest.raises(honker.InvalidArgument):
        s.publish_many(["ok", {1, 2}])
    with pytest.raises(honker.InvalidArgument):
        s.publish(float("nan"))
    assert s.publish_many([]) == []
    with pytest.raises(honker.InvalidArgument):
        s.subscribe("c", start="middle")
    with pytest.raises(honker.InvalidArgument):
        s.subscribe("c", start=1.5)  # type: ignore[arg-type]
    with pytest.raises(honker.InvalidArgument):
        s.subscribe("c", batch=0)
    with pytest.raises(honker.InvalidArgument):
        s.subscribe("c", commit_interval=None)  # type: ignore[arg-type]
    with pytest.raises(honker.InvalidArgument):
        s.commit("c", -1)
    with pytest.raises(honker.InvalidArgument):
        s.set_retention(max_age=-1)
    with pytest.raises(honker.InvalidArgument):
        s.set_retention(max_age=60, max_count=0)
    with pytest.raises(honker.InvalidArgument):
        s.set_retention(max_age=60, max_count=-1)
    with pytest.raises(honker.InvalidArgument):
        s.read(limit=-1)
    assert (events_of(db, "orders"), db.query("SELECT * FROM _honker_stream_offsets")) == before
    assert s.retention() == (7 * 86400.0, None, False)
    with pytest.raises(honker.InvalidArgument):
        db.notify("ch", "x" * (64 * 1024 + 1))
    with pytest.raises(honker.InvalidArgument):
        db.notify("", "x")
    for wait in (None, 0, -1):
        with pytest.raises(honker.InvalidArgument):
            db.listen("ch", wait=wait)  # type: ignore[arg-type]
        with pytest.raises(honker.InvalidArgument):
            s.subscribe("c", wait=wait)  # type: ignore[arg-type]
    with pytest.raises(honker.InvalidArgument):
        db.set_channel_retention("ch", max_age=0.5, max_count=10)
    with pytest.raises(honker.InvalidArgument):
        db.set_channel_retention("ch", max_age=60, max_count=0)
    with pytest.raises(honker.InvalidArgument):
        db.set_channel_retention("ch", max_age=None, max_count=10)  # type: ignore[arg-type]
    assert db.query("SELECT count(*) FROM _honker_channel_messages") == [(0,)]
    assert db.channel_retention("ch") == (3600.0, 100_000)


def test_async_iteration_over_a_backlog_lets_other_tasks_run(db):
    # Events already there are taken without a thread hop; the iterator
    # still yields to the loop regularly, so a long backlog never starves it.
    s = db.stream("backlog")
    s.publish_many(range(5000))

    async def main() -> tuple[int, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.ensure_future(tick())
        await asyncio.sleep(0)
        seen = 0
        async with s.subscribe("fast") as sub:
            async for event in sub:
                seen += 1
                if event.payload == 4999:
                    break
        ticker.cancel()
        return seen, ticks

    seen, ticks = asyncio.run(main())
    assert seen == 5000
    assert ticks >= 5000 // 256, f"the loop ran other tasks only {ticks} times"
