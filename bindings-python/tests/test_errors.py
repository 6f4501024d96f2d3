"""Errors through Python: one class per stable code, bad input refused before
anything is written. Mirrors core/tests/errors.rs."""

from __future__ import annotations

import honker
import pytest
from conftest import snapshot
from honker import _native, errors


def test_every_core_error_code_has_its_own_class():
    classes = {errors.class_for_code(code) for code in _native.ERROR_CODES}
    assert honker.HonkerError not in classes
    assert len(classes) == len(_native.ERROR_CODES)
    for code in _native.ERROR_CODES:
        cls = errors.class_for_code(code)
        e = cls(code, "m")
        assert isinstance(e, honker.HonkerError)
        assert (e.code, str(e)) == (code, f"{code}: m")


def test_invalid_argument_is_a_value_error_and_timeout_a_timeout_error():
    assert issubclass(honker.InvalidArgument, ValueError)
    assert issubclass(honker.Timeout, TimeoutError)
    assert issubclass(honker.NotFound, LookupError)


@pytest.mark.parametrize(
    "call",
    [
        lambda q: q.enqueue("x", delay=-1),
        lambda q: q.enqueue("x", max_attempts=0),
        lambda q: q.enqueue("x", delay=1, run_at=1_700_000_100),
        lambda q: q.enqueue("x", dedupe_key=""),
        lambda q: q.enqueue("x" * (2 << 20)),
        lambda q: q.claim_batch("w", 0),
        lambda q: q.claim_batch("w", -1),
        lambda q: q.claim_batch("", 1),
        lambda q: q.claim_batch("w", 1, lease=float("nan")),
    ],
)
def test_bad_arguments_raise_invalid_argument_and_change_nothing(db, call):
    q = db.queue("q")
    q.enqueue("seed")
    before = snapshot(db)
    with pytest.raises(honker.InvalidArgument) as info:
        call(q)
    assert info.value.code == "INVALID_ARGUMENT"
    assert snapshot(db) == before


def test_bad_queue_options_and_open_options():
    with pytest.raises(honker.InvalidArgument):
        honker.open(":memory:")
    with pytest.raises(honker.InvalidArgument):
        honker.open("x.db", durability="sometimes")


def test_unknown_ids_are_not_found(db):
    q = db.queue("q")
    with pytest.raises(honker.NotFound):
        q.get_job(424242)
    with pytest.raises(honker.NotFound):
        q.cancel(424242)


def test_sql_errors_are_coded(db):
    with pytest.raises(honker.SqliteError) as info:
        db.execute("INSERT INTO no_such_table VALUES (1)")
    assert info.value.code == "SQLITE"


def test_a_closed_database_raises_closed(path):
    db = honker.open(path)
    q = db.queue("q")
    db.close()
    with pytest.raises(honker.Closed):
        q.enqueue("x")


def test_wait_result_times_out(db):
    q = db.queue("q")
    e = q.enqueue("x")
    with pytest.raises(honker.Timeout):
        q.wait_result(e.id, timeout=0.01)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda db, q: honker.open(db.path, readers=-1), "readers"),
        (lambda db, q: honker.open(db.path, max_payload_bytes=-1), "max_payload_bytes"),
        (lambda db, q: db.queue("q", max_attempts=-1), "max_attempts"),
        (lambda db, q: db.queue(5), "name"),
        (lambda db, q: q.enqueue(1, max_attempts=-1), "max_attempts"),
        (lambda db, q: q.enqueue(1, priority=2**40), "priority"),
        (lambda db, q: q.enqueue(1, priority="high"), "priority"),
        (lambda db, q: q.enqueue(1, tx="x"), "tx"),
        (lambda db, q: q.ack_many([], tx=object()), "tx"),
        (lambda db, q: q.claim_batch("w", 1.5), "n"),
        (lambda db, q: q.claim_batch(5), "worker_id"),
        (lambda db, q: q.dead_letters(limit=-1), "limit"),
        (lambda db, q: q.get_job("x"), "job_id"),
        (lambda db, q: q.get_job(2**70), "job_id"),
        (lambda db, q: q.enqueue({"k": [float("inf")]}), "payload"),
    ],
)
def test_bad_arguments_are_invalid_argument_naming_the_parameter(db, call, named):
    q = db.queue("q")
    before = snapshot(db)
    with pytest.raises(honker.InvalidArgument) as e:
        call(db, q)
    assert e.value.message.startswith(named) or named in e.value.message, e.value.message
    assert snapshot(db) == before


def test_a_manual_clock_refuses_times_outside_1970_to_9999(path):
    """Issue 53 §23: a clock near the end of i64 made every expiry saturate,
    so a lock granted for 60 s had lapsed at once."""
    for bad in (-1.0, float("nan"), float("inf"), 1e300):
        with pytest.raises(honker.InvalidArgument):
            honker.ManualClock(bad)
    clock = honker.ManualClock(1_700_000_000)
    century = 100 * 365 * 86_400
    with pytest.raises(honker.InvalidArgument):
        for _ in range(200):
            clock.advance(century)
    assert clock.now() <= 253_402_300_800
    # At the latest time it reaches, a lock still excludes for its TTL.
    db = honker.open(path, clock=clock)
    lock = db.lock("l")
    assert lock.try_acquire("a", ttl=60) is not None
    assert lock.try_acquire("b", ttl=60) is None
    db.close()


def test_error_messages_name_what_was_wrong_in_its_own_terms(db):
    """Issue 53 §9: Worker(concurrency=0) said "batch size"; max_attempts=-1
    and 0 gave different ranges; a sub-ms lease said "got 0ns"; Snooze(-1)
    constructed."""
    with pytest.raises(honker.InvalidArgument, match=r"^INVALID_ARGUMENT: concurrency must be"):
        honker.Worker(db, concurrency=0)
    q = db.queue("q")
    messages = set()
    for bad in (-1, 0, 1001):
        with pytest.raises(honker.InvalidArgument) as e:
            q.enqueue(1, max_attempts=bad)
        messages.add(str(e.value).split(", got")[0])
    assert messages == {"INVALID_ARGUMENT: max_attempts must be between 1 and 1000"}
    with pytest.raises(honker.InvalidArgument, match="between 1 and 1000"):
        db.queue("q2", max_attempts=2000)  # core's own check
    q.enqueue(1)
    with pytest.raises(honker.InvalidArgument, match=r"between 1 ms and 24 h, got 0.0005 ms"):
        q.claim_batch("w", 1, lease=0.0000005)
    for bad in (-1, float("nan"), None, "soon"):
        with pytest.raises(honker.InvalidArgument):
            honker.Snooze(bad)  # type: ignore[arg-type]
    with pytest.raises(honker.InvalidArgument):
        honker.Retry("r", delay=-1)
