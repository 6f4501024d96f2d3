"""The queue through Python: the seed's reference behaviours, scheduling
(seconds, timedelta, datetime), results, dead letters, the claim iterator
and keep_alive. Mirrors core/tests/queue.rs; the cases every surface shares
(priority then age, lease lapse, dedupe, the outbox) are tests-interop's."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import honker
import pytest


def test_enqueue_claim_ack(db):
    q = db.queue("emails")
    e = q.enqueue({"to": "alice@example.com"})
    assert e.existing is False
    [job] = q.claim_batch("mailer-1", 32)
    assert job.id == e.id
    assert job.payload == {"to": "alice@example.com"}
    assert job.attempts == 1
    assert job.worker_id == "mailer-1"
    assert isinstance(job.lease_expires_at, dt.datetime)
    job.ack()
    assert q.stats().ready == 0
    with pytest.raises(honker.NotFound):
        q.get_job(job.id)


def test_retry_backs_off_and_then_runs(db, clock):
    q = db.queue("q", backoff_base=10, backoff_jitter=0)
    q.enqueue("x")
    [job] = q.claim_batch("w")
    assert job.retry(error="flaky") == "scheduled"
    assert q.claim_batch("w") == []
    clock.advance(10)
    [again] = q.claim_batch("w")
    assert again.attempts == 2
    assert q.get_job(again.id).last_error == "flaky"


def test_delay_and_run_at_accept_seconds_timedelta_and_datetime(db, clock):
    q = db.queue("q")
    now = dt.datetime.fromtimestamp(clock.now(), tz=dt.timezone.utc)
    q.enqueue("a", delay=5)
    q.enqueue("b", delay=dt.timedelta(seconds=10))
    q.enqueue("c", run_at=now + dt.timedelta(seconds=15))
    q.enqueue("d", run_at=clock.now() + 20)
    order = []
    for _ in range(4):
        clock.advance(5)
        order += [j.payload for j in q.claim_batch("w", 10)]
    assert order == ["a", "b", "c", "d"]
    with pytest.raises(honker.InvalidArgument):
        q.enqueue("e", delay="soon")


def test_expired_jobs_never_run(db, clock):
    q = db.queue("q")
    q.enqueue("late", delay=10, expires=15)
    clock.advance(20)
    assert q.claim_batch("w") == []
    assert q.stats().expired == 1


def test_release_and_snooze_give_the_attempt_back(db, clock):
    q = db.queue("q")
    q.enqueue("x")
    [job] = q.claim_batch("w")
    job.release()
    [job] = q.claim_batch("w")
    assert job.attempts == 1
    assert job.snooze(30) == "scheduled"
    clock.advance(30)
    [job] = q.claim_batch("w")
    assert job.attempts == 1


def test_heartbeat_extends_the_lease(db, clock):
    q = db.queue("q", lease=10)
    q.enqueue("x")
    [job] = q.claim_batch("w")
    clock.advance(8)
    before = job.lease_expires_at
    assert job.heartbeat() > before
    clock.advance(8)
    assert q.claim_batch("other") == []  # still held
    job.ack()


def test_wait_result_returns_the_result_saved_with_the_ack(db):
    # Saved by one surface and read by another: tests-interop's results.
    q = db.queue("q")
    e = q.enqueue("x")
    [job] = q.claim_batch("w")
    job.ack(result={"sent": True})
    assert q.wait_result(e.id, timeout=1) == {"sent": True}


def test_bytes_payloads_round_trip(db):
    q = db.queue("q")
    q.enqueue(b"\x00\xffraw")
    [job] = q.claim_batch("w")
    assert job.payload == b"\x00\xffraw"


def test_enqueue_many_is_atomic(db):
    q = db.queue("q")
    ids = q.enqueue_many([{"i": i} for i in range(5)])
    assert len({e.id for e in ids}) == 5
    with pytest.raises(honker.InvalidArgument):
        q.enqueue_many([{"i": 1}, object()])  # not JSON: nothing is written
    assert q.stats().ready == 5


def test_claim_iterator_for_threaded_workers(db):
    q = db.queue("q")
    q.enqueue_many(range(3))
    seen = []
    with q.claim("w", wait=0.01) as jobs:
        for job in jobs:
            seen.append(job.payload)
            job.ack()
            if len(seen) == 3:
                break
    assert seen == [0, 1, 2]


def test_keep_alive_heartbeats_while_work_runs(db, clock):
    q = db.queue("q", lease=30)
    q.enqueue("x")
    [job] = q.claim_batch("w")
    first_deadline = job.lease_expires_at
    with job.keep_alive(every=0.01) as keeper:
        for beats in (1, 2, 3):
            clock.advance(20)  # without heartbeats the lease would lapse at 30 s
            until(lambda b=beats: keeper.beats >= b)
    assert job.lease_expires_at == first_deadline + dt.timedelta(seconds=60)
    assert q.claim_batch("other") == []  # 60 s in, still held
    assert keeper.lost is False
    job.ack()


def test_a_bare_for_loop_that_breaks_gives_the_buffered_jobs_back(db):
    # No `with`: the claimer is dropped when the loop ends, and core gives back
    # what it claimed but never handed out (at once, on a thread of its own),
    # instead of leaving it to lapse.
    q = db.queue("q", lease=300)
    q.enqueue_many(range(3))
    for job in q.claim("w", batch=3, wait=0.01):
        job.ack()
        break
    until(lambda: q.stats().ready == 2)
    assert q.stats().running == 0


def test_keep_alive_stops_and_reports_when_the_lease_is_lost(db):
    q = db.queue("q", lease=30)
    job_id = q.enqueue("x").id
    [job] = q.claim_batch("w")
    with job.keep_alive(every=0.01) as keeper:
        assert q.cancel(job_id, reason="operator")
        until(lambda: keeper.lost)
        beats = keeper.beats
        time.sleep(0.05)
        assert keeper.beats == beats  # no renewal after the loss
    assert keeper.lost is True
    with pytest.raises(honker.LeaseLost):
        job.ack()


def test_keep_alive_checks_its_interval(db):
    q = db.queue("q", lease=30)
    q.enqueue("x")
    [job] = q.claim_batch("w")
    for every in (0, 30, 31, -1):
        with pytest.raises(honker.InvalidArgument):
            with job.keep_alive(every=every):
                pass
    job.ack()


def test_a_job_is_rebuilt_from_its_lease(db, path):
    q = db.queue("q")
    e = q.enqueue({"n": 1})
    [claimed] = q.claim_batch("w")
    other = honker.open(path)  # as another process would
    job = other.queue("q").job(claimed.id, claimed.token)
    assert (job.id, job.payload, job.worker_id, job.attempts) == (e.id, {"n": 1}, "w", 1)
    assert job.lease_expires_at == claimed.lease_expires_at
    job.ack()
    with pytest.raises(honker.LeaseLost):
        q.job(claimed.id, claimed.token)  # acked and removed, as ack would say
    with pytest.raises(honker.NotFound):
        q.job(10_000, "t")  # never existed
    waiting = q.enqueue("y")
    with pytest.raises(honker.LeaseLost):
        q.job(waiting.id, "not-the-token")  # ready: nobody holds it
    with pytest.raises(honker.InvalidArgument):
        q.job(waiting.id, "")
    other.close()


def until(condition, timeout=5.0):
    """Waits for a condition another thread makes true."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.002)


