"""Waits for commits on the event loop itself, holding no thread.

An async call that may wait long (a claimer's next job, a lock's acquire,
a job's result, a group claim) must not hold one of honker's pool threads
while it waits: the pool is small (``_threads``), and every short async call
(each ``enqueue_async``, each ack) runs on it too. With a wait on each
thread, 32 idle consumers were enough to hold every write of the process
for up to a second, and a 33rd consumer saw its jobs a second late.

So these waits sleep in the loop's selector instead: one readiness pipe per
database and loop (core's, written by the watcher thread on every commit by
any process), under ``add_reader``, shared by every task of that loop that
waits on that database. A task's wait is a loop of: note the generation,
look (a read, or a short call on a thread), and if there was nothing, sleep
until the generation moves on (a commit) or the time the look named (a job
coming due, a lock's TTL lapsing) or the re-check interval. The generation
moves on whenever the pipe is found readable, whoever drains it, so no task
misses a commit that came while it was looking.

Where the loop has no ``add_reader`` (Windows' proactor), or the platform no
pipe, :func:`waits` gives None and callers wait on a thread as before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from . import _native, _threads

if TYPE_CHECKING:
    from .database import Database

T = TypeVar("T")

# Per database: (pid, {loop: _Waits}). A forked child makes its own pipe; a
# database or loop that is gone takes its entry with it.
_by_db: weakref.WeakKeyDictionary[Any, tuple[int, weakref.WeakKeyDictionary[Any, _Waits]]] = (
    weakref.WeakKeyDictionary()
)


class _Waits:
    """The commit waits of one event loop on one database."""

    def __init__(self, ready: _native.Readiness, loop: asyncio.AbstractEventLoop) -> None:
        self._ready = ready
        self._loop = loop
        self._sleepers: set[asyncio.Future[None]] = set()
        self._users = 0
        self._registered = False
        self.generation = 0
        # Takes begun on this loop; and per key, the last look that found
        # nothing to take: (generation, takes, when one may succeed in loop
        # time, or None: at a commit). Waiters on one
        # queue share a look while neither has moved, so an idle herd costs
        # one read per commit, not one per waiter.
        self.takes = 0
        self.looked: dict[object, tuple[int, int, float | None]] = {}

    def enter(self) -> None:
        """A task starts waiting: the pipe is armed and on the loop (it stays
        there until the loop turns with no task waiting, so that a consumer
        that keeps up does not add and remove it each time)."""
        if not self._registered:
            self._loop.add_reader(self._ready.fileno(), self.drain)  # NotImplementedError
            self._registered = True
        if self._users == 0:
            self._ready.arm()
        self._users += 1

    def leave(self) -> None:
        self._users -= 1
        if self._users == 0:
            self._loop.call_soon(self._idle)

    def _idle(self) -> None:
        if self._users == 0 and self._registered:
            self._ready.disarm()  # else the watcher keeps running for nobody
            self._loop.remove_reader(self._ready.fileno())
            self._registered = False

    def drain(self) -> None:
        """Takes what the pipe holds; a commit seen so wakes every sleeper."""
        if self._ready.drain():
            self.generation += 1
            for fut in self._sleepers:
                _wake(fut)

    async def sleep(self, seen: int, timeout: float) -> None:
        """Until the generation passes ``seen`` (a commit) or ``timeout``
        seconds went by."""
        self.drain()
        if self.generation != seen:
            return
        fut = self._loop.create_future()
        self._sleepers.add(fut)
        timer = self._loop.call_later(max(timeout, 0.0), _wake, fut)
        try:
            await fut
        finally:
            timer.cancel()
            self._sleepers.discard(fut)


def _wake(fut: asyncio.Future[None]) -> None:
    """Ends a sleep, unless it ended already (a timer, a commit, a cancel)."""
    if not fut.done():
        fut.set_result(None)


def waits(db: Database) -> _Waits | None:
    """The running loop's waits on ``db``, entered (call ``leave`` when done
    waiting); None where the loop cannot watch a descriptor."""
    if not hasattr(db._native, "readiness"):
        return None  # no pipes (Windows)
    loop = asyncio.get_running_loop()
    pid = os.getpid()
    entry = _by_db.get(db)
    if entry is None or entry[0] != pid:
        entry = (pid, weakref.WeakKeyDictionary())
        _by_db[db] = entry
    w = entry[1].get(loop)
    if w is None:
        w = _Waits(db._native.readiness(), loop)
        entry[1][loop] = w
    try:
        w.enter()
    except NotImplementedError:  # the proactor loop: no add_reader
        return None
    return w


async def poll(
    w: _Waits,
    db: Database,
    wait: float,
    look: Callable[[], float | None | bool],
    take: Callable[[], Awaitable[T | None]],
    closed: Callable[[], bool] = lambda: False,
    key: object = None,
    retry_in: Callable[[], float | None] = lambda: None,
    ends_early: bool = False,
) -> T | None:
    """Up to ``wait`` seconds for what ``take`` gets, then leaves ``w``.

    ``look`` runs on the loop (one read, never waiting): seconds until a take
    may succeed (0.0: now), None when only a commit can change that, False
    when it could not look without waiting (take anyway). ``take`` is a short
    call (on the loop where it needs no waiting, else ``on_thread``): its
    result, or None for nothing (taken by another meanwhile; ``retry_in``
    then says when to look again, None: at a commit). Between takes: a sleep
    until a commit, the time looked, or the re-check interval, whichever
    comes first, by core's rules (``_native.Pace``; ``ends_early``: the wait
    ends at once when the time looked lies beyond it). Waits with the
    same ``key`` (not None) look alike: one's answer that there is nothing to
    take serves the others until a commit or a take on this loop."""
    loop = asyncio.get_running_loop()
    pace = _native.Pace(wait, db._native.recheck_interval, ends_early)
    try:
        while True:
            w.drain()
            seen = w.generation
            hit = w.looked.get(key) if key is not None else None
            if hit is not None and hit[0] == seen and hit[1] == w.takes:
                at = hit[2]  # when the next take may succeed (loop time)
                due: float | None | bool = None if at is None else max(at - loop.time(), 0.0)
            else:
                due = look()
                if key is not None and due is not False and due != 0.0:
                    at = None if due is None else loop.time() + due
                    w.looked[key] = (seen, w.takes, at)
            if closed():
                return None
            if due is False or due == 0.0:
                w.takes += 1
                got = await take()
                if got is not None or closed():
                    return got
                due = retry_in()  # None: someone else's now, wait for a commit
            nap = pace.nap(due)
            if nap is None:
                return None
            await w.sleep(seen, nap)
    finally:
        w.leave()


async def on_thread(
    fn: Callable[[], T | None], give_back: Callable[[T], object] | None = None
) -> T | None:
    """``fn()`` on honker's threads. If the awaiting task is cancelled
    meanwhile, what ``fn`` still returns is given to ``give_back`` on the
    thread that ran it (nobody will see it); never run, it takes nothing."""
    fut = _threads.submit(fn)
    try:
        return await asyncio.wrap_future(fut)
    except asyncio.CancelledError:
        if give_back is not None:
            fut.add_done_callback(lambda f: _give_back(f, give_back))
        raise


def _give_back(fut: concurrent.futures.Future[Any], give_back: Callable[[Any], object]) -> None:
    try:
        taken = fut.result()
    except BaseException:
        return  # cancelled before it ran, or it failed: nothing taken
    if taken is not None:
        try:
            give_back(taken)
        except Exception:
            pass  # its lease or TTL frees it
