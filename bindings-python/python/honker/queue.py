"""Queues and jobs: enqueue (inside your transaction for the outbox), claim
with leases, and everything a worker does with a claimed job.

Semantics are at-least-once: a worker that dies between its side effect and
its ack sees the job again once the lease lapses. Make handlers idempotent
(a dedupe key, the job id as an idempotency key, or ack with ``tx=`` inside
the transaction that records the effect).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as _dt
import json
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
        "_renewal",
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
        self._renewal: _native.KeepAlive | None = None

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
        """When the lease lapses unless extended (``heartbeat``,
        ``keep_alive``)."""
        self._renewed()
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
        """Renews the lease every ``every`` (default: a third of the lease)
        while a block runs: ``with job.keep_alive(): ...`` or
        ``async with job.keep_alive(): ...``. ``.lost`` tells whether the
        lease was lost meanwhile (renewal then stopped)."""
        return KeepAlive(self, seconds("every", every))

    def _renewed(self) -> None:
        """Takes a running keep-alive's latest renewal into the expiry."""
        renewal = self._renewal
        if renewal is not None:
            at = renewal.lease_expires_at_ms
            if at is not None and at > self._expires_ms:
                self._expires_ms = at


_UNSET = object()


class KeepAlive:
    """See :meth:`Job.keep_alive`. The renewal is core's (the same on every
    surface): a transient failure (``Busy``) is tried again; a lost lease
    (reclaimed after a lapse, cancelled: ``LeaseLost``) stops it and sets
    ``.lost``: the work's outcome can no longer be recorded, and the job runs
    again elsewhere (at-least-once)."""

    def __init__(self, job: Job, every: float | None) -> None:
        self._job = job
        self._every = every
        self._native: _native.KeepAlive | None = None
        self._lost = False
        self._beats = 0

    @property
    def lost(self) -> bool:
        """Whether the lease was lost while the block ran."""
        return self._native.lost if self._native is not None else self._lost

    @property
    def beats(self) -> int:
        """Renewals that succeeded."""
        return self._native.beats if self._native is not None else self._beats

    def _start(self) -> KeepAlive:
        job = self._job
        self._native = job._queue._native.keep_alive(
            job.id, job.token, job._lease_s, every=self._every
        )
        job._renewal = self._native
        return self

    def _stop(self) -> None:
        native, job = self._native, self._job
        if native is None:
            return
        self._lost = native.stop()
        self._beats = native.beats
        job._renewed()
        job._renewal = None
        self._native = None

    def __enter__(self) -> KeepAlive:
        return self._start()

    def __exit__(self, *exc: object) -> None:
        self._stop()

    async def __aenter__(self) -> KeepAlive:
        return self._start()

    async def __aexit__(self, *exc: object) -> None:
        await _threads.run(self._stop)


class Claimer:
    """``for job in queue.claim(...)`` (threads) and
    ``async for job in queue.claim(...)`` (asyncio): an endless stream of
    claimed jobs that sleeps until work arrives from any process. It is
    core's claim stream, the same on every surface.

    Waiting happens on honker's threads, never on the event loop; cancelling
    the task that iterates stops it cleanly. Jobs claimed in the background
    after a cancellation are released at once; a job already handed to the
    loop body stays leased to it until acked, released or lapsed. ``close()``
    (or leaving ``with``/``async with``) releases jobs claimed but not yet
    handed out (``batch`` > 1), and so does dropping the iterator (a bare
    ``for job in q.claim(...): break``).
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
        self._lease_s = queue._lease if lease is None else lease
        self._wait = wait
        self._native = queue._native.claimer(worker_id, batch, lease=lease)

    def _job(self, row: tuple) -> Job:
        return Job(self._queue, self._worker_id, row, self._lease_s)

    def _claim_for(
        self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[tuple | None]
    ) -> None:
        """Runs on honker's threads: waits for the next job, then hands it to
        ``fut`` on the loop. When the wait ends with work, the loop thread is
        woken at once, so it is awake by the time the claim has committed
        (an idle thread takes tens of microseconds to wake)."""
        try:
            row = self._native.next(
                self._wait, on_claimable=lambda: loop.call_soon_threadsafe(_noop)
            )
        except BaseException as e:  # handed to the awaiting task
            try:
                loop.call_soon_threadsafe(_fail, fut, e)
            except RuntimeError:
                pass  # the loop is closed: nobody is waiting
            return
        try:
            loop.call_soon_threadsafe(_deliver, fut, self, row)
        except RuntimeError:
            if row is not None:
                _release_all([self._job(row)])  # the loop is closed: nobody will see it

    def __iter__(self) -> Iterator[Job]:
        return self

    def __next__(self) -> Job:
        native = self._native
        while True:
            if native.closed:
                raise StopIteration
            row = native.take_buffered()
            if row is None:
                row = native.next(self._wait)
            if row is not None:
                return self._job(row)

    def __aiter__(self) -> AsyncIterator[Job]:
        return self

    async def __anext__(self) -> Job:
        native = self._native
        while True:
            if native.closed:
                raise StopAsyncIteration
            row = native.take_buffered()
            if row is None:
                loop = asyncio.get_running_loop()
                fut: asyncio.Future[tuple | None] = loop.create_future()
                _threads.submit(self._claim_for, loop, fut)
                # Cancelled here, the wait still finishes on its thread, and
                # _deliver gives its job back.
                row = await fut
            if row is not None:
                return self._job(row)

    def close(self) -> None:
        """Stops the stream and releases jobs claimed but not handed out."""
        self._native.close()

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


def _deliver(fut: asyncio.Future[tuple | None], claimer: Claimer, row: tuple | None) -> None:
    """On the loop: the claimed job to the awaiting task. If the task was
    cancelled meanwhile, nobody will ever see it: give it back now (on
    honker's threads) instead of at lease lapse."""
    if fut.cancelled():
        if row is not None:
            _threads.submit(_release_all, [claimer._job(row)])
    else:
        fut.set_result(row)


def _fail(fut: asyncio.Future[tuple | None], error: BaseException) -> None:
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

    def job(self, job_id: int, token: str) -> Job:
        """The running job that ``(job_id, token)`` leases, rebuilt: for a
        process handed a lease by another (a webhook that completes the job
        later, a worker in another language). ``LeaseLost`` if the job is not
        running (or finished), ``NotFound`` if it never existed, as a verb
        with the lease would say; a verb on it raises ``LeaseLost`` if
        another claim holds it now. ``keep_alive`` renews it for the queue's
        lease."""
        _args.integer("job_id", job_id, _args.I64)
        _args.text("token", token)
        row, worker_id = self._native.job(job_id, token)
        return Job(self, worker_id, row, self._lease)

    async def job_async(self, job_id: int, token: str) -> Job:
        """:meth:`job` on honker's threads."""
        return await _threads.run(lambda: self.job(job_id, token))

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