def test_a_damaged_row_is_dead_lettered_and_the_queue_goes_on(db):
    # A row edited by hand (priority as text) used to halt every claim on its
    # queue with INTERNAL. Mirrors core/tests/damaged_rows.rs.
    q = db.queue("q")
    ids = [q.enqueue(i).id for i in range(3)]
    db.execute("UPDATE _honker_jobs SET priority = 'urgent' WHERE id = ?", [ids[1]])
    jobs = q.claim_batch("w", 3)
    assert [j.id for j in jobs] == [ids[0], ids[2]]
    assert db.query("SELECT last_error FROM _honker_finished WHERE id = ?", [ids[1]]) == [
        ("undecodable row: priority holds TEXT",)
    ]
    with pytest.raises(honker.SqliteError) as e:
        q.get_job(ids[1])
    assert f"job {ids[1]}" in e.value.message
    assert q.stats().dead == 1


def test_a_queues_settings_are_stored_read_back_and_refused_when_bad(path):
    """A queue's stored settings as Python reads and writes them. That every
    surface's handle made afterwards claims and enqueues with them (issue 53
    §4) is the ``queue_settings`` interop scenario."""
    db = honker.open(path)
    emails = db.queue("emails")
    emails.configure(lease=5, max_attempts=7, backoff_base=0.25)
    assert emails.settings() == {
        "lease": 5.0,
        "max_attempts": 7,
        "backoff_base": 0.25,
        "backoff_max": None,
        "backoff_jitter": None,
    }
    assert db.queue("emails")._lease == 5.0
    # A handle's own option is its own; bad settings change nothing.
    assert db.queue("emails", lease=2)._lease == 2.0
    for bad in ({"lease": 0}, {"max_attempts": 0}, {"backoff_jitter": 2.0}, {"lease": "soon"}):
        with pytest.raises(honker.InvalidArgument):
            emails.configure(**bad)
    assert emails.settings()["lease"] == 5.0
    for bad in ({"backoff_jitter": "half"}, {"max_attempts": True}, {"backoff_base": -1}):
        with pytest.raises(honker.InvalidArgument):
            db.queue("emails", **bad)
    asyncio.run(emails.configure_async(backoff_max=30))
    assert emails.settings()["backoff_max"] == 30.0
    emails.clear_settings()
    assert db.queue("emails")._lease == 60.0
    db.close()


