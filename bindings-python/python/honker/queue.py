"""Queues and jobs: enqueue (inside your transaction for the outbox), claim
with leases, and everything a worker does with a claimed job.

Semantics are at-least-once: a worker that dies between its side effect and
its ack sees the job again once the lease lapses. Make handlers idempotent
(a dedupe key, the job id as an idempotency key, or ack with ``tx=`` inside
the transaction that records the effect).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as _dt
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from . import _args, _threads
from ._time import Seconds, When, epoch, from_ms, seconds
from .errors import HonkerError

if TYPE_CHECKING:
    from . import _native
    from .database import Database, Transaction


def _decode(raw: str | bytes | None) -> Any:
    if isinstance(raw, str):
        return json.loads(raw)
    return raw


def _tx(tx: Transaction | None) -> Any:
    return _args.transaction(tx)


class Enqueued(NamedTuple):
    """What ``enqueue`` returns: the job id, and whether a live job already
    held the dedupe key (then ``id`` is that job's)."""

    id: int
    existing: bool


@dataclasses.dataclass(frozen=True)
class JobInfo:
    """A job in any state, as ``get_job`` and ``dead_letters`` return it."""

    id: int
    queue: str
    state: str
    payload: Any
    priority: int
    run_at: _dt.datetime
    attempts: int
    max_attempts: int
    dedupe_key: str | None
    expires_at: _dt.datetime | None
    created_at: _dt.datetime
    worker_id: str | None
    last_error: str | None
    lease_expires_at: _dt.datetime | None
    finished_at: _dt.datetime | None

    @classmethod
    def _from(cls, d: dict[str, Any]) -> JobInfo:
        return cls(
            id=d["id"],
            queue=d["queue"],
            state=d["state"],
            payload=_decode(d["payload"]),
            priority=d["priority"],
            run_at=from_ms(d["run_at_ms"]),  # type: ignore[arg-type]
            attempts=d["attempts"],
            max_attempts=d["max_attempts"],
            dedupe_key=d["dedupe_key"],
            expires_at=from_ms(d["expires_at_ms"]),
            created_at=from_ms(d["created_at_ms"]),  # type: ignore[arg-type]
            worker_id=d["worker_id"],
            last_error=d["last_error"],
            lease_expires_at=from_ms(d["lease_expires_at_ms"]),
            finished_at=from_ms(d["finished_at_ms"]),
        )


@dataclasses.dataclass(frozen=True)
class QueueStats:
    """Counts per state for one queue."""

    ready: int
    scheduled: int
    running: int
    lapsed: int
    dead: int
    cancelled: int
    expired: int
    completed: int
    oldest_ready_age: float | None
    """Seconds the oldest due job has waited, if any is due."""


class Job:
    """A claimed job, leased to this worker until ``lease_expires_at``.

    Every method presents the lease token; once the lease is lost (lapsed and
    reclaimed, or the job finished) they raise :class:`honker.LeaseLost` and
    change nothing. The plain methods block the calling thread for one short
    transaction; the ``*_async`` forms run on honker's threads.
    """

    __slots__ = (
        "_created_ms",
        "_expires_ms",
        "_lease_s",
        "_payload",
        "_queue",
        "_raw",
        "_run_at_ms",
        "attempts",
        "id",
        "max_attempts",
        "priority",
        "token",
        "worker_id",
    )

    def __init__(self, queue: Queue, worker_id: str, row: tuple, lease_s: float) -> None:
        (self.id, self._raw, self.attempts, self.max_attempts, self.priority, self._run_at_ms,
         self._created_ms, self._expires_ms, self.token) = row  # fmt: skip
        self._queue = queue
        self._payload: Any = _UNSET
        self.worker_id = worker_id
        self._lease_s = lease_s

    def __repr__(self) -> str:
        return f"Job(id={self.id}, queue={self._queue.name!r}, attempts={self.attempts})"

    # Times are converted on first use: a batch of jobs costs no datetimes.
    @property
    def run_at(self) -> _dt.datetime:
        """When the job became due."""
        return from_ms(self._run_at_ms)  # type: ignore[return-value]

    @property
    def created_at(self) -> _dt.datetime:
        return from_ms(self._created_ms)  # type: ignore[return-value]

    @property
    def lease_expires_at(self) -> _dt.datetime:
        """When the lease lapses unless extended (``heartbeat``)."""
        return from_ms(self._expires_ms)  # type: ignore[return-value]

    @property
    def payload(self) -> Any:
        """The enqueued payload: decoded JSON, or ``bytes``."""
        if self._payload is _UNSET:
            self._payload = _decode(self._raw)
        return self._payload

    @property
    def queue(self) -> Queue:
        return self._queue

    def ack(self, tx: Transaction | None = None, result: Any = None) -> None:
        """Completes the job; with ``tx``, in your transaction (commit it to
        make the completion and your writes durable together); with
        ``result``, saved for ``get_result``/``wait_result``."""
        self._queue._db._write(tx, self._ack(tx, result))

    def _ack(self, tx: Transaction | None, result: Any) -> Callable[[], None]:
        native, t = self._queue._native, _tx(tx)
        return lambda: native.ack(self.id, self.token, result=result, tx=t)

    def retry(
        self,
        delay: Seconds | None = None,
        error: str | None = None,
        tx: Transaction | None = None,
    ) -> str:
        """Gives the job back for another attempt after ``delay`` (default: the
        job's exponential backoff); dead-letters it when its attempts are used
        up. Returns the new state: ``"ready"``, ``"scheduled"`` or ``"dead"``."""
        return self._queue._db._write(tx, self._retry(delay, error, tx))

    def _retry(
        self, delay: Seconds | None, error: str | None, tx: Transaction | None
    ) -> Callable[[], str]:
        native, d, t = self._queue._native, seconds("delay", delay), _tx(tx)
        return lambda: native.retry(self.id, self.token, delay=d, error=error, tx=t)

    def fail(self, error: str, tx: Transaction | None = None) -> None:
        """Dead-letters the job now, with ``error``."""
        self._queue._db._write(tx, self._fail(error, tx))

    def _fail(self, error: str, tx: Transaction | None) -> Callable[[], None]:
        native, t = self._queue._native, _tx(tx)
        return lambda: native.fail(self.id, self.token, error, tx=t)

    def release(self, tx: Transaction | None = None) -> None:
        """Gives the job back at once, without using up an attempt."""
        self._queue._db._write(tx, self._release(tx))

    def _release(self, tx: Transaction | None) -> Callable[[], None]:
        native, t = self._queue._native, _tx(tx)
        return lambda: native.release(self.id, self.token, tx=t)

    def snooze(self, delay: Seconds, tx: Transaction | None = None) -> str:
        """Gives the job back to run after ``delay``, without using up an attempt."""
        return self._queue._db._write(tx, self._snooze(delay, tx))

    def _snooze(self, delay: Seconds, tx: Transaction | None) -> Callable[[], str]:
        native, d, t = self._queue._native, seconds("delay", delay), _tx(tx)
        assert d is not None
        return lambda: native.snooze(self.id, self.token, d, tx=t)

    def heartbeat(self, extend: Seconds | None = None) -> _dt.datetime:
        """Extends the lease by ``extend`` (default: the claim's lease) from
        now; returns the new expiry."""
        self._expires_ms = self._queue._db._write(None, self._heartbeat(extend))
        return self.lease_expires_at

    def _heartbeat(self, extend: Seconds | None) -> Callable[[], int]:
        native, ext = self._queue._native, seconds("extend", extend)
        e = self._lease_s if ext is None else ext
        return lambda: native.heartbeat(self.id, self.token, extend=e)

    # The async forms wait for the writer on no thread (see _writer); with
    # ``tx`` (of ``db.transaction_async()``) they run inside it.

    async def ack_async(self, tx: Transaction | None = None, result: Any = None) -> None:
        await self._queue._db._write_async(tx, self._ack(tx, result))

    async def retry_async(
        self, delay: Seconds | None = None, error: str | None = None, tx: Transaction | None = None
    ) -> str:
        return await self._queue._db._write_async(tx, self._retry(delay, error, tx))

    async def fail_async(self, error: str, tx: Transaction | None = None) -> None:
        await self._queue._db._write_async(tx, self._fail(error, tx))

    async def release_async(self, tx: Transaction | None = None) -> None:
        await self._queue._db._write_async(tx, self._release(tx))

    async def snooze_async(self, delay: Seconds, tx: Transaction | None = None) -> str:
        return await self._queue._db._write_async(tx, self._snooze(delay, tx))

    async def heartbeat_async(self, extend: Seconds | None = None) -> _dt.datetime:
        self._expires_ms = await self._queue._db._write_async(None, self._heartbeat(extend))
        return self.lease_expires_at

    def keep_alive(self, every: Seconds | None = None) -> KeepAlive:
        """Heartbeats the lease every ``every`` (default: a third of the
        lease) while a block runs: ``with job.keep_alive(): ...`` or
        ``async with job.keep_alive(): ...``. ``.lost`` tells whether the
        lease was lost meanwhile."""
        e = seconds("every", every)
        return KeepAlive(self, self._lease_s / 3 if e is None else e)


_UNSET = object()


class KeepAlive:
    """See :meth:`Job.keep_alive`."""

    def __init__(self, job: Job, every: float) -> None:
        if every <= 0:
            raise ValueError("keep_alive interval must be positive")
        self._job = job
        self._every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None
        self.lost = False
        self.beats = 0

    def _beat(self) -> bool:
        try:
            self._job.heartbeat()
            self.beats += 1
            return True
        except HonkerError as e:
            return self._keep_beating(e)

    def _keep_beating(self, e: HonkerError) -> bool:
        if e.code in ("LEASE_LOST", "NOT_FOUND"):
            self.lost = True
            return False
        if e.code == "CLOSED":
            return False  # closed, or a forked child's copy: no beat can work
        return True  # BUSY and friends: try again next time

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            if not self._beat():
                return

    def __enter__(self) -> KeepAlive:
        self._thread = threading.Thread(target=self._run, name="honker-keepalive", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    async def _arun(self) -> None:
        while True:
            await asyncio.sleep(self._every)
            try:
                await self._job.heartbeat_async()
                self.beats += 1
            except HonkerError as e:
                if not self._keep_beating(e):
                    return

    async def __aenter__(self) -> KeepAlive:
        self._task = asyncio.ensure_future(self._arun())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass


class Claimer:
    """``for job in queue.claim(...)`` (threads) and
    ``async for job in queue.claim(...)`` (asyncio): an endless stream of
    claimed jobs that sleeps until work arrives from any process.

    Waiting happens on honker's threads, never on the event loop; cancelling
    the task that iterates stops it cleanly. Jobs claimed in the background
    after a cancellation are released at once; a job already handed to the
    loop body stays leased to it until acked, released or lapsed. ``close()``
    (or leaving ``with``/``async with``) releases jobs claimed but not yet
    handed out (``batch`` > 1).
    """

    def __init__(
        self,
        queue: Queue,
        worker_id: str,
        batch: int,
        lease: float | None,
        wait: float,
    ) -> None:
        self._queue = queue
        self._worker_id = worker_id
        self._batch = batch
        self._lease = lease
        self._wait = wait
        self._buffer: collections.deque[Job] = collections.deque()
        self._closed = False

    def _claim(self, on_claimable: Callable[[], object] | None = None) -> list[Job]:
        return self._queue._claim(
            self._worker_id, self._batch, self._lease, self._wait, None, on_claimable
        )

    def _claim_for(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[list[Job]]) -> None:
        """Runs on honker's threads: claims (waiting for work), then hands
        the jobs to ``fut`` on the loop. When the wait ends with work, the
        loop thread is woken at once, so it is awake by the time the claim
        has committed (an idle thread takes tens of microseconds to wake)."""
        try:
            jobs = self._claim(on_claimable=lambda: loop.call_soon_threadsafe(_noop))
        except BaseException as e:  # handed to the awaiting task
            try:
                loop.call_soon_threadsafe(_fail, fut, e)
            except RuntimeError:
                pass  # the loop is closed: nobody is waiting
            return
        try:
            loop.call_soon_threadsafe(_deliver, fut, jobs)
        except RuntimeError:
            _release_all(jobs)  # the loop is closed: nobody will see them

    def __iter__(self) -> Iterator[Job]:
        return self

    def __next__(self) -> Job:
        while not self._buffer:
            if self._closed:
                raise StopIteration
            self._buffer.extend(self._claim())
        return self._buffer.popleft()

    def __aiter__(self) -> AsyncIterator[Job]:
        return self

    async def __anext__(self) -> Job:
        while not self._buffer:
            if self._closed:
                raise StopAsyncIteration
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[list[Job]] = loop.create_future()
            _threads.submit(self._claim_for, loop, fut)
            # Cancelled here, the claim still finishes on its thread, and
            # _deliver gives its jobs back.
            self._buffer.extend(await fut)
        return self._buffer.popleft()

    def close(self) -> None:
        """Stops the stream and releases jobs claimed but not handed out."""
        self._closed = True
        while self._buffer:
            job = self._buffer.popleft()
            try:
                job.release()
            except HonkerError:
                pass  # lapsed meanwhile: someone else's now

    async def aclose(self) -> None:
        await _threads.run(self.close)

    def __enter__(self) -> Claimer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Claimer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _noop() -> None:
    pass


def _deliver(fut: asyncio.Future[list[Job]], jobs: list[Job]) -> None:
    """On the loop: the claim's jobs to the awaiting task. If the task was
    cancelled meanwhile, nobody will ever see them: give them back now (on
    honker's threads) instead of at lease lapse."""
    if fut.cancelled():
        if jobs:
            _threads.submit(_release_all, jobs)
    else:
        fut.set_result(jobs)


def _fail(fut: asyncio.Future[list[Job]], error: BaseException) -> None:
    if not fut.cancelled():
        fut.set_exception(error)


def _release_all(jobs: list[Job]) -> None:
    for job in jobs:
        try:
            job.release()
        except HonkerError:
            pass  # lapsed meanwhile: someone else's now


class Queue:
    """A handle on one named queue (``db.queue(name)``). Cheap; thread-safe."""

    def __init__(self, db: Database, native: _native.Queue) -> None:
        self._db = db
        self._native = native
        self._lease = native.lease

    @property
    def name(self) -> str:
        return self._native.name

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    def enqueue(
        self,
        payload: Any,
        *,
        delay: Seconds | None = None,
        run_at: When | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
        dedupe_key: str | None = None,
        expires: Seconds | None = None,
        tx: Transaction | None = None,
    ) -> Enqueued:
        """Adds a job. ``payload`` is anything ``json.dumps`` takes, or
        ``bytes``. With ``tx``, the job commits or rolls back with your
        transaction (the outbox)."""
        return self.enqueue_many(
            [payload],
            delay=delay,
            run_at=run_at,
            priority=priority,
            max_attempts=max_attempts,
            dedupe_key=dedupe_key,
            expires=expires,
            tx=tx,
        )[0]

    def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        delay: Seconds | None = None,
        run_at: When | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
        dedupe_key: str | None = None,
        expires: Seconds | None = None,
        tx: Transaction | None = None,
    ) -> list[Enqueued]:
        """Adds one job per payload, all in one transaction."""
        fn = self._enqueue(payloads, delay, run_at, priority, max_attempts, dedupe_key, expires, tx)
        return [Enqueued(i, e) for i, e in self._db._write(tx, fn)]

    async def enqueue_async(
        self,
        payload: Any,
        *,
        delay: Seconds | None = None,
        run_at: When | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
        dedupe_key: str | None = None,
        expires: Seconds | None = None,
        tx: Transaction | None = None,
    ) -> Enqueued:
        """:meth:`enqueue` for asyncio code: waits for the writer on no thread."""
        fn = self._enqueue(
            [payload], delay, run_at, priority, max_attempts, dedupe_key, expires, tx
        )
        [(i, e)] = await self._db._write_async(tx, fn)
        return Enqueued(i, e)

    async def enqueue_many_async(
        self,
        payloads: Iterable[Any],
        *,
        delay: Seconds | None = None,
        run_at: When | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
        dedupe_key: str | None = None,
        expires: Seconds | None = None,
        tx: Transaction | None = None,
    ) -> list[Enqueued]:
        fn = self._enqueue(payloads, delay, run_at, priority, max_attempts, dedupe_key, expires, tx)
        return [Enqueued(i, e) for i, e in await self._db._write_async(tx, fn)]

    def _enqueue(
        self,
        payloads: Iterable[Any],
        delay: Seconds | None,
        run_at: When | None,
        priority: int,
        max_attempts: int | None,
        dedupe_key: str | None,
        expires: Seconds | None,
        tx: Transaction | None,
    ) -> Callable[[], list[tuple[int, bool]]]:
        # Arguments are checked here, before any wait for the writer.
        items = payloads if isinstance(payloads, list) else list(payloads)
        _args.integer("priority", priority, _args.I32)
        _args.optional_integer("max_attempts", max_attempts, _args.U32)
        d, at, exp, t = (
            seconds("delay", delay),
            epoch("run_at", run_at),
            seconds("expires", expires),
            _tx(tx),
        )
        native = self._native
        return lambda: native.enqueue_many(
            items,
            delay=d,
            run_at=at,
            priority=priority,
            max_attempts=max_attempts,
            dedupe_key=dedupe_key,
            expires=exp,
            tx=t,
        )

    def claim_batch(
        self,
        worker_id: str,
        n: int = 1,
        *,
        lease: Seconds | None = None,
        wait: Seconds = 0,
        tx: Transaction | None = None,
    ) -> list[Job]:
        """Leases up to ``n`` due jobs to ``worker_id`` (highest priority,
        then oldest first). With ``wait``, sleeps up to that long for work."""
        return self._claim(worker_id, n, seconds("lease", lease), seconds("wait", wait), tx)

    def _claim(
        self,
        worker_id: str,
        n: int,
        lease_s: float | None,
        wait_s: float | None,
        tx: Transaction | None,
        on_claimable: Callable[[], object] | None = None,
    ) -> list[Job]:
        native, t = self._native, _tx(tx)
        _args.text("worker_id", worker_id)
        _args.integer("n", n, _args.I64)

        def claim() -> list[tuple]:
            return native.claim(
                worker_id, n, lease=lease_s, wait=wait_s or 0.0, tx=t, on_claimable=on_claimable
            )

        # A claim that waits for work takes the writer only for each attempt,
        # so it does not hold this process's turn while it sleeps.
        rows = claim() if wait_s else self._db._write(tx, claim)
        ls = self._lease if lease_s is None else lease_s
        return [Job(self, worker_id, row, ls) for row in rows]

    def claim(
        self,
        worker_id: str,
        *,
        batch: int = 1,
        lease: Seconds | None = None,
        wait: Seconds = 1.0,
    ) -> Claimer:
        """An endless iterator of jobs for ``worker_id``, sync or async (see
        :class:`Claimer`). ``wait`` bounds each sleep between checks, which
        only matters for how soon a cancelled iterator's thread is free."""
        w = seconds("wait", wait)
        _args.text("worker_id", worker_id)
        _args.integer("batch", batch, _args.I64)
        return Claimer(self, worker_id, batch, seconds("lease", lease), w or 0.0)

    def ack_many(self, jobs: Iterable[Job], tx: Transaction | None = None) -> int:
        """Acks several jobs in one transaction; returns how many were still held."""
        leases, t = [(j.id, j.token) for j in jobs], _tx(tx)
        return self._db._write(tx, lambda: self._native.ack_many(leases, tx=t))

    def cancel(self, job_id: int, reason: str | None = None, tx: Transaction | None = None) -> bool:
        """Cancels a live job, whatever its state; False if it had already
        finished. A worker holding it gets ``LeaseLost`` from then on."""
        t = _tx(tx)
        _args.integer("job_id", job_id, _args.I64)
        return self._db._write(tx, lambda: self._native.cancel(job_id, reason=reason, tx=t))

    def get_job(self, job_id: int) -> JobInfo:
        """The job in any state; ``NotFound`` if it never existed or was pruned."""
        return JobInfo._from(self._native.get_job(_args.integer("job_id", job_id, _args.I64)))

    def get_result(self, job_id: int) -> Any:
        """The result saved by ``ack(result=...)``, or None."""
        return _decode(self._native.get_result(_args.integer("job_id", job_id, _args.I64)))

    def wait_result(self, job_id: int, timeout: Seconds) -> Any:
        """Waits for the job's result (``Timeout`` when none comes in time;
        None if the job finished without one)."""
        t = seconds("timeout", timeout)
        assert t is not None
        return _decode(self._native.wait_result(_args.integer("job_id", job_id, _args.I64), t))

    async def wait_result_async(self, job_id: int, timeout: Seconds) -> Any:
        return await _threads.run(self.wait_result, job_id, timeout)

    def stats(self) -> QueueStats:
        d = self._native.stats()
        age = d.pop("oldest_ready_age_ms")
        return QueueStats(**d, oldest_ready_age=None if age is None else age / 1000)

    def dead_letters(self, after_id: int = 0, limit: int = 100) -> list[JobInfo]:
        """Dead letters with ids above ``after_id``, oldest first (paged)."""
        _args.integer("after_id", after_id, _args.I64)
        _args.integer("limit", limit, _args.SIZE)
        return [JobInfo._from(d) for d in self._native.dead_letters(after_id=after_id, limit=limit)]

    def requeue_dead(self, job_id: int) -> bool:
        """Puts one dead letter back to ready with its attempts reset."""
        _args.integer("job_id", job_id, _args.I64)
        return self._db._write(None, lambda: self._native.requeue_dead(job_id))

    def requeue_all_dead(self) -> int:
        return self._db._write(None, self._native.requeue_all_dead)

    def purge_dead(self, older_than: Seconds | None = None) -> int:
        """Deletes dead letters (those that died at least ``older_than`` ago)."""
        o = seconds("older_than", older_than)
        return self._db._write(None, lambda: self._native.purge_dead(older_than=o))
