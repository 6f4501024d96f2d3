"""The scheduler from Python: idempotent registration, fires that carry
their boundary, the schedule's own time zone across DST, catch-up after
downtime, update/sync/pause/resume/trigger/remove, typed errors that change
nothing, and run()/run_async() on the real clock (many threads and tasks
running it: each boundary once)."""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import honker
import pytest

UTC = dt.timezone.utc
# 2027-01-04T00:00:00Z, a Monday; the fixture's clock starts in 2023.
T0 = 1_799_020_800


def at(clock: honker.ManualClock, t: float) -> None:
    clock.advance(t - clock.now())


def test_add_is_idempotent_and_fires_carry_the_boundary(
    db: honker.Database, clock: honker.ManualClock
) -> None:
    at(clock, T0 + 10)
    s = db.scheduler()
    assert s.add("report", "*/15 * * * *", "reports", {"kind": "report"})
    assert not s.add("report", "*/15 * * * *", "reports", {"kind": "report"})
    info = s.get("report")
    assert info is not None
    assert info.next_fire_at == dt.datetime.fromtimestamp(T0 + 900, UTC)
    assert info.time_zone == "UTC" and info.catch_up == "latest" and info.overlap == "allow"
    assert s.next_fires("report", 3) == [
        dt.datetime.fromtimestamp(T0 + k * 900, UTC) for k in (1, 2, 3)
    ]
    assert s.tick() == []
    at(clock, T0 + 900 + 20)
    fires = s.tick()
    assert [(f.schedule, f.fire_at) for f in fires] == [
        ("report", dt.datetime.fromtimestamp(T0 + 900, UTC))
    ]
    [job] = db.queue("reports").claim_batch("w", 1)
    assert job.payload == {"kind": "report"}
    assert job.run_at == dt.datetime.fromtimestamp(T0 + 900, UTC)
    assert fires[0].job_id == job.id
    assert s.tick() == []
    info = s.get("report")
    assert info is not None and (info.fires, info.missed) == (1, 0)


def test_the_schedules_zone_across_spring_forward(
    db: honker.Database, clock: honker.ManualClock
) -> None:
    # Berlin, 2027-03-28: 02:00 CET jumps to 03:00 CEST (01:00Z). A daily
    # 02:30 fires once, right after the jump; an hourly one 23 times.
    start = dt.datetime(2027, 3, 27, 23, 0, tzinfo=UTC).timestamp()
    at(clock, start - 1)
    s = db.scheduler()
    s.add("daily", "30 2 * * *", "q", "d", time_zone="Europe/Berlin")
    s.add("hourly", "0 * * * *", "q", "h", time_zone="europe/berlin")
    assert s.get("hourly").time_zone == "Europe/Berlin"  # type: ignore[union-attr]
    t = start - 1
    while t + 60 < start + 23 * 3600:  # the local day: 23 hours
        t += 60
        at(clock, t)
        s.tick()
    daily = s.get("daily")
    hourly = s.get("hourly")
    assert daily is not None and hourly is not None
    assert daily.fires == 1
    assert daily.last_fire_at == dt.datetime(2027, 3, 28, 1, 0, tzinfo=UTC)
    assert hourly.fires == 23


def test_catch_up_after_three_days_down(db: honker.Database, clock: honker.ManualClock) -> None:
    at(clock, T0)
    s = db.scheduler()
    s.add("skip", "*/15 * * * *", "q", catch_up="skip")
    s.add("latest", "*/15 * * * *", "q")
    s.add("all", "*/15 * * * *", "q", catch_up="all", catch_up_window=1800)
    at(clock, T0 + 3 * 86400 + 7 * 60)
    fires = s.tick()
    by = {n: [f.fire_at for f in fires if f.schedule == n] for n in ("skip", "latest", "all")}
    last = dt.datetime.fromtimestamp(T0 + 3 * 86400, UTC)
    assert by["skip"] == []
    assert by["latest"] == [last]
    assert by["all"] == [last - dt.timedelta(minutes=15), last]
    missed = {i.name: i.missed for i in s.list()}
    assert missed == {"all": 286, "latest": 287, "skip": 288}


