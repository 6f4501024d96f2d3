"""honker.Worker: core's worker runtime with Python handlers (threads for
``def``, asyncio tasks for ``async def``). Mirrors core/tests/worker.rs, plus
what only a process shows: SIGTERM, SIGSTOP past the lease, the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import honker
import pytest
from conftest import stop_when


@pytest.fixture
def rdb(path: Path):
    """A database on the real clock: leases lapse in real time."""
    database = honker.open(path)
    yield database
    database.close()


class Peak:
    """Counts handlers running at once, overall and per key."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}

    def enter(self, *keys: str) -> None:
        with self.lock:
            for k in keys:
                self.now[k] = self.now.get(k, 0) + 1
                self.peak[k] = max(self.peak.get(k, 0), self.now[k])

    def leave(self, *keys: str) -> None:
        with self.lock:
            for k in keys:
                self.now[k] -= 1


def test_sync_handlers_never_exceed_the_limits(rdb):
    rdb.queue("a").enqueue_many(list(range(40)))
    rdb.queue("b").enqueue_many(list(range(40)))
    w = honker.Worker(rdb, concurrency=5)
    peak, done = Peak(), []

    def counted(queue: str):
        def handler(job):
            peak.enter(queue, "all")
            time.sleep(0.005)
            peak.leave(queue, "all")
            done.append(job.id)

        return handler

    w.register("a", counted("a"), concurrency=2)
    w.register("b", counted("b"), concurrency=4)

    stop_when(w, lambda: len(done) == 80)
    w.run(signals=False)
    assert len(done) == 80 and len(set(done)) == 80
    assert peak.peak["a"] <= 2 and peak.peak["b"] <= 4 and peak.peak["all"] <= 5, peak.peak
    assert peak.peak["all"] >= 3, f"handlers ran concurrently: {peak.peak}"


def test_async_handlers_never_exceed_the_limits(rdb):
    rdb.queue("a").enqueue_many(list(range(60)))
    w = honker.Worker(rdb, concurrency=8)
    peak, done = Peak(), []

    @w.task("a", concurrency=6)
    async def a(job):
        peak.enter("a")
        await asyncio.sleep(0.005)
        peak.leave("a")
        done.append(job.id)

    async def main() -> None:
        run = asyncio.create_task(w.run_async())
        while len(done) < 60:
            await asyncio.sleep(0.01)
        w.stop()
        await run

    asyncio.run(asyncio.wait_for(main(), 60))
    assert sorted(done) == sorted(set(done)) and len(done) == 60
    assert 3 <= peak.peak["a"] <= 6, peak.peak


def test_outcomes_ack_result_retry_permanent_snooze(rdb):
    q = rdb.queue("q", max_attempts=2, backoff_base=0.05, backoff_jitter=0)
    ids = {
        kind: q.enqueue({"kind": kind}).id
        for kind in ("ack", "retry", "boom", "permanent", "snooze", "unstorable")
    }
    w = honker.Worker(rdb, concurrency=4)
    events: list[honker.WorkerEvent] = []
    for kind in honker.worker.KINDS:
        w.on(kind, events.append)
    runs: dict[str, int] = {}

    @w.task("q")
    def handle(job):
        kind = job.payload["kind"]
        runs[kind] = runs.get(kind, 0) + 1
        if kind == "ack":
            return {"sent": True}
        if kind == "retry":
            raise honker.Retry("429 from the API", delay=60)
        if kind == "boom":
            raise RuntimeError("flaky")
        if kind == "permanent":
            raise honker.Permanent("invalid address")
        if kind == "snooze":
            if runs[kind] == 1:
                raise honker.Snooze(0.05)
            return "later"
        return object()  # not JSON

    def finished() -> bool:
        dead = {d.id for d in q.dead_letters()}
        return {ids["boom"], ids["permanent"]} <= dead and runs.get("snooze", 0) >= 2

    stop_when(w, finished)
    w.run(signals=False)

    assert q.get_result(ids["ack"]) == {"sent": True}
    retry = q.get_job(ids["retry"])
    assert (retry.state, retry.attempts, retry.last_error) == ("scheduled", 1, "429 from the API")
    assert retry.run_at.timestamp() > time.time() + 50
    boom = q.get_job(ids["boom"])
    assert (boom.state, boom.attempts) == ("dead", 2), "retried with the backoff, then dead"
    assert boom.last_error == "RuntimeError: flaky"
    perm = q.get_job(ids["permanent"])
    assert (perm.state, perm.attempts, perm.last_error) == ("dead", 1, "invalid address")
    assert q.get_result(ids["snooze"]) == "later"
    assert runs["snooze"] == 2
    unstorable = q.get_job(ids["unstorable"])
    assert unstorable.last_error.startswith(
        "the handler's result could not be stored: InvalidArgument"
    )
    kinds = {(e.kind, e.job_id) for e in events}
    assert ("success", ids["ack"]) in kinds and ("start", ids["ack"]) in kinds
    assert ("retry", ids["retry"]) in kinds and ("dead", ids["permanent"]) in kinds
    assert ("snoozed", ids["snooze"]) in kinds
    ev = next(e for e in events if e.kind == "dead" and e.job_id == ids["permanent"])
    assert ev.error == "invalid address" and ev.queue == "q" and ev.seconds is not None


