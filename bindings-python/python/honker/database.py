"""Opening a honker file, running your own SQL through honker's connection,
and the outbox transaction (sync, and async for asyncio: see ``_writer``).

Your own SQLite driver (the stdlib ``sqlite3`` module, an ORM) may have the
same file open in this process (ADR 13); to enqueue inside *its*
transactions, load the extension into it (``honker.load_extension``,
``honker.sqlalchemy``, ``honker.django``).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from typing import Any, Callable, TypeVar, Union

from . import _args, _native, _threads
from ._native import ManualClock
from ._time import Seconds, seconds
from ._writer import Writer, current_tx
from .errors import InvalidArgument
from .queue import Queue

Params = Union[Sequence[Any], dict[str, Any], None]
T = TypeVar("T")


class Transaction:
    """A write transaction (``BEGIN IMMEDIATE``) on honker's connection.

    Use it as a context manager: it commits when the block ends and rolls
    back when the block raises (``with db.transaction() as tx``, or ``async
    with db.transaction_async() as tx`` in asyncio code). Pass it as ``tx=``
    to honker calls so their effects commit with your own
    ``tx.execute(...)`` writes. While it is open, other writes of this
    process wait for it, in order; a write of the same context (thread, or
    asyncio task) that does not pass it fails at once with
    :class:`honker.InvalidArgument` instead of waiting for itself.
    """

    def __init__(self, native: _native.Transaction, db: Database) -> None:
        self._native = native
        self._db = db
        self._released = False
        current_tx.set(weakref.ref(self))

    def execute(self, sql: str, params: Params = None) -> int:
        """Runs one statement; returns the number of rows changed."""
        return self._native.execute(sql, params)

    def query(self, sql: str, params: Params = None) -> list[tuple]:
        """Runs a query inside the transaction (sees its uncommitted writes)."""
        return self._native.query(sql, params)[1]

    async def execute_async(self, sql: str, params: Params = None) -> int:
        return await _threads.run(self.execute, sql, params)

    async def query_async(self, sql: str, params: Params = None) -> list[tuple]:
        return await _threads.run(self.query, sql, params)

    def commit(self) -> None:
        try:
            self._native.commit()
        finally:
            self._release()

    def rollback(self) -> None:
        try:
            self._native.rollback()
        finally:
            self._release()

    async def commit_async(self) -> None:
        await _threads.run(self.commit)

    async def rollback_async(self) -> None:
        await _threads.run(self.rollback)

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._db._writer.release()

    def __del__(self) -> None:
        # Dropped without commit or rollback: roll back, and let the next
        # writer of the process have its turn.
        if not getattr(self, "_released", True):
            try:
                self._native.rollback()
            except Exception:
                pass  # closed meanwhile: nothing left to roll back
            finally:
                self._release()

    @property
    def is_open(self) -> bool:
        return self._native.is_open

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type | None, exc: object, tb: object) -> None:
        if exc_type is None and self._native.is_open:
            self.commit()
        else:
            self.rollback()


class _AsyncTransaction:
    """``async with db.transaction_async() as tx``: waits for the writer off
    the event loop (on no thread), commits when the block ends, rolls back
    when it raises."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._tx: Transaction | None = None

    async def __aenter__(self) -> Transaction:
        db = self._db
        db._check_context()
        native = await db._writer.submit(db._native.transaction, holds=True)
        self._tx = Transaction(native, db)
        return self._tx

    async def __aexit__(self, exc_type: type | None, exc: object, tb: object) -> None:
        tx = self._tx
        assert tx is not None
        if exc_type is None and tx.is_open:
            await tx.commit_async()
        else:
            await tx.rollback_async()


