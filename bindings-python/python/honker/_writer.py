"""The order in which this process's writes reach a Database's writer.

SQLite has one writer per file and a honker ``Database`` one writer
connection. A transaction holds it from ``BEGIN`` to ``COMMIT`` — across
every ``await`` of an ``async with db.transaction_async()`` block. Every other
write of the process waits for it here, first come first served:

- a sync call waits on its own thread, up to the busy timeout;
- an async call waits as a queue entry, on no thread: when its turn comes,
  the thread that releases the writer hands its native call to honker's
  threads, which run it and pass the writer on. Waiters never fill the pool
  the holder needs for its own next call, and the event loop never waits;
- a sync call on an event loop's thread while a transaction begun on that
  loop holds the writer (or is queued for it) cannot wait: that transaction
  needs this very loop to finish. It fails at once with ``InvalidArgument``
  naming the async form.

Calls that pass ``tx=`` run inside the transaction and skip the queue; a claim
that waits for work skips it too (it takes the writer only for each attempt).

A transaction belongs to its context (``contextvars``: a thread, or an asyncio
task and the tasks it starts): a write there that does not pass ``tx=`` fails
at once instead of waiting for itself.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import threading
from concurrent.futures import Future
from functools import partial
from typing import Any, Callable, TypeVar

from . import _threads
from .errors import Busy, InvalidArgument

T = TypeVar("T")

# The transaction this context opened, weakly (a dropped one rolls back and
# frees the writer), and still set after its commit (check ``is_open``).
current_tx: contextvars.ContextVar[Any] = contextvars.ContextVar("honker_tx", default=None)


# The running loop of this thread, or None. Not ``get_running_loop()``: off a
# loop it raises, and the raise and catch cost ~2.7k instructions, 5 % of an
# enqueue (ADR 29). Only a wait or a transaction's BEGIN asks for it.
_running_loop: Callable[[], asyncio.AbstractEventLoop | None] = asyncio.events._get_running_loop


class _Waiter:
    __slots__ = ("event", "future", "granted", "holds", "loop", "run")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        run: Callable[[], Any] | None,
        holds: bool,
    ) -> None:
        self.loop = loop  # the loop of the transaction it will hold, if any
        self.run = run  # async waiters: the native call to run at its turn
        self.event = threading.Event() if run is None else None  # sync waiters
        self.future: Future[Any] = Future()
        self.granted = False
        self.holds = holds  # a transaction's BEGIN: keeps the writer after `run`


class Writer:
    """One per Database. See the module docs."""

    def __init__(self, busy_timeout: float) -> None:
        self.busy_timeout = busy_timeout
        self._lock = threading.Lock()  # guards the fields below
        # The writer itself: locked while a caller holds it. Whoever holds it
        # releases it, or hands it, still locked, to the first waiter; so
        # while anyone waits it is locked, and taking it when it is free
        # (`acquire(False)`, no other lock) jumps nobody's turn.
        self._writer = threading.Lock()
        # Takes the writer if it is free, at once; False if not (then `hold`).
        self.take: Callable[[], bool] = partial(self._writer.acquire, False)
        # The loop of the transaction holding the writer, if it was begun on one.
        self._holder_loop: asyncio.AbstractEventLoop | None = None
        self._waiters: collections.deque[_Waiter] = collections.deque()

    def _busy(self) -> Busy:
        return Busy(
            "BUSY",
            f"waited {self.busy_timeout:g} s (the busy timeout) for honker's writer, held by "
            "a transaction of this process the whole time",
        )

    # ----- sync -----------------------------------------------------------

    def hold(self, for_tx: bool = False) -> None:
        """Waits (on this thread) until this caller holds the writer."""
        with self._lock:
            if self._writer.acquire(False):
                self._holder_loop = _running_loop() if for_tx else None
                return
            loop = _running_loop()
            if loop is not None and (
                self._holder_loop is loop or any(w.loop is loop for w in self._waiters)
            ):
                raise InvalidArgument(
                    "INVALID_ARGUMENT",
                    "a transaction begun on this event loop holds honker's writer (or waits "
                    "for it), and this sync call would block the loop it needs to finish: "
                    "use the async form (`await ..._async(...)`, `async with "
                    "db.transaction_async()`)",
                )
            w = _Waiter(loop if for_tx else None, None, False)
            self._waiters.append(w)
        assert w.event is not None
        if w.event.wait(self.busy_timeout):
            return
        with self._lock:
            if not w.granted:
                self._waiters.remove(w)
                raise self._busy()
        # Granted at the deadline: it holds the writer now.

    def release(self) -> None:
        """Passes the writer to the next waiter, or frees it."""
        lock = self._lock
        lock.acquire()  # (not `with`: this runs after every write)
        if not self._waiters:
            self._holder_loop = None
            self._writer.release()
            lock.release()
            return
        w = self._waiters.popleft()
        w.granted = True
        self._holder_loop = w.loop
        lock.release()
        if w.event is not None:
            w.event.set()
        else:
            _threads.submit(self._turn, w)

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` (a native write) once this caller holds the writer."""
        if not self.take():
            self.hold()
        try:
            return fn()
        finally:
            self.release()

    # ----- async ----------------------------------------------------------

    def _turn(self, w: _Waiter) -> None:
        """On honker's threads, holding the writer: runs the waiter's call and
        passes the writer on (a transaction's BEGIN keeps it when it works)."""
        assert w.run is not None
        try:
            result = w.run()
        except BaseException as e:
            self.release()
            w.future.set_exception(e)
            return
        if not w.holds:
            self.release()
        w.future.set_result(result)

    async def submit(self, fn: Callable[[], T], holds: bool = False) -> T:
        """Awaits ``fn()`` (a native write, run on honker's threads) at this
        caller's turn, waiting on no thread. ``holds``: ``fn`` begins a
        transaction, which keeps the writer until it releases it."""
        loop = asyncio.get_running_loop()
        w = _Waiter(loop if holds else None, fn, holds)
        with self._lock:
            if self._writer.acquire(False):
                self._holder_loop = w.loop
                w.granted = True
                _threads.submit(self._turn, w)
            else:
                self._waiters.append(w)
        done = asyncio.wrap_future(w.future)
        try:
            return await asyncio.wait_for(asyncio.shield(done), self.busy_timeout)
        except asyncio.TimeoutError:
            with self._lock:
                if not w.granted:
                    self._waiters.remove(w)
                    raise self._busy() from None
            return await done  # its turn came at the deadline: it runs
        except asyncio.CancelledError:
            with self._lock:
                if not w.granted:
                    self._waiters.remove(w)
                    raise
            if holds:
                # The transaction begins anyway; nobody will use it.
                w.future.add_done_callback(self._abandon)
            raise

    def _abandon(self, f: Future[Any]) -> None:
        if f.exception() is None:
            _threads.submit(self._rollback, f.result())

    def _rollback(self, native_tx: Any) -> None:
        try:
            native_tx.rollback()
        finally:
            self.release()