def test_update_sync_pause_resume_trigger_remove(
    db: honker.Database, clock: honker.ManualClock
) -> None:
    at(clock, T0)
    s = db.scheduler()
    s.add("a", "@every 1m", "q", max_attempts=7, expires=30)
    assert s.update("a", priority=5, expires=None)
    info = s.get("a")
    assert info is not None
    assert (info.priority, info.max_attempts, info.expires) == (5, 7, None)
    assert not s.update("a", priority=5)
    assert s.update("a", schedule="@every 2m")
    assert s.get("a").next_fire_at == dt.datetime.fromtimestamp(T0 + 120, UTC)  # type: ignore[union-attr]
    with pytest.raises(honker.NotFound):
        s.update("nope", priority=1)
    with pytest.raises(TypeError):
        s.update("a", colour="red")
    s.pause("a", "deploying")
    info = s.get("a")
    assert info is not None and info.paused and info.note == "deploying"
    at(clock, T0 + 3600)
    assert s.tick() == []
    s.resume("a")
    assert s.get("a").missed == 0  # type: ignore[union-attr]
    job_id = s.trigger_now("a")
    assert db.queue("q").get_job(job_id).state == "ready"
    report = s.sync(
        [
            honker.Schedule("a", "@every 2m", "q", max_attempts=7, priority=5),
            honker.Schedule("b", "0 9 * * MON", "q", time_zone="America/New_York"),
        ]
    )
    assert (report.added, report.removed) == (["b"], [])
    report = s.sync([honker.Schedule("b", "0 9 * * MON", "q", time_zone="America/New_York")])
    assert report == honker.SyncReport(added=[], changed=[], removed=["a"])
    assert [i.name for i in s.list()] == ["b"]
    assert s.remove("b") and not s.remove("b")
    for call in (lambda: s.pause("x"), lambda: s.resume("x"), lambda: s.trigger_now("x")):
        with pytest.raises(honker.NotFound):
            call()


def test_bad_input_is_invalid_argument_and_changes_nothing(
    db: honker.Database, clock: honker.ManualClock
) -> None:
    at(clock, T0)
    s = db.scheduler()
    s.add("ok", "* * * * *", "q")
    before = s.list()
    for kwargs, needle in [
        ({"schedule": "61 * * * *"}, "field 1 (minute)"),
        ({"schedule": "* * *"}, "3 fields"),
        ({"schedule": "@every 0s"}, "@every"),
        ({"time_zone": "Mars/Olympus"}, "unknown time zone"),
        ({"catch_up": "sometimes"}, "catch_up"),
        ({"overlap": "maybe"}, "overlap"),
        ({"day_rule": "xor"}, "day_rule"),
        ({"catch_up_max": 0}, "catch_up_max"),
        ({"catch_up_window": 0}, "catch_up_window"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"jitter": -1}, "jitter"),
        ({"expires": float("nan")}, "expires"),
        ({"start_at": T0 + 10, "end_at": T0}, "end_at"),
    ]:
        args = {"schedule": "* * * * *", **kwargs}
        with pytest.raises(
            honker.InvalidArgument, match=needle.replace("(", r"\(").replace(")", r"\)")
        ):
            s.add("x", args.pop("schedule"), "q", **args)
    with pytest.raises(honker.InvalidArgument):
        s.add("", "* * * * *", "q")
    with pytest.raises(honker.InvalidArgument):
        s.add("x", "* * * * *", "q", jitter="soon")  # type: ignore[arg-type]
    assert s.list() == before


