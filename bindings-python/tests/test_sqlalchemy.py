"""honker.sqlalchemy: the outbox on SQLAlchemy 2's own connection (the stdlib
sqlite3 module with the extension loaded; no honker.open in this process but
in the last test). Enqueue before and after the first ORM write, rollback
leaves no job, commit leaves exactly one, autocommit is refused, a honker
worker in another process handles the job, and the ORM's commit wakes this
process's asyncio consumers."""

from __future__ import annotations

import datetime
import json

import honker
import honker.sqlalchemy as hsa
import pytest
from conftest import HonkerListener, async_waiters_woken_by, honker_worker
from sqlalchemy import Integer, String, create_engine, event, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(String)


@pytest.fixture
def engine(path):
    e = create_engine(f"sqlite:///{path}")
    hsa.setup(e)
    Base.metadata.create_all(e)
    yield e
    e.dispose()


def jobs(engine) -> list[str]:
    with engine.connect() as c:
        return [r[0] for r in c.execute(text("SELECT payload FROM _honker_jobs ORDER BY id"))]


def orders(engine) -> int:
    with engine.connect() as c:
        return c.execute(text("SELECT count(*) FROM orders")).scalar_one()


@pytest.mark.parametrize("enqueue_first", [True, False], ids=["before-write", "after-write"])
def test_commit_leaves_exactly_one_job_and_rollback_none(engine, enqueue_first):
    def order_with_job(session, order_id: int, status: str) -> None:
        if enqueue_first:
            hsa.enqueue(session, "emails", {"order": order_id})
            session.add(Order(id=order_id, status=status))
        else:
            session.add(Order(id=order_id, status=status))
            session.flush()
            hsa.enqueue(session, "emails", {"order": order_id})

    with Session(engine) as session, session.begin():
        order_with_job(session, 1, "paid")
    assert orders(engine) == 1
    assert jobs(engine) == ['{"order":1}']

    with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
        order_with_job(session, 2, "declined")
        raise RuntimeError("payment declined")
    assert orders(engine) == 1
    assert jobs(engine) == ['{"order":1}']


def test_core_connection_and_options(engine):
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO orders (id, status) VALUES (7, 'paid')"))
        a = hsa.enqueue(conn, "emails", b"\x00raw", priority=5, dedupe_key="o7", delay=60)
        b = hsa.enqueue(conn, "emails", {"again": True}, dedupe_key="o7")
    assert a == b  # the dedupe key's live holder
    with engine.connect() as c:
        row = c.execute(
            text("SELECT typeof(payload), priority, state FROM _honker_jobs WHERE id = :i"),
            {"i": a},
        ).one()
    assert tuple(row) == ("blob", 5, "scheduled")


def test_every_option_of_queue_enqueue_reaches_the_sql_function(engine):
    """The helpers take ``Queue.enqueue``'s options (core's table) and send
    them in Honker's SQL names: a time and durations as ms."""
    at = datetime.datetime(2030, 1, 2, tzinfo=datetime.timezone.utc)
    with engine.begin() as conn:
        a = hsa.enqueue(conn, "emails", {}, run_at=at, max_attempts=7)
        b = hsa.enqueue(conn, "emails", {}, delay=datetime.timedelta(minutes=1), expires=3600)
    with engine.connect() as c:
        rows = c.execute(
            text(
                "SELECT id, run_at, max_attempts, expires_at - created_at, run_at - created_at"
                " FROM _honker_jobs ORDER BY id"
            )
        ).all()
    assert [tuple(r[:3]) for r in rows] == [(a, int(at.timestamp() * 1000), 7), (b, rows[1][1], 3)]
    assert (rows[1][3], rows[1][4]) == (3_600_000, 60_000)
    # The unique modes (ADR 37): unique_for in ms too, dedupe_by_payload.
    hour = datetime.timedelta(hours=1)
    with engine.begin() as conn:
        c = hsa.enqueue(conn, "sync", 1, dedupe_key="sync", unique="throttle", unique_for=hour)
        again = hsa.enqueue(conn, "sync", 2, dedupe_key="sync", unique="throttle", unique_for=hour)
        assert again == c
        d = hsa.enqueue(conn, "hashed", {"a": 1, "b": 2}, dedupe_by_payload=True)
        assert hsa.enqueue(conn, "hashed", {"b": 2, "a": 1.0}, dedupe_by_payload=True) == d
    with engine.connect() as conn:
        held = conn.execute(text("SELECT job_id, mode, period_ms FROM _honker_unique")).all()
    assert [tuple(r) for r in held] == [(c, "throttle", 3_600_000)]