def test_envelope_dispatches_by_task_and_unknown_tasks_go_dead(rdb):
    q = rdb.queue("jobs")
    q.enqueue({"task": "resize", "args": {"w": 10}})
    q.enqueue({"task": "email", "args": ["a@b.c"]})
    unknown = q.enqueue({"task": "transcode", "args": []}).id
    raw = q.enqueue({"no": "envelope"}).id
    w = honker.Worker(rdb)
    got: dict[str, object] = {}

    @w.task("jobs", task="resize")
    def do_resize(job):
        got["resize"] = job.payload["args"]

    @w.task("jobs", task="email")
    async def do_email(job):
        got["email"] = job.payload["args"]

    with pytest.raises(honker.InvalidArgument):
        w.register("jobs", lambda job: None)  # the queue carries tasks
    with pytest.raises(honker.InvalidArgument):
        w.register("jobs", lambda job: None, task="resize")  # taken

    stop_when(w, lambda: len(got) == 2 and len(q.dead_letters()) == 2)
    w.run(signals=False)
    assert got == {"resize": {"w": 10}, "email": ["a@b.c"]}
    assert q.get_job(unknown).last_error == "no handler for task transcode"
    assert q.get_job(raw).last_error.startswith("not a task envelope")
    assert q.stats().running == 0


def test_a_handler_running_five_times_its_lease_is_not_duplicated(rdb):
    q = rdb.queue("slow")
    job_id = q.enqueue("x").id
    w = honker.Worker(rdb, concurrency=1)
    runs, stolen = [], []

    @w.task("slow", lease=0.2)
    def slow(job):
        runs.append(job.id)
        end = time.monotonic() + 1.0  # 5x the lease
        while time.monotonic() < end:
            stolen.extend(q.claim_batch("thief", 1))  # must find nothing
            time.sleep(0.05)
        return "done"

    stop_when(w, lambda: q.get_result(job_id) == "done")
    w.run(signals=False)
    assert runs == [job_id] and stolen == []


def test_a_sync_handler_past_its_timeout_has_its_job_retried(rdb):
    q = rdb.queue("t", backoff_base=0.05, backoff_jitter=0)
    job_id = q.enqueue("x").id
    w = honker.Worker(rdb, concurrency=2)
    events: list[honker.WorkerEvent] = []
    w.on("timed_out", events.append)
    w.on("success", events.append)
    seen_cancelled = []

    @w.task("t", timeout=0.2)
    def handler(job):
        if job.attempts == 1:
            while not job.cancelled:  # told to stop by the flag
                time.sleep(0.01)
            seen_cancelled.append(time.monotonic())
            return "too late"
        return "second run"

    stop_when(w, lambda: any(e.kind == "success" for e in events))
    w.run(signals=False)
    assert seen_cancelled, "the sync handler saw job.cancelled"
    assert q.get_result(job_id) == "second run"
    kinds = [e.kind for e in events]
    assert kinds == ["timed_out", "success"], kinds


def test_an_async_handler_past_its_timeout_is_cancelled_and_retried(rdb):
    q = rdb.queue("t", backoff_base=0.05, backoff_jitter=0, max_attempts=2)
    job_id = q.enqueue("x").id
    w = honker.Worker(rdb)
    cancelled = []

    @w.task("t", timeout=0.2)
    async def handler(job):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(job.attempts)
            raise

    stop_when(w, lambda: q.get_job(job_id).state == "dead")
    w.run(signals=False)
    assert cancelled == [1, 2]
    assert q.get_job(job_id).last_error == "handler timed out after 200 ms"


