"""The threads async calls run on, so nothing waits on the event loop.

One pool per process: after ``fork()`` the child gets a fresh pool (a copied
pool would point at threads that do not exist in the child).
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import socket
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None


def pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(max_workers=32, thread_name_prefix="honker"))
        return _pool[1]


def submit(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    return pool().submit(fn, *args, **kwargs)


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Runs a blocking call on honker's threads and awaits it."""
    return await asyncio.wrap_future(submit(fn, *args, **kwargs))


class MainWait:
    """Waits on the main thread so that signal handlers run at once. CPython
    runs them only on the main thread, and the kernel may hand a process's
    signal to any of its threads (honker's, a handler's): then nothing
    interrupts a main thread blocked in ``Event.wait``, and SIGTERM would wait
    for its timeout. CPython's own handler writes to the wakeup fd on any
    thread, so the main thread waits on that socket instead; the other
    threads wake it with :meth:`wake` when what it waits for happens."""

    def __init__(self, on_main: bool) -> None:
        self._on_main = on_main
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)
        self._previous: int | None = None

    def __enter__(self) -> MainWait:
        if self._on_main:
            self._previous = signal.set_wakeup_fd(self._w.fileno(), warn_on_full_buffer=False)
        return self

    def __exit__(self, *_: object) -> None:
        if self._previous is not None:
            signal.set_wakeup_fd(self._previous)
        self._r.close()
        self._w.close()

    def wake(self) -> None:
        """Thread-safe, and safe in a signal handler (no lock)."""
        try:
            self._w.send(b"\0")
        except OSError:  # full (a wake is pending anyway) or closed
            pass

    def until(self, event: threading.Event) -> None:
        while not event.is_set():
            select.select([self._r], [], [], 60.0)
            try:
                while self._r.recv(512):
                    pass
            except OSError:  # drained
                pass

    def call(
        self,
        fn: Callable[[], object],
        *,
        stop: Callable[[], object] | None = None,
        name: str = "honker-drain",
    ) -> None:
        """Runs ``fn`` on a thread while this one waits as :meth:`until` does
        (a second Ctrl-C is handled meanwhile); re-raises what it raised.
        If the wait ends with an exception instead (one a signal handler
        raised: KeyboardInterrupt, SystemExit), ``stop`` (when given) ends
        ``fn`` and its thread is joined before the exception goes on: the
        interpreter must not exit while the thread is inside honker's native
        code (it crashed there)."""
        done = threading.Event()
        failure: list[BaseException] = []

        def call() -> None:
            try:
                fn()
            except BaseException as e:
                failure.append(e)
            finally:
                done.set()
                self.wake()

        thread = threading.Thread(target=call, name=name, daemon=True)
        thread.start()
        try:
            self.until(done)
        except BaseException:
            if stop is not None:
                stop()
                thread.join()
            raise
        if failure:
            raise failure[0]