class Database:
    """An open honker file (``honker.open(path)``). Thread-safe; share it.

    A process forked while honker was open cannot use honker: the
    parent's ``Database`` refuses every call there with
    :class:`honker.Closed`, and ``honker.open`` raises
    :class:`honker.Unsafe`. Start worker processes with the ``spawn`` or
    ``forkserver`` method, or fork before opening (README: "fork() and
    worker processes").
    """

    def __init__(self, native: _native.Database, busy_timeout: float) -> None:
        self._native = native
        self.path: str = os.fspath(native.path)
        self._writer = Writer(busy_timeout)

    def _check_context(self) -> None:
        ref = current_tx.get()
        tx = ref() if ref is not None else None
        if tx is not None and tx._db is self and tx.is_open:
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                "this context (thread or asyncio task) has an open honker transaction on "
                "this database: pass it to the call (tx=...), or commit it first",
            )

    def _write(self, tx: Transaction | None, fn: Callable[[], T]) -> T:
        """A write: inside ``tx`` at once, else at this caller's turn."""
        if tx is not None:
            return fn()
        self._check_context()
        return self._writer.run(fn)

    async def _write_async(self, tx: Transaction | None, fn: Callable[[], T]) -> T:
        if tx is not None:
            return await _threads.run(fn)
        self._check_context()
        return await self._writer.submit(fn)

    def __repr__(self) -> str:
        return f"honker.Database({self.path!r})"

    def queue(
        self,
        name: str,
        *,
        lease: Seconds | None = None,
        max_attempts: int | None = None,
        backoff_base: Seconds | None = None,
        backoff_max: Seconds | None = None,
        backoff_jitter: float | None = None,
    ) -> Queue:
        """A handle on the queue ``name`` (creating it writes nothing). The
        options are this handle's defaults: ``lease`` (60 s), ``max_attempts``
        (3) and the retry backoff (1 s doubling to 1 h, jitter 0.5)."""
        _args.text("name", name)
        _args.optional_integer("max_attempts", max_attempts, _args.U32)
        return Queue(
            self,
            self._native.queue(
                name,
                lease=seconds("lease", lease),
                max_attempts=max_attempts,
                backoff_base=seconds("backoff_base", backoff_base),
                backoff_max=seconds("backoff_max", backoff_max),
                backoff_jitter=backoff_jitter,
            ),
        )

    def transaction(self) -> Transaction:
        """Starts a write transaction; see :class:`Transaction`. In asyncio
        code, use :meth:`transaction_async`: this one waits for the writer on
        the calling thread."""
        self._check_context()
        self._writer.hold(for_tx=True)
        try:
            native = self._native.transaction()
        except BaseException:
            self._writer.release()
            raise
        return Transaction(native, self)

    def transaction_async(self) -> _AsyncTransaction:
        """``async with db.transaction_async() as tx:`` — a write transaction
        for asyncio code that may ``await`` inside it (a payment API call):
        waiting for the writer happens off the event loop, on no thread, and
        other tasks' writes wait for it in order."""
        return _AsyncTransaction(self)

    def execute(self, sql: str, params: Params = None) -> int:
        """Runs one statement of your own in its own transaction."""
        return self._write(None, lambda: self._native.execute(sql, params))

    async def execute_async(self, sql: str, params: Params = None) -> int:
        return await self._write_async(None, lambda: self._native.execute(sql, params))

    def query(self, sql: str, params: Params = None) -> list[tuple]:
        """Runs a read-only query on a reader connection."""
        return self._native.query(sql, params)[1]

    def query_columns(self, sql: str, params: Params = None) -> tuple[list[str], list[tuple]]:
        """Like :meth:`query`, with the column names."""
        return self._native.query(sql, params)

    def maintain(self) -> dict[str, int]:
        """Prunes finished jobs and results past retention."""
        return self._write(None, self._native.maintain)

    def close(self) -> None:
        """Closes the connections; later calls raise :class:`honker.Closed`."""
        self._native.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open(
    path: str | os.PathLike[str],
    *,
    durability: str | None = None,
    busy_timeout: Seconds | None = None,
    readers: int | None = None,
    max_payload_bytes: int | None = None,
    watch_fallback: Seconds | None = None,
    auto_maintain_every: Seconds | None = None,
    clock: ManualClock | None = None,
) -> Database:
    """Opens (creating if needed) the honker file at ``path``: WAL mode,
    honker's tables migrated, your tables left alone. An option left out
    (``None``) takes core's default, the same on every surface.

    ``durability`` is ``"normal"`` (the default: survives a process crash;
    the last commits can be lost on power loss) or ``"full"`` (fsync every
    commit). ``busy_timeout`` (default 10 s) is how long a write waits for
    another process's lock. ``readers`` (4) sizes the read pool;
    ``max_payload_bytes`` (1 MiB) bounds payloads and results.
    ``clock`` replaces the system clock (tests: :class:`honker.ManualClock`).
    """
    if readers is not None:
        _args.integer("readers", readers, _args.U32)
    if max_payload_bytes is not None:
        _args.integer("max_payload_bytes", max_payload_bytes, _args.SIZE)
    native = _native.Database(
        os.fspath(path),
        durability=durability,
        busy_timeout=seconds("busy_timeout", busy_timeout),
        readers=readers,
        max_payload_bytes=max_payload_bytes,
        watch_fallback=seconds("watch_fallback", watch_fallback),
        auto_maintain_every=seconds("auto_maintain_every", auto_maintain_every),
        clock=clock,
    )
    return Database(native, native.busy_timeout)
