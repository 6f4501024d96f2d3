"""honker.django: the outbox on Django's own connection (the stdlib sqlite3
module with the extension loaded; no honker.open in this process but in the
last test). Enqueue before and after the first ORM write, rollback leaves no
job, commit leaves exactly one, autocommit is refused, a setting without
IMMEDIATE is refused, a honker worker in another process handles the job,
and the ORM's commit wakes this process's asyncio consumers."""

from __future__ import annotations

import tempfile
from pathlib import Path

import django
import honker
import honker.django as hdj
import pytest
from conftest import HonkerListener, async_waiters_woken_by, honker_worker
from django.conf import settings

# Removed when the interpreter exits (TemporaryDirectory's finalizer).
_SCRATCH = tempfile.TemporaryDirectory(prefix="honker-django-")
DB = Path(_SCRATCH.name) / "app.db"

if not settings.configured:
    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(DB),
                "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 10},
            },
            "deferred": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(DB.with_name("deferred.db")),
            },
        },
        INSTALLED_APPS=[],
        USE_TZ=True,
    )
    django.setup()

from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.db import connection, transaction  # noqa: E402

hdj.setup("default")
with connection.cursor() as c:
    c.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, status TEXT)")


@pytest.fixture(autouse=True)
def empty():
    with connection.cursor() as c:
        c.execute("DELETE FROM orders")
        c.execute("DELETE FROM _honker_jobs")
    yield


def rows(sql: str) -> list[tuple]:
    with connection.cursor() as c:
        c.execute(sql)
        return c.fetchall()


def add_order(order_id: int) -> None:
    with connection.cursor() as c:
        c.execute("INSERT INTO orders (id, status) VALUES (%s, 'paid')", [order_id])


@pytest.mark.parametrize("enqueue_first", [True, False], ids=["before-write", "after-write"])
def test_commit_leaves_exactly_one_job_and_rollback_none(enqueue_first):
    def order_with_job(order_id: int) -> None:
        if enqueue_first:
            hdj.enqueue("emails", {"order": order_id})
            add_order(order_id)
        else:
            add_order(order_id)
            hdj.enqueue("emails", {"order": order_id})

    with transaction.atomic():
        order_with_job(1)
    with pytest.raises(RuntimeError), transaction.atomic():
        order_with_job(2)
        raise RuntimeError("payment declined")
    assert rows("SELECT id FROM orders") == [(1,)]
    assert rows("SELECT payload FROM _honker_jobs") == [('{"order":1}',)]


def test_options_and_a_nested_atomic_block():
    with transaction.atomic():
        add_order(7)
        a = hdj.enqueue("emails", b"\x00raw", priority=5, dedupe_key="o7", delay=60)
        with pytest.raises(RuntimeError), transaction.atomic():  # a savepoint
            hdj.enqueue("emails", {"inner": True})
            raise RuntimeError("inner block rolls back")
        assert hdj.enqueue("emails", {"again": True}, dedupe_key="o7") == a
    assert rows("SELECT typeof(payload), priority, state FROM _honker_jobs") == [
        ("blob", 5, "scheduled")
    ]


def test_autocommit_and_bad_input_are_refused_and_change_nothing():
    with pytest.raises(honker.InvalidArgument):
        hdj.enqueue("emails", {"order": 1})
    with transaction.atomic():
        add_order(1)
        with pytest.raises(honker.InvalidArgument):
            hdj.enqueue("emails", {"x": 1}, max_attempts=0)
    assert rows("SELECT id FROM orders") == [(1,)]
    assert rows("SELECT count(*) FROM _honker_jobs") == [(0,)]


def test_a_database_without_immediate_transactions_is_refused():
    with pytest.raises(ImproperlyConfigured):
        hdj.setup("deferred")


def test_a_honker_worker_in_another_process_handles_the_job():
    with transaction.atomic():
        add_order(1)
        hdj.enqueue("emails", {"to": "alice@example.com"})
    connection.close()
    assert honker_worker(DB, "emails") == "alice@example.com"
    assert rows("SELECT count(*) FROM _honker_jobs") == [(0,)]


def test_publish_and_notify_commit_with_the_atomic_block_or_not_at_all():
    import json

    listener = HonkerListener(DB, "dashboard")
    with pytest.raises(RuntimeError), transaction.atomic():
        add_order(1)
        hdj.publish("orders", {"order": 1})
        hdj.notify("dashboard", {"order": 1})
        raise RuntimeError("payment declined")
    with transaction.atomic():
        add_order(2)
        offset = hdj.publish("orders", {"order": 2}, key="o-2", priority=2)
        hdj.notify("dashboard", {"order": 2})
    [(raw,)] = rows(f"SELECT honker_stream_read('orders', {offset - 1}, 100)")
    assert [(e["key"], e["payload"], e["priority"]) for e in json.loads(raw)] == [
        ("o-2", {"order": 2}, 2)
    ]
    assert listener.heard() == {"order": 2}
    with pytest.raises(honker.InvalidArgument):
        hdj.publish("orders", {"order": 3})  # outside atomic: refused
    with pytest.raises(honker.InvalidArgument):
        hdj.notify("dashboard", {"order": 3})
    [(raw,)] = rows(f"SELECT honker_stream_read('orders', {offset}, 100)")
    assert json.loads(raw) == []


def test_an_orm_commit_wakes_this_process_s_async_waiters_on_the_loop():
    # As in test_sqlalchemy: a request thread commits through Django (its own
    # connection on that thread), while this process's asyncio consumer,
    # subscriber and listener wait on the loop.
    def request() -> None:
        try:
            with transaction.atomic():
                add_order(7)
                hdj.enqueue("receipts", {"order": 7})
                hdj.publish("ledger", {"order": 7})
                hdj.notify("board", {"order": 7})
        finally:
            connection.close()  # this thread's connection

    got = async_waiters_woken_by(DB, request, "receipts", "ledger", "board")
    assert got == {"job": {"order": 7}, "event": {"order": 7}, "notification": {"order": 7}}