def test_bad_input_is_a_honker_error_and_changes_nothing(engine):
    with Session(engine) as session, session.begin():
        session.add(Order(id=1, status="paid"))
        session.flush()
        with pytest.raises(honker.InvalidArgument):
            hsa.enqueue(session, "emails", {"x": 1}, max_attempts=0)
        with pytest.raises(honker.InvalidArgument):
            hsa.enqueue(session, "", {"x": 1})
        with pytest.raises(honker.InvalidArgument, match="unknown key"):
            hsa.enqueue(session, "emails", {"x": 1}, dedupe="typo")  # type: ignore[call-arg]
        with pytest.raises(honker.InvalidArgument, match="delay must be"):
            hsa.enqueue(session, "emails", {"x": 1}, delay="soon")  # type: ignore[typeddict-item]
    assert orders(engine) == 1
    assert jobs(engine) == []


def test_an_engine_without_setup_is_refused_instead_of_autocommitting(path):
    e = create_engine(f"sqlite:///{path}")

    @event.listens_for(e, "connect")
    def _load(dbapi_connection, _record):
        # The extension, but the sqlite3 module's own (deferred) transactions.
        honker.load_extension(dbapi_connection)
        dbapi_connection.execute("SELECT honker_bootstrap()")

    Base.metadata.create_all(e)
    with pytest.raises(honker.InvalidArgument), Session(e) as session, session.begin():
        hsa.enqueue(session, "emails", {"order": 1})
    with Session(e) as session, session.begin():
        assert session.execute(text("SELECT count(*) FROM _honker_jobs")).scalar_one() == 0
    e.dispose()


def test_a_honker_worker_in_another_process_handles_the_job(engine, path):
    with Session(engine) as session, session.begin():
        session.add(Order(id=1, status="paid"))
        hsa.enqueue(session, "emails", {"to": "alice@example.com"})
    engine.dispose()
    assert honker_worker(path, "emails") == "alice@example.com"
    assert jobs(engine) == []


def events(engine) -> list[dict]:
    import json

    with engine.connect() as c:
        raw = c.execute(text("SELECT honker_stream_read('orders', 0, 100)")).scalar_one()
    return [{k: e[k] for k in ("offset", "key", "payload")} for e in json.loads(raw)]


def test_publish_and_notify_commit_with_the_session_or_not_at_all(engine, path):
    listener = HonkerListener(path, "dashboard")
    with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
        session.add(Order(id=1, status="declined"))
        session.flush()
        hsa.publish(session, "orders", {"order": 1})
        hsa.notify(session, "dashboard", {"order": 1})
        raise RuntimeError("payment declined")
    assert events(engine) == []
    with Session(engine) as session, session.begin():
        session.add(Order(id=2, status="paid"))
        assert hsa.publish(session, "orders", {"order": 2}, key="o-2", idempotency_key="p-2") == 1
        assert hsa.notify(session, "dashboard", {"order": 2}) > 0
    # The producer that retried after a lost answer gets the first offset.
    with Session(engine) as session, session.begin():
        assert hsa.publish(session, "orders", {"order": 2}, idempotency_key="p-2") == 1
    assert events(engine) == [{"offset": 1, "key": "o-2", "payload": {"order": 2}}]
    # The rolled-back notification was never delivered; the committed one was.
    assert listener.heard() == {"order": 2}
    # Every option of core's table, by its name; checked by core's SQL function.
    with Session(engine) as session, session.begin():
        assert hsa.publish(session, "alerts", {"n": 1}, priority=4) == 1
    with engine.connect() as c:
        raw = c.execute(text("SELECT honker_stream_read('alerts', 0, 100)")).scalar_one()
    assert [e["priority"] for e in json.loads(raw)] == [4]
    with Session(engine) as session, session.begin():
        with pytest.raises(honker.InvalidArgument, match="priority must be an integer"):
            hsa.publish(session, "alerts", {"n": 2}, priority="high")
        with pytest.raises(honker.InvalidArgument, match='unknown key "prio"'):
            hsa.publish(session, "alerts", {"n": 2}, prio=1)
        with pytest.raises(honker.InvalidArgument):
            hsa.publish(session, "", {"x": 1})
        with pytest.raises(honker.InvalidArgument):
            hsa.notify(session, "dashboard", "x" * (64 * 1024 + 1))
    assert events(engine) == [{"offset": 1, "key": "o-2", "payload": {"order": 2}}]


def test_an_orm_commit_wakes_this_process_s_async_waiters_on_the_loop(engine, path):
    # A web app's shape: a request thread commits an order with its job, event
    # and notification through the ORM (the stdlib sqlite3: a second SQLite
    # library in the process), while the same process's asyncio consumer,
    # subscriber and listener wait on the loop (_loopwait: no thread each).
    def request() -> None:
        with Session(engine) as session, session.begin():
            session.add(Order(id=1, status="paid"))
            hsa.enqueue(session, "emails", {"order": 1})
            hsa.publish(session, "orders", {"order": 1})
            hsa.notify(session, "dashboard", {"order": 1})

    got = async_waiters_woken_by(path, request, "emails", "orders", "dashboard")
    assert got == {"job": {"order": 1}, "event": {"order": 1}, "notification": {"order": 1}}
    assert jobs(engine) == []
