"""What a claim stream, a subscription, a listener and a group consumer
share: core's ``Reader`` (a next with a wait, a look without I/O, a short
take, close), wrapped once for both of Python's concurrency models."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import _loopwait, _threads
from ._time import Seconds, seconds

if TYPE_CHECKING:
    from .database import Database

T = TypeVar("T")
R = TypeVar("R", bound="_Reader[Any]")

# Items handed out in a row without waiting before the loop gets a turn.
_FAST_MAX = 256


class _Waiter:
    """One native ``next`` at a time, on honker's threads, for asyncio: a
    cancelled ``__anext__`` leaves its wait running, and the next
    ``__anext__`` takes its result, so nothing handed out is lost or
    reordered by a cancellation."""

    def __init__(self) -> None:
        self._pending: concurrent.futures.Future[Any] | None = None

    async def next(self, call: Any, wait: float) -> Any:
        if self._pending is None:
            self._pending = _threads.submit(call, wait)
        pending = self._pending
        try:
            # shield: cancelling the awaiting task does not cancel the wait
            # (it goes on; the next call collects its result).
            result = await asyncio.shield(asyncio.wrap_future(pending))
        except asyncio.CancelledError:
            raise
        except BaseException:
            self._pending = None
            raise
        self._pending = None
        return result


class _Reader(Generic[T]):
    """``next(wait)``, the sync and async iterators, ``closed``, ``close``
    and the context managers, for every reader of core.

    The sync iterator waits in native code. The async one hands out what is
    there on the loop thread without waiting, and otherwise sleeps on the
    loop itself until a commit (``_loopwait``: one readiness pipe per
    database and loop, shared with every other wait there, so a thousand
    idle readers hold no thread and no descriptor of their own). Where the
    loop has no ``add_reader`` (Windows' proactor), or a lock is held, it
    waits on honker's threads instead, one native ``next`` at a time.

    A reader says how it differs through a few hooks: ``_ready`` (what it
    hands out without waiting), ``_look``/``_take``/``_key`` (its wait on
    the loop) and ``_on_thread`` (its wait on a thread)."""

    _row: Callable[[tuple[Any, ...]], T]
    # Waits with the same key (not None) share a look (``_loopwait.poll``).
    _key: object = None

    def __init__(self, native: Any, wait: float, db: Database) -> None:
        self._native = native
        self._wait = wait
        self._db = db
        self._waiter = _Waiter()
        self._streak = 0
        # What the last look took: a row, or False (a lock is held: wait on
        # a thread); the take hands it out.
        self._taken: tuple[Any, ...] | bool | None = None

    @property
    def closed(self) -> bool:
        return bool(self._native.closed)

    def next(self, wait: Seconds | None = None) -> T | None:
        """The next item, waiting up to ``wait`` seconds (default: this
        reader's), or None."""
        w = seconds("wait", wait)
        row = self._buffered()
        if row is None:
            row = self._native.next(self._wait if w is None else w)
        return None if row is None else self._row(row)

    def close(self) -> object:
        """Stops, and wakes a waiting iteration."""
        return self._native.close()

    async def aclose(self) -> object:
        return await _threads.run(self.close)

    def __enter__(self: R) -> R:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self: R) -> R:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        native = self._native
        while True:
            if native.closed:
                raise StopIteration
            row = self._buffered()
            if row is None:
                row = native.next(self._wait)
            if row is not None:
                return self._row(row)

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        while True:
            if self._native.closed:
                raise StopAsyncIteration
            if self._waiter._pending is None:
                # None: nothing now; False: a lock is held (wait on a
                # thread, which waits for it).
                row = self._ready()
                if row:
                    # Every _FAST_MAX in a row yield to the loop, so a
                    # backlog never starves it.
                    self._streak += 1
                    if self._streak >= _FAST_MAX:
                        self._streak = 0
                        await asyncio.sleep(0)
                    return self._row(row)
                self._streak = 0
                w = _loopwait.waits(self._db) if row is None else None
                if w is not None:
                    got: tuple[Any, ...] | bool | None = await _loopwait.poll(
                        w,
                        self._db,
                        self._wait,
                        self._look,
                        self._take,
                        self._closed_with_nothing_taken,
                        key=self._key,
                    )
                    if got is None:
                        continue  # the wait ran out, or closed
                    if isinstance(got, tuple):
                        return self._row(got)
            self._streak = 0
            row = await self._on_thread()
            if row is not None:
                return self._row(row)

    # The hooks.

    def _buffered(self) -> tuple[Any, ...] | None:
        """What the sync paths hand out before a native ``next``, with no
        I/O (a claimer's buffered jobs: no hand-off to another thread)."""
        return None

    def _ready(self) -> Any:
        """What the async path hands out at once: a row, None (nothing
        now), or False (a lock is held: wait on a thread)."""
        return self._native.try_next()

    def _look(self) -> float | None | bool:
        """``_loopwait.poll``'s look: a take without waiting, kept for
        ``_take`` (nothing awaits between the two, so a cancellation cannot
        come between them and lose it)."""
        row = self._native.try_next()
        if row is None:
            return None  # only a commit can bring one
        self._taken = row
        return 0.0

    async def _take(self) -> tuple[Any, ...] | bool | None:
        row, self._taken = self._taken, None
        return row

    def _closed_with_nothing_taken(self) -> bool:
        # A row the look took is handed out even if a close raced with it:
        # a subscription's close counts what was handed out as processed.
        return self._taken is None and bool(self._native.closed)

    async def _on_thread(self) -> tuple[Any, ...] | None:
        """The wait on honker's threads: one native ``next`` at a time, and
        a cancelled wait's result goes to the next call."""
        row: tuple[Any, ...] | None = await self._waiter.next(self._native.next, self._wait)
        return row