def test_an_async_handler_whose_job_is_cancelled_elsewhere_is_cancelled(path):
    """Issue 56 §5 in asyncio's idiom: another open of the file cancels the
    running job; the handler's task is cancelled at the worker's next lease
    renewal (a third of the lease), its outcome refused (``lease_lost``).
    The same through every Worker language is the cancel_running interop
    play."""
    db, other = honker.open(path), honker.open(path)
    q = db.queue("c")
    job_id = q.enqueue("x").id
    w = honker.Worker(db)
    started, heard, lost = threading.Event(), [], []
    w.on("lease_lost", lambda e: lost.append(e.job_id))

    @w.task("c", lease=0.6)
    async def handler(job):
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            heard.append(time.monotonic())
            raise

    def cancel() -> None:
        assert started.wait(10)
        cancelled_at.append(time.monotonic())
        assert other.queue("c").cancel(job_id, reason="by hand") is True
        stop_when(w, lambda: bool(heard) and bool(lost))

    cancelled_at: list[float] = []
    threading.Thread(target=cancel, daemon=True).start()
    w.run(signals=False)
    assert lost == [job_id]
    assert heard[0] - cancelled_at[0] < 0.2 + 2, "told by the next renewal"
    job = q.get_job(job_id)
    assert (job.state, job.last_error) == ("cancelled", "by hand")
    other.close()
    db.close()


def test_a_handler_that_acks_in_its_own_transaction_settles_the_job(rdb):
    rdb.execute("CREATE TABLE sent (job_id INTEGER PRIMARY KEY)")
    q = rdb.queue("outbox")
    ids = [e.id for e in q.enqueue_many(["a", "b", "c"])]
    w = honker.Worker(rdb)
    events: list[honker.WorkerEvent] = []
    w.on("settled", events.append)

    @w.task("outbox")
    def handle(job):
        with rdb.transaction() as tx:
            tx.execute("INSERT INTO sent (job_id) VALUES (?)", [job.id])
            job.ack(tx=tx)

    stop_when(w, lambda: len(events) == 3)
    w.run(signals=False)
    assert sorted(r[0] for r in rdb.query("SELECT job_id FROM sent")) == ids
    assert q.stats().running == 0 and q.stats().ready == 0


def test_run_async_signals_without_add_signal_handler_as_on_windows(rdb, monkeypatch):
    """Windows' event loops have no ``add_signal_handler`` (ADR 30): with
    ``signals=True`` the worker takes Python's own SIGTERM handler, stops on
    the signal, and gives the previous handler back."""
    q = rdb.queue("q")
    q.enqueue("one")
    w = honker.Worker(rdb, grace=0.5)
    done = []

    @w.task("q")
    def handle(job):
        done.append(job.payload)

    def refuse(*_args):
        raise NotImplementedError

    before = signal.getsignal(signal.SIGTERM)

    async def main() -> None:
        monkeypatch.setattr(asyncio.get_running_loop(), "add_signal_handler", refuse)
        run = asyncio.create_task(w.run_async(signals=True))
        while not done:
            if run.done():
                run.result()  # the worker failed to start: raise its error
            await asyncio.sleep(0.01)
        assert signal.getsignal(signal.SIGTERM) != before, "the worker's handler is in place"
        signal.raise_signal(signal.SIGTERM)
        await asyncio.wait_for(run, 10)

    asyncio.run(main())
    assert done == ["one"]
    assert signal.getsignal(signal.SIGTERM) == before, "the previous handler is back"


def test_cancelling_run_async_drains_then_raises(rdb):
    q = rdb.queue("q")
    q.enqueue_many(["short", "long"])
    w = honker.Worker(rdb, grace=0.5)
    started, finished = [], []

    @w.task("q")
    async def handle(job):
        started.append(job.payload)
        await asyncio.sleep(0.05 if job.payload == "short" else 30)
        finished.append(job.payload)

    async def main() -> None:
        run = asyncio.create_task(w.run_async())
        while len(started) < 2:
            await asyncio.sleep(0.01)
        t0 = time.monotonic()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert time.monotonic() - t0 < 5

    asyncio.run(main())
    assert finished == ["short"]
    stats = q.stats()
    assert (stats.ready, stats.running) == (1, 0), "the long one was released"
    assert q.claim_batch("x", 1)[0].attempts == 1, "its attempt was given back"