def test_concurrency_caps_as_python_calls_them(path):
    """The caps and the key as Python passes them (sync and asyncio twins,
    the checks); what the caps do across processes and languages is the
    ``caps`` interop scenario."""
    db, other = honker.open(path), honker.open(path)
    q = db.queue("q")
    for key in ["a", "a", "b", None]:
        q.enqueue({"key": key}, concurrency_key=key)
    q.limit_concurrency(max_running=3, max_running_per_key=1)
    stats = other.queue("q").stats()
    assert (stats.max_running, stats.max_running_per_key) == (3, 1)
    jobs = other.queue("q").claim_batch("w", 10)
    keys = sorted(str(q.get_job(j.id).concurrency_key) for j in jobs)
    assert keys == ["None", "a", "b"]
    assert q.claim_batch("w", 10) == []
    jobs[0].ack()
    for bad in [{"max_running": 0}, {"max_running_per_key": -1}, {"max_running": "3"}]:
        with pytest.raises(honker.InvalidArgument):
            q.limit_concurrency(**bad)  # type: ignore[arg-type]
    with pytest.raises(honker.InvalidArgument):
        q.enqueue("x", concurrency_key="k" * 513)
    assert q.stats().max_running == 3
    asyncio.run(q.limit_concurrency_async())
    assert (q.stats().max_running, q.stats().max_running_per_key) == (None, None)
    assert len(q.claim_batch("w", 10)) == 1
    db.close()
    other.close()


def test_fairness_takes_keys_in_turn_and_limits_each_key(path):
    """set_fairness as Python calls it (sync and asyncio twins, the checks):
    in round-robin order a flood of one key does not hold up the others, a
    rate limit per key steps over a key at its limit, another open of the
    file obeys both, and bad input changes nothing (ADR 36)."""
    db, other = honker.open(path), honker.open(path)
    q = db.queue("q")
    q.set_fairness(order="round_robin")
    q.enqueue_many(range(100), concurrency_key="big")
    for key in ["x", "y", "z"]:
        q.enqueue_many(range(2), concurrency_key=key)
    oq = other.queue("q")
    jobs = [j for _ in range(8) for j in oq.claim_batch("w", 1)]
    keys = [q.get_job(j.id).concurrency_key for j in jobs]
    assert keys == ["big", "x", "y", "z", "big", "x", "y", "z"]
    stats = oq.stats()
    assert (stats.round_robin, stats.key_limit, stats.key_per) == (True, None, None)

    asyncio.run(q.set_fairness_async(order="round_robin", key_limit=1, key_per=60))
    stats = q.stats()
    assert (stats.round_robin, stats.key_limit, stats.key_per) == (True, 1, 60.0)
    jobs = oq.claim_batch("w", 10)
    assert [q.get_job(j.id).concurrency_key for j in jobs] == ["big"]
    assert oq.claim_batch("w", 10) == []
    for bad in [
        {"order": "fifo"},
        {"key_limit": 5},
        {"key_limit": 0, "key_per": 1},
        {"key_limit": 1, "key_per": -1},
        {"order": 3},
    ]:
        with pytest.raises(honker.InvalidArgument):
            q.set_fairness(**bad)  # type: ignore[arg-type]
    assert q.stats().key_limit == 1
    q.set_fairness()
    stats = q.stats()
    assert (stats.round_robin, stats.key_limit) == (False, None)
    assert len(oq.claim_batch("w", 200)) == 100 - 3
    db.close()
    other.close()


