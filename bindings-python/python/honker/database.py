"""Opening a honker file, running your own SQL through honker's connection,
and the outbox transaction.

One SQLite library per process: do your own reads and writes on a honker
file through ``db.execute``/``db.query``/``tx.execute``, or use the stdlib
``sqlite3`` module with the extension loaded (``honker.load_extension``) —
not both on the same file in one process.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from typing import Any, Union

from . import _native
from ._native import ManualClock
from ._time import Seconds, seconds
from .queue import Queue

Params = Union[Sequence[Any], dict[str, Any], None]

# Open databases of this process, by path (see extension.load_extension).
_open: weakref.WeakSet[Database] = weakref.WeakSet()


class Transaction:
    """A write transaction (``BEGIN IMMEDIATE``) on honker's connection.

    Use it as a context manager: it commits when the block ends and rolls
    back when the block raises. Pass it as ``tx=`` to honker calls so their
    effects commit with your own ``tx.execute(...)`` writes. While it is
    open, other writes of this process wait for it.
    """

    def __init__(self, native: _native.Transaction) -> None:
        self._native = native

    def execute(self, sql: str, params: Params = None) -> int:
        """Runs one statement; returns the number of rows changed."""
        return self._native.execute(sql, params)

    def query(self, sql: str, params: Params = None) -> list[tuple]:
        """Runs a query inside the transaction (sees its uncommitted writes)."""
        return self._native.query(sql, params)[1]

    def commit(self) -> None:
        self._native.commit()

    def rollback(self) -> None:
        self._native.rollback()

    @property
    def is_open(self) -> bool:
        return self._native.is_open

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type | None, exc: object, tb: object) -> None:
        if exc_type is None and self._native.is_open:
            self._native.commit()
        else:
            self._native.rollback()


class Database:
    """An open honker file (``honker.open(path)``). Thread-safe; share it.

    A process forked while honker was open cannot use honker: the
    parent's ``Database`` refuses every call there with
    :class:`honker.Closed`, and ``honker.open`` raises
    :class:`honker.Unsafe`. Start worker processes with the ``spawn`` or
    ``forkserver`` method, or fork before opening (README: "fork() and
    worker processes").
    """

    def __init__(self, native: _native.Database) -> None:
        self._native = native
        self.path: str = os.fspath(native.path)
        _open.add(self)

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
        return Queue(
            self._native.queue(
                name,
                lease=seconds("lease", lease),
                max_attempts=max_attempts,
                backoff_base=seconds("backoff_base", backoff_base),
                backoff_max=seconds("backoff_max", backoff_max),
                backoff_jitter=backoff_jitter,
            )
        )

    def transaction(self) -> Transaction:
        """Starts a write transaction; see :class:`Transaction`."""
        return Transaction(self._native.transaction())

    def execute(self, sql: str, params: Params = None) -> int:
        """Runs one statement of your own in its own transaction."""
        return self._native.execute(sql, params)

    def query(self, sql: str, params: Params = None) -> list[tuple]:
        """Runs a read-only query on a reader connection."""
        return self._native.query(sql, params)[1]

    def query_columns(self, sql: str, params: Params = None) -> tuple[list[str], list[tuple]]:
        """Like :meth:`query`, with the column names."""
        return self._native.query(sql, params)

    def maintain(self) -> dict[str, int]:
        """Prunes finished jobs and results past retention."""
        return self._native.maintain()

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
    durability: str = "normal",
    busy_timeout: Seconds = 10.0,
    readers: int = 4,
    max_payload_bytes: int = 1 << 20,
    watch_fallback: Seconds = 0.1,
    auto_maintain_every: Seconds = 300.0,
    clock: ManualClock | None = None,
) -> Database:
    """Opens (creating if needed) the honker file at ``path``: WAL mode,
    honker's tables migrated, your tables left alone.

    ``durability`` is ``"normal"`` (survives a process crash; the last
    commits can be lost on power loss) or ``"full"`` (fsync every commit).
    ``busy_timeout`` is how long a write waits for another process's lock.
    ``clock`` replaces the system clock (tests: :class:`honker.ManualClock`).
    """
    return Database(
        _native.Database(
            os.fspath(path),
            durability=durability,
            busy_timeout=seconds("busy_timeout", busy_timeout),
            readers=readers,
            max_payload_bytes=max_payload_bytes,
            watch_fallback=seconds("watch_fallback", watch_fallback),
            auto_maintain_every=seconds("auto_maintain_every", auto_maintain_every),
            clock=clock,
        )
    )
