"""The threads async calls run on, so nothing waits on the event loop.

One pool per process: after ``fork()`` the child gets a fresh pool (a copied
pool would point at threads that do not exist in the child).
"""

from __future__ import annotations

import asyncio
import os
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