def test_bad_options_are_invalid_and_change_nothing(rdb):
    with pytest.raises(honker.InvalidArgument):
        honker.Worker(rdb, concurrency=0)
    with pytest.raises(honker.InvalidArgument):
        honker.Worker(rdb, grace=-1)
    w = honker.Worker(rdb)
    with pytest.raises(honker.InvalidArgument):
        w.register("q", lambda job: None, timeout=0)
    with pytest.raises(honker.InvalidArgument):
        w.register("q", "not callable")  # type: ignore[arg-type]
    with pytest.raises(honker.InvalidArgument):
        w.on("finished", print)
    with pytest.raises(honker.InvalidArgument, match="no handler"):
        w.run(signals=False)
    w.register("q", lambda job: None, concurrency=2)
    with pytest.raises(honker.InvalidArgument, match="other options"):
        w.register("q", lambda job: None, task="x", concurrency=3)


# ----- processes ------------------------------------------------------------

APP = """
import os, sys, time, json
import honker

db = honker.open(os.environ["APP_DB"])
worker = honker.Worker(db, concurrency=int(os.environ.get("APP_CONCURRENCY", "4")),
                       grace=float(os.environ.get("APP_GRACE", "2")), worker_id="app")

def log(*parts):
    with open(os.environ["APP_LOG"], "a") as f:
        f.write(json.dumps(parts) + "\\n")

@worker.task("work", lease=float(os.environ.get("APP_LEASE", "60")))
def work(job):
    log("start", job.id, job.payload)
    time.sleep(job.payload["sleep"])
    log("done", job.id)
    return "by app"
"""


# `python -m honker worker`, and the `honker` command the package installs.
LAUNCHERS = {
    "python -m honker": [sys.executable, "-m", "honker"],
    "honker": [str(Path(sys.executable).parent / "honker")],
}


