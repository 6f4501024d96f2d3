"""The worker runtime: register handlers for queues, and ``run`` them with
concurrency limits, automatic lease renewal, handler timeouts, retries with
the queue's backoff, dead letters, and a graceful shutdown on SIGTERM::

    worker = honker.Worker(db, concurrency=16)

    @worker.task("emails", concurrency=8, timeout=30)
    def send(job):                  # sync: runs on one of the worker's threads
        mailer.send(**job.payload)

    @worker.task("thumbnails")
    async def resize(job):          # async: an asyncio task on the worker's loop
        await make_thumbnail(job.payload["path"])

    worker.run()                    # or: await worker.run_async()

The loop is core's (``honker::runtime::Worker``), the same in every
language: a handler's return value acks the job (and is saved as its
result); :class:`Retry` retries it after a delay; any other exception retries
it with the queue's backoff and dead-letters it once its attempts are spent;
:class:`Permanent` dead-letters it at once; :class:`Snooze` runs it again
later without spending an attempt.

A job enqueued (or an event published) under an active OpenTelemetry span
carries that span's W3C trace context: the handler runs with it attached,
so the spans it starts continue the producer's trace (``honker[otel]``;
without the OpenTelemetry API nothing is captured or imported).

Semantics are at-least-once. A handler that overruns its ``timeout`` has its
job retried then; an async handler is cancelled (and awaited before its slot
frees), a sync one cannot be stopped: it keeps its slot until it returns, its
outcome is discarded, and the retry may run meanwhile (``job.cancelled``
tells a sync handler to stop early). Make handlers idempotent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import logging
import os
import queue as _queue
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Union

from . import _args, _native, _threads
from ._defaults import WORKER_CONCURRENCY, WORKER_GRACE
from ._time import Seconds, seconds
from ._trace import attached as _attached
from .errors import InvalidArgument
from .group import Group, GroupEvent
from .queue import Job, Queue

if TYPE_CHECKING:
    from .database import Database

log = logging.getLogger("honker.worker")

Handler = Callable[[Any], Union[Any, Awaitable[Any]]]
"""A handler: called with the :class:`Job` (or, for a consumer group, the
:class:`GroupEvent`)."""
Item = Union[Job, GroupEvent]


class Permanent(Exception):
    """Raise from a handler when no retry can help (an invalid address): the
    job goes to the dead letters at once, with this message as its error."""


class Retry(Exception):
    """Raise from a handler to retry the job after ``delay`` seconds (default:
    the queue's backoff), spending an attempt: a 429 with ``Retry-After``."""

    def __init__(self, message: str = "retry requested", *, delay: Seconds | None = None) -> None:
        super().__init__(message)
        d = seconds("delay", delay)
        # Checked here, where it is written (a bad one failed only when
        # the worker recorded the outcome).
        self.delay = None if d is None else _native.check_seconds("delay", d)


class Snooze(Exception):
    """Raise from a handler to run the job again after ``delay`` seconds
    without spending an attempt (not now: a resource is busy)."""

    def __init__(self, delay: Seconds) -> None:
        d = seconds("delay", delay)
        if d is None:
            raise InvalidArgument("INVALID_ARGUMENT", "Snooze needs a delay, got None")
        d = _native.check_seconds("delay", d)
        super().__init__(f"snoozed for {d:g} s")
        self.delay = d


@dataclasses.dataclass(frozen=True)
class WorkerEvent:
    """What a hook receives (``worker.on(kind, fn)``)."""

    kind: str
    """``start``, ``success``, ``retry``, ``dead``, ``snoozed``, ``timed_out``,
    ``lease_lost``, ``released`` or ``settled``."""
    queue: str
    job_id: int
    attempts: int
    """The job's attempts, counting this run."""
    seconds: float | None
    """How long the handler ran (None for ``start``)."""
    error: str | None = None
    """The error recorded for ``retry``/``dead``."""
    state: str | None = None
    """The job's new state after ``retry``/``snoozed`` (``ready``,
    ``scheduled`` or ``dead``)."""
    group: str | None = None
    """For a consumer group's event: the group (``queue`` is then its
    stream, ``job_id`` the event's offset, ``attempts`` its deliveries)."""


KINDS = ("start", *_native.FINISHED_EVENTS)  # core names how a task finished


@dataclasses.dataclass
class _Registration:
    queue: Queue | None
    lease: float | None  # core checks the other options
    handler: Handler | None = None  # the whole queue's
    tasks: dict[str, Handler] = dataclasses.field(default_factory=dict)
    group: Group | None = None  # a consumer group's registration


class Worker:
    """Runs registered handlers for queues; see the module docs.

    ``concurrency`` bounds the handlers running at once over all queues (each
    queue may set a lower limit); ``worker_id`` is what claims record
    (default ``<host>-<pid>``); ``grace`` is how long a shutdown waits for
    running handlers before releasing their jobs (no attempt spent) so that
    another process takes them at once. While it runs, the worker also runs
    the file's scheduler (``scheduler=False`` leaves it out): every worker
    process fires schedules, each boundary once.
    """

    def __init__(
        self,
        db: Database,
        *,
        concurrency: int = WORKER_CONCURRENCY,
        worker_id: str | None = None,
        grace: Seconds = WORKER_GRACE,
        scheduler: bool = True,
    ) -> None:
        self._db = db
        self.concurrency = concurrency
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        # Core checks every option here, before anything runs.
        self._native = _native.Worker(
            db._native,
            worker_id=self.worker_id,
            concurrency=_args.integer("concurrency", concurrency, _args.I64),
            grace=_args.duration("grace", grace),
            run_scheduler=_args.flag("scheduler", scheduler),
        )
        # By (queue or stream, None or group): what a task's (queue, group) names.
        self._queues: dict[tuple[str, str | None], _Registration] = {}
        self._hooks: dict[str, list[Callable[[WorkerEvent], object]]] = {k: [] for k in KINDS}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pool = _Pool(concurrency)
        # Sync tasks handed to the pool whose handler has not started, by
        # key; and handlers between that decision and their `start` event.
        # Once run() has drained, it finishes the unstarted itself: no
        # handler starts after run() returns.
        self._unstarted: dict[int, tuple[_native.Task, Item]] = {}
        self._starting = 0
        # Sync handlers running now, by key: (task, job, when it started).
        # A drain that runs out of grace releases their jobs while they go
        # on (a thread cannot be cancelled); the `released` event is told
        # then, once (`_told_released`), not when the handler returns.
        self._running_sync: dict[int, tuple[_native.Task, Item, float]] = {}
        self._told_released: set[int] = set()
        self._closed = False
        self._start_cv = threading.Condition()
        self._keys = itertools.count()

    @property
    def grace(self) -> float:
        """Seconds a shutdown gives running handlers before releasing their
        jobs."""
        return self._native.grace

    @grace.setter
    def grace(self, value: Seconds) -> None:
        self._native.grace = seconds("grace", value)  # type: ignore[assignment]

    # ----- registration ---------------------------------------------------

    def task(
        self,
        queue: str | Queue | None = None,
        *,
        stream: str | None = None,
        group: str | Group | None = None,
        task: str | None = None,
        concurrency: int | None = None,
        timeout: Seconds | None = None,
        lease: Seconds | None = None,
    ) -> Callable[[Handler], Handler]:
        """Registers the decorated function for ``queue``'s jobs (``def`` runs
        on a thread, ``async def`` on the event loop); it receives the
        :class:`Job`. With ``task``, the queue carries the envelope
        ``{"task": name, "args": ...}`` and this handler takes the jobs whose
        ``task`` is ``name`` (their ``job.payload["args"]`` are the
        arguments); a job whose task has no handler goes to the dead letters
        with ``no handler for task <name>``. ``concurrency``, ``timeout``
        (seconds) and ``lease`` are the queue's.

        With ``stream`` and ``group`` (a name, or a :class:`Group`) instead
        of a queue, the function handles that consumer group's events as
        its member named by the worker id: it receives the
        :class:`GroupEvent`; its return acks it, :class:`Retry` and other
        exceptions retry it (dead after the group's ``max_deliveries``),
        :class:`Permanent` dead-letters it, and :class:`Snooze` retries it
        after the delay (a group has no snooze that spends no delivery).
        The group must exist (:meth:`Group.create`)."""

        def register(fn: Handler) -> Handler:
            if queue is None:
                self.register_group(
                    self._group(stream, group),
                    fn,
                    concurrency=concurrency,
                    timeout=timeout,
                    lease=lease,
                )
            else:
                if stream is not None or group is not None:
                    raise InvalidArgument(
                        "INVALID_ARGUMENT", "give a queue, or a stream and a group, not both"
                    )
                self.register(
                    queue, fn, task=task, concurrency=concurrency, timeout=timeout, lease=lease
                )
            return fn

        if queue is None and task is not None:
            raise InvalidArgument("INVALID_ARGUMENT", "task= names a queue's task envelope")
        if queue is None:
            self._group(stream, group)  # checked now, not at decoration
        return register

    def _group(self, stream: str | None, group: str | Group | None) -> Group:
        if isinstance(group, Group):
            if stream is not None and stream != group.stream.name:
                raise InvalidArgument(
                    "INVALID_ARGUMENT", f"group {group!r} is not on stream {stream!r}"
                )
            return group
        if not isinstance(stream, str) or not isinstance(group, str):
            raise InvalidArgument(
                "INVALID_ARGUMENT", "give a queue, or a stream and a group (names)"
            )
        return self._db.stream(stream).group(group)

    def register_group(
        self,
        group: Group,
        handler: Handler,
        *,
        concurrency: int | None = None,
        timeout: Seconds | None = None,
        lease: Seconds | None = None,
    ) -> None:
        """:meth:`task` with ``stream``/``group``, without the decorator."""
        if not callable(handler):
            raise InvalidArgument("INVALID_ARGUMENT", "a handler must be callable")
        if not isinstance(group, Group):
            raise InvalidArgument("INVALID_ARGUMENT", f"not a Group: {group!r}")
        t, ls = seconds("timeout", timeout), seconds("lease", lease)
        key = (group.stream.name, group.name)
        with self._lock:
            # Core's rules (one handler per group, none once the run
            # started); it checks the options and that the group exists.
            self._native.register_group(group._native, concurrency=concurrency, timeout=t, lease=ls)
            self._queues[key] = _Registration(None, ls, handler, group=group)

    def register(
        self,
        queue: str | Queue,
        handler: Handler,
        *,
        task: str | None = None,
        concurrency: int | None = None,
        timeout: Seconds | None = None,
        lease: Seconds | None = None,
    ) -> None:
        """:meth:`task` without the decorator."""
        if not callable(handler):
            raise InvalidArgument("INVALID_ARGUMENT", "a handler must be callable")
        if task is not None and (not isinstance(task, str) or not task):
            raise InvalidArgument("INVALID_ARGUMENT", "a task name must be a non-empty str")
        q = queue if isinstance(queue, Queue) else self._db.queue(queue)
        t, ls = seconds("timeout", timeout), seconds("lease", lease)
        with self._lock:
            # Core's rules: one handler per task of the envelope or one for
            # every job, the queue's options named once, none once the run
            # started.
            self._native.register(
                q._native, task=task, concurrency=concurrency, timeout=t, lease=ls
            )
            reg = self._queues.get((q.name, None))
            if reg is None:
                reg = self._queues[(q.name, None)] = _Registration(q, ls)
            if task is None:
                reg.handler = handler
            else:
                reg.tasks[task] = handler

    def on(self, kind: str, hook: Callable[[WorkerEvent], object]) -> None:
        """Calls ``hook(event)`` for each ``kind`` of event (see
        :class:`WorkerEvent`), on the thread that saw it; a hook that raises
        is logged and ignored. Every event is also logged to
        ``honker.worker``."""
        if kind not in self._hooks:
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"unknown event {kind!r}: one of {', '.join(KINDS)}"
            )
        self._hooks[kind].append(hook)

    # ----- running --------------------------------------------------------

    def stop(self) -> None:
        """Begins a graceful shutdown (thread-safe, no I/O; what SIGTERM
        does): no claim from now on; running handlers get the grace period,
        then what still runs is released."""
        self._stop.set()
        self._native.stop()
        on_stop = self._on_stop
        if on_stop is not None:
            on_stop()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def paused(self) -> dict[str, int]:
        """The queues whose due jobs a pause held back at this worker's last
        look (``Queue.pause``, ``Database.pause_all``), each with how many of
        its looks (one per wake-up: a commit by any process) found that; a
        queue leaves it once a look finds it running again or with nothing due."""
        return dict(self._native.paused)

    @property
    def queues(self) -> list[str]:
        """The queues with handlers."""
        return [name for name, group in self._queues if group is None]

    @property
    def groups(self) -> list[tuple[str, str]]:
        """The consumer groups with handlers, as ``(stream, group)``."""
        return [(name, group) for name, group in self._queues if group is not None]

    def run(self, *, signals: bool = True) -> None:
        """Runs until :meth:`stop` (or SIGTERM/SIGINT, with ``signals`` on the
        main thread: a second signal ends the grace period at once), then
        drains: running handlers get ``grace`` seconds to finish, and what
        still runs is released. Async handlers run on an event loop this
        call starts."""
        on_main = threading.current_thread() is threading.main_thread()
        if any(_is_async(h) for r in self._queues.values() for h in _handlers(r)):
            # The loop's own signal handling wakes it whichever thread the
            # signal reached.
            asyncio.run(self.run_async(signals=signals and on_main))
            return
        previous = self._install_signals() if signals and on_main else None
        try:
            with _threads.MainWait(on_main) as wait:
                native = self._start()
                self._on_stop = wait.wake
                feeder = self._feed(native, None)
                try:
                    wait.until(self._stop)  # signal handlers run meanwhile
                finally:
                    native.stop()
                    wait.call(native.drain)
                    wait.call(feeder.join)
                    wait.call(lambda: self._close(native))
        finally:
            self._on_stop = None
            self._restore_signals(previous)

    async def run_async(self, *, signals: bool = False) -> None:
        """Runs on this event loop until :meth:`stop`, cancellation of the
        calling task, or (with ``signals``) SIGTERM/SIGINT; then drains as
        :meth:`run` does (a cancelled ``run_async`` drains, then raises
        ``CancelledError``). Sync handlers run on the worker's threads."""
        loop = asyncio.get_running_loop()
        native = await _threads.run(self._start)
        stopped = asyncio.Event()
        self._on_stop = lambda: loop.call_soon_threadsafe(stopped.set)
        if self._stop.is_set():
            stopped.set()
        installed = []
        previous = None
        if signals:
            try:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.add_signal_handler(sig, self._signalled)
                    installed.append(sig)
            except NotImplementedError:
                # Windows' loops have no add_signal_handler: Python's own
                # handlers (the main thread's) stop the worker instead.
                previous = self._install_signals()
        running: dict[asyncio.Task[None], _native.Task] = {}
        self._running_tasks = running
        feeder = self._feed(native, loop)
        try:
            await stopped.wait()
        finally:
            self._stop.set()
            native.stop()
            # Shielded: a cancelled run_async still drains before it raises.
            await asyncio.shield(self._drain_async(native, running, feeder))
            for sig in installed:
                loop.remove_signal_handler(sig)
            self._restore_signals(previous)
            self._on_stop = None

    # ----- internals ------------------------------------------------------

    _on_stop: Callable[[], object] | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    # The running async handlers' tasks, each with its native task: the
    # drain cancels what outlives the grace period, and the watcher those
    # the worker gave up on (see _watch_gave_up).
    _running_tasks: dict[asyncio.Task[None], _native.Task]

    def _start(self) -> _native.Worker:
        with self._lock:
            self._native.start()  # a Worker runs once, with a handler
            return self._native

    def _signalled(self, *_: object) -> None:
        if self._native.signalled():  # core's policy: a second signal ends the grace
            log.warning("second signal: releasing the running jobs now")
        else:
            log.info("shutting down: no new jobs; running ones get %g s", self.grace)
        self.stop()

    def _install_signals(self) -> dict[int, Any]:
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, self._signalled)
        return previous

    @staticmethod
    def _restore_signals(previous: dict[int, Any] | None) -> None:
        for sig, handler in (previous or {}).items():
            signal.signal(sig, handler)

    def _feed(
        self, native: _native.Worker, loop: asyncio.AbstractEventLoop | None
    ) -> threading.Thread:
        """The thread that keeps one ``next`` outstanding (the worker's
        clock: renewals and timeouts happen inside it) and dispatches each
        task: sync handlers to the worker's threads, async ones to the loop."""

        def feed() -> None:
            while True:
                try:
                    task = native.next(60.0)
                except BaseException:  # the database closed under the worker
                    log.exception("the worker stopped: its next claim failed")
                    self._signalled()
                    return
                if task is None:
                    if native.stopping:
                        native.shutdown()  # releases what it claimed and kept
                        return
                    continue
                try:
                    self._dispatch(native, task, loop)
                except RuntimeError:  # the loop closed: released when collected
                    return

        self._loop = loop
        if loop is not None:
            self._watch_gave_up(native, loop)
        thread = threading.Thread(target=feed, name="honker-worker", daemon=True)
        thread.start()
        return thread

    def _watch_gave_up(self, native: _native.Worker, loop: asyncio.AbstractEventLoop) -> None:
        """A thread that cancels the asyncio task of each async handler the
        worker gave up on (its job cancelled elsewhere or taken over after
        a lost lease; a timeout, which ``wait_for`` also enforces; a
        shutdown's release) as soon as core says so: it waits on core's
        ``wait_gave_up``, woken when it happens, not polling. It ends with
        the worker (``_close`` wakes it)."""

        def watch() -> None:
            seen = native.gave_up_generation
            while not self._closed:
                seen = native.wait_gave_up(seen, 60.0)
                for t, task in list(self._running_tasks.items()):
                    if task.cancelled and not t.done():
                        try:
                            loop.call_soon_threadsafe(t.cancel)
                        except RuntimeError:  # the loop closed: nothing left to tell
                            return

        threading.Thread(target=watch, name="honker-worker-cancels", daemon=True).start()

    def _dispatch(
        self, native: _native.Worker, task: _native.Task, loop: asyncio.AbstractEventLoop | None
    ) -> None:
        reg = self._queues[(task.queue, task.group)]
        job: Item
        if reg.group is not None:
            row = task.event
            assert row is not None  # a group's task carries its event
            job = GroupEvent(reg.group, row)
        else:
            assert reg.queue is not None
            job = Job(reg.queue, self.worker_id, task.job, reg.lease or reg.queue._lease)
        job._task = task
        handler = self._handler(reg, task)
        if loop is not None and not isinstance(handler, Permanent) and _is_async(handler):
            loop.call_soon_threadsafe(self._start_async, native, task, job, handler)
        else:
            key = next(self._keys)
            with self._start_cv:
                self._unstarted[key] = (task, job)
            self._pool.submit(self._run_sync, native, key, task, job, handler)

    def _close(self, native: _native.Worker) -> None:
        """After the drain: the tasks whose handler has not started never
        start (finished here as released: the drain released what was still
        ours, or the lease was lost), and the handlers that did start have
        had their `start` event."""
        with self._start_cv:
            self._closed = True
            left = list(self._unstarted.values())
            self._unstarted.clear()
        native.wake_gave_up()  # ends _watch_gave_up's thread
        for task, job in left:
            self._finish(native, task, job, "release", None, None)
        with self._start_cv:
            self._start_cv.wait_for(lambda: self._starting == 0)
            # Every task the drain did not release has its outcome recorded;
            # a handler thread that recorded one may not have told its hook
            # yet: run() returns after it has (a hook never comes late).
            self._start_cv.wait_for(
                lambda: all(run[0].cancelled for run in self._running_sync.values())
            )
            # Sync handlers still running whose jobs the drain released
            # (issue 53: their `released` hook and log line never came,
            # as the handler may return after run() has). One whose lease
            # was lost, or that timed out, is told that when it returns.
            still = [
                (key, run)
                for key, run in self._running_sync.items()
                if run[0].cancelled and not run[0].lost and not run[0].timed_out
            ]
            for key, _ in still:
                self._told_released.add(key)
        now = time.monotonic()
        for _, (task, job, started) in still:
            self._emit("released", task.queue, job, now - started)

    @staticmethod
    def _handler(reg: _Registration, task: _native.Task) -> Handler | Permanent:
        # Core routed it: the queue's handler, its envelope's task's, or none.
        if task.refused is not None:
            return Permanent(task.refused)
        if task.task_name is not None:
            return reg.tasks[task.task_name]
        assert reg.handler is not None
        return reg.handler

    def _run_sync(
        self,
        native: _native.Worker,
        key: int,
        task: _native.Task,
        job: Item,
        handler: Handler | Permanent,
    ) -> None:
        with self._start_cv:
            if self._unstarted.pop(key, None) is None:
                return  # run() finished it
            # Given up on before it started (a lease lost while this process
            # was stopped, a drain's release): the handler does not run.
            skip = self._closed or job.cancelled
            permanent = isinstance(handler, Permanent)
            if not (skip or permanent):
                self._starting += 1
        if skip:
            self._finish(native, task, job, "release", None, None)
            return
        if isinstance(handler, Permanent):
            self._finish(native, task, job, "permanent", None, str(handler))
            return
        try:
            self._emit("start", task.queue, job, None)
        finally:
            with self._start_cv:
                self._starting -= 1
                self._running_sync[key] = (task, job, time.monotonic())
                self._start_cv.notify_all()
        try:
            try:
                with _attached(job.trace_context):
                    result = handler(job)
                    if inspect.isawaitable(result):  # an async handler under run(): its own loop
                        result = asyncio.run(_awaited(result))
            except BaseException as e:
                self._finish(native, task, job, *_outcome(e), key=key)
                if not isinstance(e, Exception):
                    raise
            else:
                self._finish(native, task, job, "ack", result, None, key=key)
        finally:
            with self._start_cv:
                self._running_sync.pop(key, None)
                self._told_released.discard(key)
                self._start_cv.notify_all()

    def _start_async(
        self, native: _native.Worker, task: _native.Task, job: Item, handler: Handler
    ) -> None:
        t = asyncio.get_running_loop().create_task(self._run_async(native, task, job, handler))
        self._running_tasks[t] = task
        t.add_done_callback(self._running_tasks.pop)

    async def _run_async(
        self, native: _native.Worker, task: _native.Task, job: Item, handler: Handler
    ) -> None:
        if job.cancelled:  # given up on before it started: see _run_sync
            await self._finish_async(native, task, job, ("release", None, None))
            return
        self._emit("start", task.queue, job, None)
        remaining = task.remaining
        try:
            with _attached(job.trace_context):
                coro = _awaited(handler(job))
                result = await (
                    coro if remaining is None else asyncio.wait_for(coro, max(remaining, 0))
                )
        except asyncio.TimeoutError:
            # Cancelled and awaited by wait_for: core records the timeout.
            outcome: tuple[str, Any, str | None] = ("retry", None, "timed out")
        except asyncio.CancelledError:
            # Cancelled by the host (a drain that ran out of grace, a closing
            # loop), not failed: the job goes back without spending an attempt.
            await asyncio.shield(
                _threads.run(self._finish, native, task, job, "release", None, None)
            )
            raise
        except Exception as e:
            outcome = _outcome(e)
        else:
            outcome = ("ack", result, None)
        await self._finish_async(native, task, job, outcome)

    async def _finish_async(
        self,
        native: _native.Worker,
        task: _native.Task,
        job: Item,
        outcome: tuple[str, Any, str | None],
    ) -> None:
        """`_finish` from the event loop: on it where nothing waits, else on
        a thread."""
        if not self._finish(native, task, job, *outcome, on_loop=True):
            await _threads.run(self._finish, native, task, job, *outcome)

    def _finish(
        self,
        native: _native.Worker,
        task: _native.Task,
        job: Item,
        outcome: str,
        value: Any,
        error: str | None,
        *,
        on_loop: bool = False,
        key: int | None = None,
    ) -> bool:
        """Records the outcome. ``on_loop``: only without waiting (core's
        ``try_complete``, on the event loop's thread, where an uncontended
        commit costs less than the hop to a thread): False, with nothing
        done, where it would wait; then call it again on a thread."""
        if job._settled:  # the handler acked (or retried...) the job itself
            outcome = "settled"
        kw: dict[str, Any] = {}
        if outcome == "ack" and not isinstance(job, GroupEvent):  # a group keeps no results
            kw["result"] = value
        elif outcome in ("retry", "snooze"):
            kw["delay"] = value
        if error is not None:
            kw["error"] = error
        complete = native.try_complete if on_loop else native.complete
        try:
            try:
                report = complete(task, outcome, **kw)
            except (TypeError, ValueError) as e:
                # A result that is not JSON: the task was not consumed, and
                # core records why the job runs again.
                report = complete(task, "unstorable", error=f"{type(e).__name__}: {e}")
        except Exception:
            # The database failed: the slot is free, and the job's lease
            # lapses, so it runs again (at-least-once).
            log.exception("job %s on %r: recording the outcome failed", job.id, task.queue)
            return True
        if report is None:
            return False
        # The completion claimed the next job for the freed slot: start it
        # from here rather than wait for the feeder thread to hand it over.
        following = native.try_next()
        if following is not None:
            try:
                self._dispatch(native, following, self._loop)
            except RuntimeError:  # the loop closed: released when collected
                pass
        _, queue, _, kind, state, recorded, ran = report
        if key is not None:
            with self._start_cv:
                if key in self._told_released:
                    return True  # `released` was told when the drain ended
        self._emit(kind, queue, job, ran, recorded, state)
        return True

    def _emit(
        self,
        kind: str,
        queue: str,
        job: Item,
        ran: float | None,
        error: str | None = None,
        state: str | None = None,
    ) -> None:
        hooks = self._hooks[kind]
        level = _LEVELS[kind]
        if not hooks and not log.isEnabledFor(level):
            return
        group = job._group.name if isinstance(job, GroupEvent) else None
        event = WorkerEvent(kind, queue, job.id, job.attempts, ran, error, state, group)
        if log.isEnabledFor(level):
            what = (
                f"job {job.id} on {queue!r} (attempt {job.attempts})"
                if group is None
                else f"event {job.id} of group {group!r} on {queue!r} (delivery {job.attempts})"
            )
            log.log(
                level,
                "%s %s%s%s",
                kind,
                what,
                "" if ran is None else f" after {ran * 1000:.1f} ms",
                "" if error is None else f": {error}",
            )
        for hook in hooks:
            try:
                hook(event)
            except Exception:
                log.exception("a worker hook for %r raised", kind)

    async def _drain_async(
        self,
        native: _native.Worker,
        running: dict[asyncio.Task[None], _native.Task],
        feeder: threading.Thread,
    ) -> None:
        await _threads.run(native.drain)
        # The feeder's last dispatches reach this loop before its join does.
        await _threads.run(feeder.join)
        await _threads.run(self._close, native)
        # Tasks created by those dispatches take their first step (a task
        # given up on finishes there without running its handler).
        await asyncio.sleep(0)
        # What outlived the grace period was released: cancel it and wait.
        for t in list(running):
            t.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)


