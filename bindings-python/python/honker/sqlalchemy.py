"""honker with SQLAlchemy 2 on SQLite: the outbox on your ORM's own connection.

::

    engine = create_engine("sqlite:///app.db")
    honker.sqlalchemy.setup(engine)

    with Session(engine) as session, session.begin():
        session.add(Order(user_id=42, status="paid"))
        honker.sqlalchemy.enqueue(session, "emails", {"to": "alice@example.com"})
        honker.sqlalchemy.publish(session, "orders", {"order": 42, "status": "paid"})
        honker.sqlalchemy.notify(session, "dashboard", {"order": 42})
    # the order, its email job, its event and the notification committed
    # together, or none did

The engine's connections run honker on the stdlib ``sqlite3`` module's
library, with honker's extension loaded into each of them.
The web app's process may also run a worker on the same file with
``honker.open`` (an in-process worker next to the ORM): on Linux that is
safe in either order of opening, because honker's own SQLite locks with
open-file-description locks, so it and the ``sqlite3`` module's library
exclude each other as two processes would (ADR 13, docs/orm.md). On a
Linux kernel without them (before 3.15) ``honker.open`` refuses
(``UNSAFE``) a file this process already has open through another library,
and on other platforms nothing guards the layout: run the worker in another
process there (``honker.open`` in that process is fine).

``setup(engine)`` hands transactions to SQLAlchemy: the ``sqlite3`` module's
own transaction handling (a deferred ``BEGIN`` sent lazily before the first
INSERT/UPDATE/DELETE, so a ``SELECT honker_queue_enqueue(...)`` before it ran in
autocommit and committed on its own) is turned off, and every transaction
SQLAlchemy begins starts with ``BEGIN IMMEDIATE``. The cost: every session
takes the file's write lock when it begins, read-only ones too, so sessions
of all processes run one at a time (each waits up to the busy timeout,
``connect_args={"timeout": ...}``). Where read-heavy sessions matter, give
reads an engine of their own without ``setup`` (they then cannot enqueue:
:func:`enqueue` refuses a connection that is not in a transaction).

Semantics are at-least-once: see the README.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from ._sql import (
    EnqueueOptions,
    PublishOptions,
    enqueue_call,
    honker_errors,
    notify_call,
    publish_call,
)
from .errors import InvalidArgument
from .extension import load_extension

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["enqueue", "notify", "publish", "setup"]


def setup(engine: Any) -> None:
    """Prepares ``engine`` (a SQLAlchemy 2 ``Engine`` on ``sqlite+pysqlite``)
    for the outbox: every new connection loads honker's extension and
    bootstraps honker's tables, and every transaction begins with
    ``BEGIN IMMEDIATE``. Call it once, before the engine's first connection."""
    from sqlalchemy import event

    if engine.dialect.name != "sqlite" or engine.dialect.driver != "pysqlite":
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"honker.sqlalchemy supports sqlite+pysqlite engines, not "
            f"{engine.dialect.name}+{engine.dialect.driver}"
            + (
                ": use a sync engine in sync (def) endpoints, which FastAPI runs on its "
                "thread pool (docs/orm.md, 'FastAPI and async SQLAlchemy')"
                if engine.dialect.driver == "aiosqlite"
                else ""
            ),
        )

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # No implicit BEGIN from the sqlite3 module: SQLAlchemy's begin
        # event below sends it, before any statement of the transaction.
        dbapi_connection.isolation_level = None
        load_extension(dbapi_connection)
        dbapi_connection.execute("SELECT honker_bootstrap()")

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def enqueue(
    session_or_connection: Any,
    queue: str,
    payload: Any,
    **options: Unpack[EnqueueOptions],
) -> int:
    """Enqueues a job on the ORM's own connection, inside its current
    transaction: it commits or rolls back with your rows. Takes a ``Session``
    or a ``Connection``; the options are :meth:`honker.Queue.enqueue`'s.
    Returns the job id (with a dedupe key a live job holds: that job's id).

    Refuses (``InvalidArgument``) a connection that is not inside a
    transaction instead of committing the job on its own: call
    :func:`setup` on the engine."""
    sql, args = enqueue_call(queue, payload, options)
    return _run(session_or_connection, sql, args, "the job")


def publish(
    session_or_connection: Any,
    stream: str,
    payload: Any,
    **options: Unpack[PublishOptions],
) -> int:
    """Publishes an event on the ORM's own connection, inside its current
    transaction (the outbox for events): it exists only if your rows
    commit. The options are :meth:`honker.Stream.publish`'s. Returns the
    event's offset. Refuses a connection outside a transaction, as
    :func:`enqueue` does."""
    sql, args = publish_call(stream, payload, options)
    return _run(session_or_connection, sql, args, "the event")


def notify(session_or_connection: Any, channel: str, payload: Any) -> int:
    """Sends a notification on the ORM's own connection, delivered to every
    listener (any process) only if the current transaction commits. Returns
    its id. Refuses a connection outside a transaction."""
    sql, args = notify_call(channel, payload)
    return _run(session_or_connection, sql, args, "the notification")


def _run(session_or_connection: Any, sql: str, args: list[Any], what: str) -> Any:
    """Runs one honker call inside the connection's open transaction."""
    conn = _connection(session_or_connection)
    dbapi = conn.connection.dbapi_connection
    if not dbapi.in_transaction:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"this connection is not inside a transaction, so {what} would commit on its "
            "own: call honker.sqlalchemy.setup(engine) before the engine's first connection",
        )
    with honker_errors():
        return conn.exec_driver_sql(sql, tuple(args)).scalar_one()


def _connection(session_or_connection: Any) -> Any:
    """The SQLAlchemy ``Connection`` to run on, its transaction begun."""
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session

    if isinstance(session_or_connection, Session):
        return session_or_connection.connection()  # begins the session's transaction
    if isinstance(session_or_connection, Connection):
        if not session_or_connection.in_transaction():
            session_or_connection.begin()
        return session_or_connection
    raise InvalidArgument("INVALID_ARGUMENT", "enqueue takes a SQLAlchemy Session or Connection")