def start_app(
    tmp_path: Path, path: Path, launcher: str = "python -m honker", **env: str
) -> tuple[subprocess.Popen, Path]:
    (tmp_path / "app_worker.py").write_text(textwrap.dedent(APP))
    log = tmp_path / "app.log"
    proc = subprocess.Popen(
        [*LAUNCHERS[launcher], "worker", "app_worker:worker", "--log-level", "DEBUG"],
        cwd=tmp_path,
        env={
            **os.environ,
            "APP_DB": str(path),
            "APP_LOG": str(log),
            **{f"APP_{k.upper()}": v for k, v in env.items()},
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, log


def read_log(log: Path) -> list[list]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def wait_until(cond, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_sigterm_stops_claiming_acks_short_jobs_and_releases_the_long_one(
    tmp_path, path, rdb, launcher
):
    q = rdb.queue("work")
    short = [q.enqueue({"sleep": 0.3}).id for _ in range(3)]
    long = q.enqueue({"sleep": 60}).id
    waiting = [q.enqueue({"sleep": 0}, priority=-1).id for _ in range(5)]
    proc, log = start_app(tmp_path, path, launcher, concurrency="4", grace="2")
    try:
        wait_until(lambda: len([e for e in read_log(log) if e[0] == "start"]) == 4)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        elapsed = time.monotonic() - t0
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert elapsed < 2 + 1.5, f"exited within the grace period (+ start-up slack): {elapsed}"
    started = {e[1] for e in read_log(log) if e[0] == "start"}
    assert started == {*short, long}, "no claim after the signal"
    for i in short:
        assert q.get_result(i) == "by app"
    info = q.get_job(long)
    assert (info.state, info.attempts) == ("ready", 0), "released, attempt given back"
    for i in waiting:
        assert (q.get_job(i).state, q.get_job(i).attempts) == ("ready", 0)
    assert "shutting down" in out


def test_a_sigstopped_worker_loses_its_job_and_its_late_ack_is_refused(tmp_path, path, rdb):
    q = rdb.queue("work")
    job_id = q.enqueue({"sleep": 1.0}).id
    proc, log = start_app(tmp_path, path, concurrency="1", lease="0.5")
    try:
        wait_until(lambda: any(e[0] == "start" for e in read_log(log)))
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.8)  # past the lease: renewals cannot run
        [job] = q.claim_batch("rescuer", 1)
        assert job.id == job_id and job.attempts == 2
        proc.send_signal(signal.SIGCONT)
        wait_until(lambda: any(e[0] == "done" for e in read_log(log)))
        time.sleep(0.3)
        job.ack(result="by rescuer")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert q.get_result(job_id) == "by rescuer", "the late ack was refused"
    assert "lease_lost job" in out, out


class HeldThreads:
    """Holds what a Worker hands to its handler threads until ``let_go()``:
    a handler thread that has not been scheduled yet (a busy host, a process
    that was stopped between the hand-out and the start)."""

    def __init__(self, w: honker.Worker) -> None:
        self.calls: list[tuple] = []
        self.gate = threading.Event()
        real = w._pool.submit

        def submit(fn, *args) -> None:
            self.calls.append(args)

            def later() -> None:
                self.gate.wait()
                real(fn, *args)

            threading.Thread(target=later, daemon=True).start()

        w._pool.submit = submit  # type: ignore[method-assign]

    def let_go(self) -> None:
        self.gate.set()
        time.sleep(0.3)  # time for a handler that would (wrongly) start


def unstarted_worker(rdb, lease: float, grace: float):
    q = rdb.queue("work")
    job_id = q.enqueue({"i": 0}).id
    w = honker.Worker(rdb, concurrency=1, grace=grace)
    ran: list[int] = []
    events: list[str] = []
    w.register("work", lambda job: ran.append(job.id), lease=lease)
    for kind in honker.worker.KINDS:
        w.on(kind, lambda e: events.append(e.kind))
    held = HeldThreads(w)
    runner = threading.Thread(target=w.run, kwargs={"signals": False}, daemon=True)
    runner.start()
    wait_until(lambda: held.calls)
    return q, job_id, w, runner, held, ran, events


def test_a_task_whose_lease_was_lost_before_its_handler_started_never_starts(rdb):
    """The CI flake of the interop sigstop play: run() returned while the
    handler thread had not yet started, so the lost lease was reported (and
    the handler started) after it. Now run() finishes such a task itself
    before it returns, and the thread that gets to it later does nothing."""
    q, job_id, w, runner, held, ran, events = unstarted_worker(rdb, lease=0.3, grace=5)
    # Another process took the job (this one's lease lapsed while it could
    # not renew); the worker's next renewal finds it lost.
    rdb.execute(
        "UPDATE _honker_jobs SET lease_token = 'theirs', worker_id = 'rescuer',"
        " attempts = attempts + 1"
    )
    job = held.calls[0][3]
    wait_until(lambda: job.cancelled)
    w.stop()
    runner.join(10)
    assert not runner.is_alive()
    assert events == ["lease_lost"], "reported before run() returned, no start"
    held.let_go()
    assert ran == [] and events == ["lease_lost"], "the handler never ran"
    info = q.get_job(job_id)
    assert (info.state, info.attempts) == ("running", 2), "the rescuer's job is untouched"


def test_a_sync_handler_released_at_shutdown_is_told_once_before_run_returns(rdb, caplog):
    """Issue 53 §17: a plain ``def`` handler still running when the grace
    period ended had its job released, but its ``released`` hook and log
    line never came (async handlers had them): the handler returned after
    run() had. Now they come when the drain releases the job, and not again
    when the handler returns."""
    q = rdb.queue("q")
    job_id = q.enqueue("long").id
    w = honker.Worker(rdb, grace=0.2)
    events: list[tuple[str, int]] = []
    for kind in ("start", "released", "success", "settled"):
        w.on(kind, lambda e: events.append((e.kind, e.job_id)))
    let_go = threading.Event()

    @w.task("q")
    def handle(job):
        let_go.wait(30)

    runner = threading.Thread(target=lambda: w.run(signals=False))
    with caplog.at_level("INFO", logger="honker.worker"):
        runner.start()
        wait_until(lambda: ("start", job_id) in events)
        w.stop()
        runner.join(10)
        assert not runner.is_alive()
        assert events == [("start", job_id), ("released", job_id)], events
        assert any(f"released job {job_id}" in r.getMessage() for r in caplog.records)
        info = q.get_job(job_id)
        assert (info.state, info.attempts) == ("ready", 0), "released, attempt given back"
        let_go.set()
        time.sleep(0.3)  # the handler returns now: nothing more is told
    assert events == [("start", job_id), ("released", job_id)], events


def test_a_task_released_by_the_drain_before_its_handler_started_never_starts(rdb):
    q, job_id, w, runner, held, ran, events = unstarted_worker(rdb, lease=30, grace=0.2)
    w.stop()
    runner.join(10)
    assert not runner.is_alive()
    assert events == ["released"]
    held.let_go()
    assert ran == [] and events == ["released"], "the handler never ran"
    info = q.get_job(job_id)
    assert (info.state, info.attempts) == ("ready", 0), "released, attempt given back"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_sigterm_taken_by_another_thread_still_stops_run_at_once(rdb, kind):
    """The kernel hands a process's signal to any thread that does not block
    it (honker's, a handler's); CPython runs the handler on the main thread
    only. run() must wake for it, not when its wait times out (a CI run's
    worker ignored SIGTERM that way until killed)."""
    q = rdb.queue("q")
    long, short = q.enqueue({"sleep": 60}).id, q.enqueue({"sleep": 0.2}).id
    w = honker.Worker(rdb, concurrency=2, grace=0.5)
    started: list[int] = []

    if kind == "sync":

        @w.task(q)
        def handle(job):
            started.append(job.id)
            end = time.monotonic() + job.payload["sleep"]
            while time.monotonic() < end and not job.cancelled:
                time.sleep(0.005)

    else:

        @w.task(q)
        async def handle(job):
            started.append(job.id)
            await asyncio.sleep(job.payload["sleep"])

    sent: list[float] = []

    def signal_from_this_thread() -> None:
        wait_until(lambda: len(started) == 2)
        sent.append(time.monotonic())
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        time.sleep(10)
        w.stop()  # only if the signal was never handled

    threading.Thread(target=signal_from_this_thread, daemon=True).start()
    w.run()
    took = time.monotonic() - sent[0]
    assert took < 0.5 + 2, f"run() returned {took:.1f} s after SIGTERM"
    info = q.get_job(long)
    assert (info.state, info.attempts) == ("ready", 0), "released, attempt given back"
    with pytest.raises(honker.NotFound):
        q.get_job(short)  # acked within the grace
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_async_completions_go_off_the_loop_while_another_thread_holds_the_writer(rdb):
    """An uncontended completion is recorded on the loop (core's
    try_complete); one that would wait for the writer goes to a thread, so
    the loop keeps ticking and every job is still acked once."""
    q = rdb.queue("q")
    q.enqueue_many(list(range(20)))
    w = honker.Worker(rdb, concurrency=4)
    held, release = threading.Event(), threading.Event()
    done: list[int] = []

    def hold() -> None:
        with rdb.transaction():  # BEGIN IMMEDIATE: the writer is held
            held.set()
            release.wait(10)

    @w.task(q)
    async def handle(job):
        if job.payload == 5:
            threading.Thread(target=hold, daemon=True).start()
            await asyncio.to_thread(held.wait, 10)
        done.append(job.payload)
        if len(done) == 20:
            w.stop()

    async def main() -> float:
        gaps: list[float] = []

        async def tick() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticker = asyncio.ensure_future(tick())
        running = asyncio.ensure_future(w.run_async())
        await asyncio.to_thread(held.wait, 30)
        await asyncio.sleep(1)  # completions meanwhile wait on threads
        assert len(done) < 20, "nothing could commit while the writer was held"
        release.set()
        await asyncio.wait_for(running, 60)
        ticker.cancel()
        return max(gaps)

    worst = asyncio.run(main())
    assert worst < 0.25, f"the loop stalled for {worst * 1000:.1f} ms"
    assert sorted(done) == list(range(20))
    s = q.stats()
    assert (s.ready, s.scheduled, s.running, s.dead) == (0, 0, 0, 0)


def test_run_returns_after_the_hooks_of_the_outcomes_it_recorded(path):
    # The outcome is in the file before the handler's thread tells its
    # hook: run() must not return in between (seen with a group's last
    # `success` on a loaded machine).
    db = honker.open(path)
    q = db.queue("q")
    q.enqueue("x")
    w = honker.Worker(db, concurrency=1)
    told = []

    @w.task("q")
    def handle(job: honker.Job) -> None:
        return None

    def slow_hook(e: honker.WorkerEvent) -> None:
        time.sleep(0.3)
        told.append(e.kind)

    w.on("success", slow_hook)
    stop_when(w, lambda: q.stats().ready == 0 and q.stats().running == 0)
    w.run(signals=False)
    assert told == ["success"]