# How loud each event is in the log: core's (Finished::log_level).
_LEVELS = {kind: getattr(logging, level.upper()) for kind, level in _native.EVENT_LEVELS.items()}


def _handlers(reg: _Registration) -> list[Handler]:
    return [reg.handler] if reg.handler is not None else list(reg.tasks.values())


def _is_async(fn: Any) -> bool:
    # A class instance with an `async def __call__` is async too.
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        type(fn).__call__ if not inspect.isroutine(fn) else None
    )


async def _awaited(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _outcome(e: BaseException) -> tuple[str, Any, str | None]:
    """A handler's exception as an outcome: (kind, delay, error)."""
    if isinstance(e, Permanent):
        return ("permanent", None, str(e) or type(e).__name__)
    if isinstance(e, Snooze):
        return ("snooze", e.delay, None)
    if isinstance(e, Retry):
        return ("retry", e.delay, str(e))
    return ("retry", None, f"{type(e).__name__}: {e}")


class _Pool:
    """The worker's threads for sync handlers: one per slot, daemon threads
    so that a handler that never returns cannot hold the process past its
    shutdown (its job was released at the end of the grace period)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._work: _queue.SimpleQueue[tuple[Callable[..., object], tuple[Any, ...]]] = (
            _queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        with self._lock:
            if self._idle == 0 and len(self._threads) < self._size + 1:
                t = threading.Thread(target=self._loop, name="honker-handler", daemon=True)
                self._threads.append(t)
                t.start()
            else:
                self._idle -= 1
        self._work.put((fn, args))

    def _loop(self) -> None:
        while True:
            fn, args = self._work.get()
            try:
                fn(*args)
            except BaseException:
                log.exception("a worker thread's call raised")
            with self._lock:
                self._idle += 1