def test_many_threads_registering_and_running_fire_each_boundary_once(path: Path) -> None:
    """Eight "requests" register the same schedule at once while four
    threads run the scheduler (as four workers would) on the real clock."""
    db = honker.open(path)
    try:
        barrier = threading.Barrier(8)

        def register() -> None:
            barrier.wait()
            db.scheduler().add("beat", "@every 1s", "beats", {"n": 1})

        threads = [threading.Thread(target=register) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(db.scheduler().list()) == 1
        stop = threading.Event()
        runners = [threading.Thread(target=db.scheduler().run, args=(stop,)) for _ in range(4)]
        for r in runners:
            r.start()
        time.sleep(3.5)
        stop.set()
        started = time.monotonic()
        for r in runners:
            r.join(5)
            assert not r.is_alive()
        assert time.monotonic() - started < 2, "run() ends promptly once stopped"
        rows = db.query("SELECT run_at FROM _honker_jobs WHERE queue = 'beats' ORDER BY run_at")
        run_ats = [r[0] for r in rows]
        assert 2 <= len(run_ats) <= 5, run_ats
        assert len(set(run_ats)) == len(run_ats), "no boundary twice"
        assert all(b - a == 1000 for a, b in zip(run_ats, run_ats[1:])), run_ats
    finally:
        db.close()


def test_run_async_stops_when_cancelled(path: Path) -> None:
    async def main() -> int:
        db = honker.open(path)
        try:
            db.scheduler().add("beat", "@every 1s", "beats")
            task = asyncio.create_task(db.scheduler().run_async())
            await asyncio.sleep(2.2)
            task.cancel()
            started = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - started < 2
            return db.queue("beats").stats().ready
        finally:
            db.close()

    assert asyncio.run(main()) >= 1


def test_honker_sql_schedules_keep_honkers_day_rule(
    db: honker.Database, clock: honker.ManualClock
) -> None:
    at(clock, T0)
    with db.transaction() as tx:
        tx.query(
            "SELECT honker_scheduler_register('f13', 'luck', '0 9 13 * 5', '\"boo\"', 0, NULL)"
        )
    info = db.scheduler().get("f13")
    assert info is not None and info.day_rule == "and"
    zone = info.time_zone
    from zoneinfo import ZoneInfo

    for t in db.scheduler().next_fires("f13", 4):
        local = t.astimezone(ZoneInfo(zone))
        assert (local.day, local.weekday(), local.hour) == (13, 4, 9)


def test_a_worker_runs_the_scheduler_by_default(path: Path) -> None:
    """Every worker process fires schedules (each boundary once); with
    ``scheduler=False`` it does not."""
    from conftest import stop_when

    db = honker.open(path)
    try:
        db.scheduler().add("beat", "@every 1s", "beats", {"beat": True})
        quiet = honker.Worker(db, scheduler=False)
        seen: list[dt.datetime] = []
        quiet.register("beats", lambda job: seen.append(job.run_at))
        stop = threading.Timer(2.2, quiet.stop)
        stop.start()
        quiet.run(signals=False)
        assert seen == [] and db.scheduler().get("beat").fires == 0  # type: ignore[union-attr]
        w = honker.Worker(db)
        w.register("beats", lambda job: seen.append(job.run_at))
        stop_when(w, lambda: len(seen) >= 2)
        w.run(signals=False)
        assert len(seen) >= 2 and all(t.microsecond == 0 for t in seen), seen
        with pytest.raises(honker.InvalidArgument):
            honker.Worker(db, scheduler="yes")  # type: ignore[arg-type]
    finally:
        db.close()


@pytest.mark.parametrize(
    ("sig", "signals", "code"),
    [(signal.SIGTERM, True, 0), (signal.SIGINT, True, 0), (signal.SIGTERM, False, 3)],
)
def test_run_on_the_main_thread_ends_at_once_on_a_signal(
    path: Path, sig: int, signals: bool, code: int
) -> None:
    """Issue 53 §16: on the main thread, run() ignored Ctrl-C and SIGTERM for
    as long as its native wait lasted (up to an hour: here the only schedule
    is hourly, so the loop sleeps until the next hour). With ``signals`` it
    stops and returns; without, the program's own handler runs at once."""
    script = textwrap.dedent(
        """
        import signal, sys, honker
        db = honker.open(sys.argv[1])
        db.scheduler().add("hourly", "0 * * * *", "q")
        if sys.argv[2] == "0":
            def bye(*_):
                raise SystemExit(3)
            signal.signal(signal.SIGTERM, bye)
        print("ready", flush=True)
        db.scheduler().run(signals=sys.argv[2] == "1")
        print("returned", flush=True)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(path), "1" if signals else "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # inside the loop's native wait
        sent = time.monotonic()
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == code
        took = time.monotonic() - sent
        assert took < 3, f"ended {took:.1f} s after the signal"
        assert (proc.stdout.read().strip() == "returned") == signals
    finally:
        proc.kill()
        proc.wait()
