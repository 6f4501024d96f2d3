"""Every public verb, given junk, raises a honker error with a code or
succeeds: never a bare TypeError, AttributeError, AssertionError,
OverflowError or RecursionError (issue 53: an audit's fuzzing found 3,738
of 25,800 calls that did). Hypothesis draws each argument from values that
break naive conversions; what a call with valid arguments would do is the
other tests' business."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any, Callable

import honker
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


class Opaque:
    pass


def nested(depth: int) -> list:
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


JUNK: list[Any] = [
    None,
    0,
    -1,
    1,
    2**31,
    2**63,
    -(2**63) - 1,
    2**200,
    0.5,
    -0.001,
    math.nan,
    math.inf,
    -math.inf,
    1e300,
    True,
    "",
    "x",
    "\x00",
    "x" * 5000,
    b"",
    b"\xff",
    [],
    [1, "a"],
    {},
    {"a": object()},
    {1, 2},
    (1, 2),
    Opaque(),
    dt.timedelta(seconds=-5),
    dt.timedelta(days=10**6),
    dt.datetime(1, 1, 1),
    dt.datetime(9999, 12, 31, tzinfo=dt.timezone.utc),
    nested(5000),
]

junk = st.sampled_from(JUNK)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path: Path = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    db = honker.open(path)
    q = db.queue("q")
    q.enqueue_many(list(range(50)))
    jobs = q.claim_batch("w", 20)
    s = db.stream("s")
    s.publish_many(list(range(10)))
    g = s.group("g")
    g.create()
    return {"db": db, "q": q, "jobs": jobs, "s": s, "g": g, "lock": db.lock("l")}


def verbs(w: dict[str, Any]) -> dict[str, tuple[int, Callable[..., Any]]]:
    db, q, s, g, lock = w["db"], w["q"], w["s"], w["g"], w["lock"]
    job = w["jobs"][0]
    sched = db.scheduler()
    return {
        "db.queue": (2, lambda a, b: db.queue(a, lease=b)),
        "db.stream": (1, lambda a: db.stream(a)),
        "db.lock": (1, lambda a: db.lock(a)),
        "db.notify": (2, lambda a, b: db.notify(a, b)),
        "q.enqueue": (3, lambda a, b, c: q.enqueue(a, delay=b, priority=c)),
        "q.enqueue options": (
            3,
            lambda a, b, c: q.enqueue(1, max_attempts=a, dedupe_key=b, expires=c),
        ),
        "q.enqueue run_at": (1, lambda a: q.enqueue(1, run_at=a)),
        "q.enqueue_many": (1, lambda a: q.enqueue_many(a)),
        "q.claim_batch": (3, lambda a, b, c: q.claim_batch(a, b, lease=c)),
        "q.get_job": (1, lambda a: q.get_job(a)),
        "q.cancel": (1, lambda a: q.cancel(a)),
        "q.wait_result": (2, lambda a, b: q.wait_result(a, b)),
        "q.dead_letters": (2, lambda a, b: q.dead_letters(after_id=a, limit=b)),
        "job.retry": (2, lambda a, b: job.retry(delay=a, error=b)),
        "job.snooze": (1, lambda a: job.snooze(a)),
        "job.heartbeat": (1, lambda a: job.heartbeat(a)),
        "job.fail": (1, lambda a: job.fail(a)),
        "s.publish": (2, lambda a, b: s.publish(a, key=b)),
        "s.publish_many": (1, lambda a: s.publish_many(a)),
        "s.read": (2, lambda a, b: s.read(after=a, limit=b)),
        "s.commit": (2, lambda a, b: s.commit(a, b)),
        "g.claim": (3, lambda a, b, c: g.claim(a, b, lease=c)),
        "lock.try_acquire": (2, lambda a, b: lock.try_acquire(a, ttl=b)),
        "lock.renew": (2, lambda a, b: lock.renew(a, ttl=b)),
        "lock.release": (1, lambda a: lock.release(a)),
        "rate_limiter": (3, lambda a, b, c: db.rate_limiter("r", limit=a, per=b, burst=c)),
        "sched.add": (3, lambda a, b, c: sched.add("f", a, "q", b, jitter=c)),
        "sched.update": (2, lambda a, b: sched.update("f", priority=a, max_attempts=b)),
        "sched.pause": (2, lambda a, b: sched.pause(a, b)),
        "Retry": (1, lambda a: honker.Retry("r", delay=a)),
        "Snooze": (1, lambda a: honker.Snooze(a)),
        "ManualClock": (1, lambda a: honker.ManualClock(a)),
        "Worker": (2, lambda a, b: honker.Worker(db, concurrency=a, grace=b)),
    }


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_junk_is_a_honker_error_or_works(world: dict[str, Any], data: st.DataObject) -> None:
    table = verbs(world)
    name = data.draw(st.sampled_from(sorted(table)), label="verb")
    arity, call = table[name]
    args = [data.draw(junk, label=f"arg{i}") for i in range(arity)]
    try:
        call(*args)
    except honker.HonkerError:
        pass
    except Exception as e:  # what this test is for
        raise AssertionError(f"{name}{tuple(args)!r:.300} raised {type(e).__name__}: {e}") from e