def test_unique_modes_as_python_passes_them(db, clock):
    """unique, unique_for (seconds or a timedelta) and dedupe_by_payload
    cross as options, sync and asyncio; the mode that acted comes back,
    through enqueue_many too; bad input is refused and changes nothing
    (ADR 37). The modes' semantics across surfaces are tests-interop's."""
    q = db.queue("q")
    period = {"dedupe_key": "welcome:1", "unique": "period", "unique_for": dt.timedelta(hours=1)}
    first = q.enqueue({"user": 1}, **period)
    assert first == (first.id, False, None)
    q.claim_batch("w")[0].ack()
    clock.advance(3599)
    held = q.enqueue({"user": 1}, **period)
    assert (held.id, held.existing, held.unique) == (first.id, True, "period")
    clock.advance(1)
    assert q.enqueue({"user": 1}, **period).existing is False
    got = q.enqueue_many([{"a": 1, "b": 2}, {"b": 2, "a": 1.0}, {"a": 2}], dedupe_by_payload=True)
    assert [(e.existing, e.unique) for e in got] == [(False, None), (True, "live"), (False, None)]
    assert got[1].id == got[0].id

    async def debounce():
        d = await q.enqueue_async({"v": 1}, dedupe_key="d", unique="debounce", delay=60)
        again = await q.enqueue_async({"v": 2}, dedupe_key="d", unique="debounce", delay=60)
        assert (again.id, again.unique) == (d.id, "debounce")
        assert q.get_job(d.id).payload == {"v": 2}

    asyncio.run(debounce())
    stats = q.stats()
    for bad in [
        {"dedupe_key": "k", "unique": 3},
        {"dedupe_by_payload": "yes"},
        {"dedupe_by_payload": 1},
        {"dedupe_key": "k", "unique_for": 10},
        {"dedupe_key": "k", "unique": "period"},
        {"unique": "live"},
        {"dedupe_key": "k", "unique": "throttle", "unique_for": -1},
    ]:
        with pytest.raises(honker.InvalidArgument):
            q.enqueue("x", **bad)
    assert q.stats() == stats


def test_a_paused_queue_keeps_its_asyncio_claim_waiting_until_resumed(path, async_waits):
    """Pause and resume as Python calls them (sync and asyncio twins, the
    note's check); what a pause does on every surface is the ``pause``
    interop scenario. An ``async for`` over the claim stream sleeps through
    the pause and the enqueue, and wakes on the resume's commit from another
    open of the file."""
    db, other = honker.open(path), honker.open(path)
    q, oq = db.queue("q"), other.queue("q")
    q.pause(note="deploy")
    assert q.stats().paused is True
    with pytest.raises(honker.InvalidArgument):
        q.pause(note="x" * 513)
    with pytest.raises(honker.InvalidArgument):
        q.pause(note=42)  # type: ignore[arg-type]

    async def main() -> tuple[object, float]:
        stream = q.claim("w", wait=0.05)
        task = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.05)
        oq.enqueue("x")
        await asyncio.sleep(0.3)
        # A broken pause hands the job out within a moment of the enqueue.
        assert not task.done()
        resumed = time.monotonic()
        assert await oq.resume_async() is True
        job = await asyncio.wait_for(task, 10)
        woke = time.monotonic()
        await job.ack_async()
        await stream.aclose()
        return job.payload, woke - resumed

    payload, _ = asyncio.run(main())
    assert payload == "x"
    assert q.resume() is False

    asyncio.run(db.pause_all_async(note="migration"))
    assert oq.stats().paused is True
    assert q.resume() is False  # its own pause is gone; all queues' holds it
    assert db.resume_all() is True
    assert asyncio.run(db.resume_all_async()) is False
    assert oq.stats().paused is False
    other.close()
    db.close()
