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
from typing import Any, Callable, TypeVar

from . import _threads
from .errors import Busy, InvalidArgument

T = TypeVar("T")

# The transaction this context opened, weakly (a dropped one rolls back and
# frees the writer), and still set after its commit (check ``is_open``).
current_tx: contextvars.ContextVar[Any] = contextvars.ContextVar("honker_tx", default=None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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
        self._lock = threading.Lock()
        self._held = False
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
        loop = _running_loop()
        with self._lock:
            if not self._held and not self._waiters:
                self._held = True
                self._holder_loop = loop if for_tx else None
                return
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
        with self._lock:
            if not self._waiters:
                self._held = False
                self._holder_loop = None
                return
            w = self._waiters.popleft()
            w.granted = True
            self._holder_loop = w.loop
        if w.event is not None:
            w.event.set()
        else:
            _threads.submit(self._turn, w)

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` (a native write) once this caller holds the writer."""
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
            if not self._held and not self._waiters:
                self._held = True
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
