"""honker with Django (5.1 or later, for SQLite's ``transaction_mode``): the
outbox on Django's own connection.

::

    # settings.py
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "app.db",
        "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 10},
    }}

    # apps.py, in your AppConfig.ready()
    import honker.django
    honker.django.setup()

    # a view
    with transaction.atomic():
        order = Order.objects.create(user_id=42, status="paid")
        honker.django.enqueue("emails", {"order": order.id})

Django's connections run honker on the stdlib ``sqlite3`` module's library
(Django's backend), with honker's extension loaded into each of them.
The web app's process may also run a worker on the same file with
``honker.open`` (an in-process worker next to the ORM): on Linux that is
safe in either order of opening, because honker's own SQLite locks with
open-file-description locks, so it and the ``sqlite3`` module's library
exclude each other as two processes would (ADR 13, docs/orm.md). On a
Linux kernel without them (before 3.15) ``honker.open`` refuses
(``UNSAFE``) a file this process already has open through another library,
and on other platforms nothing guards the layout: run the worker in another
process there (``honker.open`` in that process is fine).

``transaction_mode = "IMMEDIATE"`` makes every ``atomic`` block begin with
``BEGIN IMMEDIATE``: the write lock is taken when the block starts, so a
transaction never fails half-way with ``SQLITE_BUSY`` upgrading from read to
write. Its cost: ``atomic`` blocks that only read take the lock too, and
blocks of all processes run one at a time (each waits up to ``timeout``).
Outside ``atomic`` (Django's autocommit), :func:`enqueue` refuses instead of
committing the job on its own.

Semantics are at-least-once: see the README.
"""

from __future__ import annotations

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


def setup(using: str | None = None) -> None:
    """Loads honker's extension into every SQLite connection Django opens for
    the alias ``using`` (all SQLite aliases by default), creating honker's
    tables, and into those already open. Checks that each such alias has
    ``OPTIONS["transaction_mode"] = "IMMEDIATE"`` (Django 5.1+) and raises
    ``ImproperlyConfigured`` otherwise. Call it once, from an
    ``AppConfig.ready()``."""
    from django.core.exceptions import ImproperlyConfigured
    from django.db import connections
    from django.db.backends.signals import connection_created

    aliases = [using] if using else list(connections)
    for alias in aliases:
        wrapper = connections[alias]
        if wrapper.vendor != "sqlite":
            continue
        mode = wrapper.settings_dict.get("OPTIONS", {}).get("transaction_mode")
        if str(mode).upper() != "IMMEDIATE":
            raise ImproperlyConfigured(
                f"honker.django: DATABASES[{alias!r}]['OPTIONS']['transaction_mode'] must be "
                "'IMMEDIATE' (Django 5.1+), so that atomic blocks take the write lock when "
                "they begin"
            )
        if wrapper.connection is not None:
            _prepare(wrapper.connection)

    def _created(sender: Any, connection: Any, **_kwargs: Any) -> None:
        if connection.vendor == "sqlite" and connection.alias in aliases:
            _prepare(connection.connection)

    connection_created.connect(_created, weak=False, dispatch_uid=f"honker-{using or '*'}")


def _prepare(dbapi_connection: Any) -> None:
    load_extension(dbapi_connection)
    dbapi_connection.execute("SELECT honker_bootstrap()")


def enqueue(
    queue: str,
    payload: Any,
    *,
    using: str = "default",
    **options: Unpack[EnqueueOptions],
) -> int:
    """Enqueues a job on Django's connection ``using``, inside the current
    ``transaction.atomic`` block: it commits or rolls back with your rows.
    The options are :meth:`honker.Queue.enqueue`'s. Returns the job id (with
    a dedupe key a live job holds: that job's id). Outside ``atomic`` it
    refuses (``InvalidArgument``) instead of committing the job on its own."""
    sql, args = enqueue_call(queue, payload, options, placeholder="%s")
    return _run(using, sql, args, "enqueue", "the job")


def publish(
    stream: str,
    payload: Any,
    *,
    using: str = "default",
    **options: Unpack[PublishOptions],
) -> int:
    """Publishes an event on Django's connection ``using``, inside the
    current ``transaction.atomic`` block (the outbox for events). The
    options are :meth:`honker.Stream.publish`'s. Returns its offset. Outside
    ``atomic`` it refuses (``InvalidArgument``)."""
    sql, args = publish_call(stream, payload, options, placeholder="%s")
    return _run(using, sql, args, "publish", "the event")


def notify(channel: str, payload: Any, *, using: str = "default") -> int:
    """Sends a notification on Django's connection ``using``, delivered only
    if the current ``transaction.atomic`` block commits. Returns its id.
    Outside ``atomic`` it refuses (``InvalidArgument``)."""
    sql, args = notify_call(channel, payload, placeholder="%s")
    return _run(using, sql, args, "notify", "the notification")


def _run(using: str, sql: str, args: list[Any], verb: str, what: str) -> Any:
    """Runs one honker call inside the current ``atomic`` block."""
    from django.db import connections

    wrapper = connections[using]
    if not wrapper.in_atomic_block:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"honker.django.{verb} runs inside transaction.atomic(), so that {what} commits "
            f"with your rows; outside it, {what} would commit on its own",
        )
    with honker_errors(), wrapper.cursor() as cursor:
        cursor.execute(sql, args)
        return cursor.fetchone()[0]
