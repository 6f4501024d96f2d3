"""W3C trace context (ADR 28): captured from the active OpenTelemetry span at
enqueue and publish, stored beside the job or event (never in its payload),
and current again around the worker's handler, sync or async. Without
OpenTelemetry imported nothing is captured; without it installed nothing is
imported and handlers run as before."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import honker
import pytest
from conftest import stop_when
from honker._sql import enqueue_call, publish_call
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN_ID = 0x00F067AA0BA902B7
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def producer_span() -> NonRecordingSpan:
    return NonRecordingSpan(
        SpanContext(
            trace_id=TRACE_ID,
            span_id=SPAN_ID,
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
            trace_state=TraceState([("congo", "t61rcWkgMzE")]),
        )
    )


@pytest.fixture
def rdb(path: Path):
    database = honker.open(path)
    yield database
    database.close()


def seen_context() -> tuple[int, int, bool, str]:
    ctx = trace.get_current_span().get_span_context()
    return ctx.trace_id, ctx.span_id, ctx.is_remote, ctx.trace_state.to_header()


def test_enqueue_captures_the_active_span_beside_the_payload(rdb):
    q = rdb.queue("mail")
    with trace.use_span(producer_span()):
        traced = q.enqueue({"to": "a@example.com"}).id
    plain = q.enqueue({"to": "b@example.com"}).id
    rows = dict(rdb.query("SELECT id, trace_context FROM _honker_jobs"))
    assert json.loads(rows[traced]) == {"traceparent": PARENT, "tracestate": "congo=t61rcWkgMzE"}
    assert rows[plain] is None
    assert rdb.query("SELECT payload FROM _honker_jobs WHERE id = ?", [traced]) == [
        ('{"to":"a@example.com"}',)
    ]
    jobs = {j.id: j for j in q.claim_batch("w", 2)}
    assert jobs[traced].trace_context == {
        "traceparent": PARENT,
        "tracestate": "congo=t61rcWkgMzE",
    }
    assert jobs[plain].trace_context is None
    assert q.get_job(traced).trace_context == jobs[traced].trace_context


def test_the_worker_runs_sync_and_async_handlers_in_the_producers_trace(rdb):
    with trace.use_span(producer_span()):
        rdb.queue("sync").enqueue(1)
        rdb.queue("async").enqueue(2)
    rdb.queue("sync").enqueue(3)  # no span: the handler sees none
    seen: dict[int, tuple[int, int, bool, str]] = {}
    w = honker.Worker(rdb, concurrency=4)

    @w.task("sync")
    def on_sync(job):
        seen[job.payload] = seen_context()

    @w.task("async")
    async def on_async(job):
        seen[job.payload] = seen_context()

    stop_when(w, lambda: len(seen) == 3)
    w.run(signals=False)
    remote = (TRACE_ID, SPAN_ID, True, "congo=t61rcWkgMzE")
    assert seen[1] == remote and seen[2] == remote
    assert seen[3][0] == 0, "a job without a context runs outside any trace"
    assert seen_context()[0] == 0, "nothing leaks into the caller's context"


def test_publish_captures_it_and_a_group_handler_runs_in_it(rdb):
    s = rdb.stream("orders")
    with trace.use_span(producer_span()):
        s.publish({"n": 1})
        s.publish_many([{"n": 2}, {"n": 3}])
    s.publish({"n": 4})
    headers = [e.trace_context for e in s.read(0, 10)]
    want = {"traceparent": PARENT, "tracestate": "congo=t61rcWkgMzE"}
    assert headers == [want, want, want, None]
    group = s.group("billing")
    group.create()
    seen: dict[int, int] = {}
    w = honker.Worker(rdb)

    @w.task(stream="orders", group="billing")
    def on_event(event):
        seen[event.payload["n"]] = trace.get_current_span().get_span_context().trace_id

    stop_when(w, lambda: len(seen) == 4)
    w.run(signals=False)
    assert seen == {1: TRACE_ID, 2: TRACE_ID, 3: TRACE_ID, 4: 0}


def test_the_orm_calls_carry_it_as_sql_options():
    def options() -> list[dict]:
        _, job = enqueue_call("mail", {"to": "a"}, {"priority": 0, "max_attempts": 3})
        _, event = publish_call("orders", {"n": 1}, {})
        return [json.loads(job[2]), json.loads(event[2])]

    with trace.use_span(producer_span()):
        traced = options()
    for o in traced:
        assert (o["traceparent"], o["tracestate"]) == (PARENT, "congo=t61rcWkgMzE")
    for o in options():
        assert "traceparent" not in o and "tracestate" not in o


def test_a_bad_context_through_sql_is_refused_and_writes_nothing(rdb):
    # Through honker's own connection a SQL function's error is SQLITE,
    # carrying the function's code.
    with pytest.raises(honker.HonkerError, match="INVALID_ARGUMENT: traceparent"):
        rdb.execute("SELECT honker_queue_enqueue('mail', '1', ?)", ['{"traceparent": "00-nope"}'])
    assert rdb.query("SELECT count(*) FROM _honker_jobs") == [(0,)]


def run(code: str, path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_without_opentelemetry_nothing_is_captured_or_imported(path):
    # A traced job from this process, for the other one to run.
    with honker.open(path) as db, trace.use_span(producer_span()):
        db.queue("mail").enqueue("traced")
    out = run(
        """
        import sys

        class NoOpenTelemetry:  # as if it were not installed
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "opentelemetry":
                    raise ImportError("no opentelemetry here")

        if sys.argv[1:2] != ["installed"]:
            sys.meta_path.insert(0, NoOpenTelemetry())
        import threading
        import honker

        with honker.open(sys.argv[-1]) as db:
            db.queue("mail").enqueue("plain")
            w = honker.Worker(db)
            seen = []

            @w.task("mail")
            def handler(job):
                seen.append((job.payload, job.trace_context is not None))
                if len(seen) == 2:
                    threading.Thread(target=w.stop).start()

            w.run(signals=False)
            captured = db.query("SELECT count(trace_context) FROM _honker_finished")
        mods = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        print(sorted(seen), mods)
        """,
        path,
    )
    assert out == "[('plain', False), ('traced', True)] []"


def span_for(trace_id: int) -> NonRecordingSpan:
    return NonRecordingSpan(
        SpanContext(trace_id=trace_id, span_id=trace_id, is_remote=False, trace_flags=TraceFlags(1))
    )


def test_concurrent_requests_each_keep_their_own_span(rdb):
    # Threads (a sync web server's requests) and asyncio tasks (an async
    # one's) enqueue at once, each under its own span: every job carries
    # its own request's trace, never a neighbour's.
    q = rdb.queue("mail")

    def request(i: int) -> None:
        with trace.use_span(span_for(i)):
            for _ in range(20):
                q.enqueue({"request": i})

    threads = [threading.Thread(target=request, args=(i,)) for i in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def async_request(i: int) -> None:
        with trace.use_span(span_for(i)):
            for _ in range(20):
                await q.enqueue_async({"request": i})
                await asyncio.sleep(0)

    async def server() -> None:
        await asyncio.gather(*(async_request(i) for i in range(9, 17)))

    asyncio.run(server())
    rows = rdb.query("SELECT payload, trace_context FROM _honker_jobs")
    assert len(rows) == 320
    for payload, stored in rows:
        i = json.loads(payload)["request"]
        assert json.loads(stored)["traceparent"] == f"00-{i:032x}-{i:016x}-01"


def test_an_orm_session_carries_the_span_and_a_rollback_leaves_nothing(path):
    import honker.sqlalchemy as hsa
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session

    engine = create_engine(f"sqlite:///{path}")
    hsa.setup(engine)
    with engine.begin() as c:
        c.execute(text("CREATE TABLE orders (id INTEGER PRIMARY KEY)"))
    for order, commit in ((1, True), (2, False)):
        with trace.use_span(span_for(order)), Session(engine) as session:
            session.execute(text("INSERT INTO orders (id) VALUES (:id)"), {"id": order})
            hsa.enqueue(session, "mail", {"order": order})
            if commit:
                session.commit()
            else:
                session.rollback()
    with engine.connect() as c:
        rows = c.execute(text("SELECT payload, trace_context FROM _honker_jobs")).all()
        orders = c.execute(text("SELECT id FROM orders")).scalars().all()
    engine.dispose()
    assert orders == [1]
    assert [(json.loads(p), json.loads(t)["traceparent"]) for p, t in rows] == [
        ({"order": 1}, f"00-{1:032x}-{1:016x}-01")
    ]
