"""Shared fixtures: a fresh file per test, on a clock the test moves."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import honker
import pytest


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "app.db"


@pytest.fixture
def clock() -> honker.ManualClock:
    return honker.ManualClock(now=1_700_000_000)


@pytest.fixture
def db(path: Path, clock: honker.ManualClock):
    database = honker.open(path, clock=clock)
    database.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, status TEXT)")
    yield database
    database.close()


@pytest.fixture(params=["loop", "threads"])
def async_waits(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs an asyncio test both ways a reader (a claim stream, a
    subscription, a listener, a group consumer) waits: in the loop's
    selector, and on honker's threads, as where the loop has no
    ``add_reader`` (Windows' proactor)."""
    if request.param == "threads":
        monkeypatch.setattr(honker._loopwait, "waits", lambda db: None)
    return str(request.param)


def snapshot(db: honker.Database) -> list:
    """Everything honker stores, to prove a failed call changed nothing."""
    return [
        db.query(f"SELECT * FROM {t} ORDER BY 1")
        for t in ("_honker_jobs", "_honker_finished", "_honker_results")
    ]


def integrity_ok(path: Path) -> bool:
    # A separate process would be safer in general; a read-only check after
    # every honker handle in this test is closed is what callers do.
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def honker_worker(path: Path, queue: str) -> str:
    """Runs a honker worker in another process: claims one job of ``queue``
    on ``path`` with ``honker.open``, acks it and prints its payload's ``to``
    field; returns what it printed."""
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import honker, sys\n"
            "db = honker.open(sys.argv[1])\n"
            "[job] = db.queue(sys.argv[2]).claim_batch('mailer', 10)\n"
            "print(job.payload['to'])\n"
            "job.ack()\n"
            "db.close()\n",
            str(path),
            queue,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class HonkerListener:
    """A honker listener in another process (``honker.open`` there): it
    listens on ``channel`` before the constructor returns, then prints the
    payload (JSON) of the first notification it hears."""

    def __init__(self, path: Path, channel: str) -> None:
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import honker, json, sys\n"
                "db = honker.open(sys.argv[1])\n"
                "listener = db.listen(sys.argv[2], wait=30)\n"
                "print('ready', flush=True)\n"
                "print(json.dumps(next(listener).payload), flush=True)\n",
                str(path),
                channel,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def heard(self) -> object:
        import json

        out, _ = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0
        return json.loads(out)


def stop_when(worker: honker.Worker, cond) -> threading.Thread:
    """Stops ``worker`` once ``cond()`` holds (checked every 10 ms)."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while not cond() and time.monotonic() < deadline:
            time.sleep(0.01)
        worker.stop()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def async_waiters_woken_by(
    path: Path, commit: Callable[[], None], queue: str, stream: str, channel: str
) -> dict:
    """An asyncio consumer of ``queue``, subscriber of ``stream`` and
    listener of ``channel`` in this process, asleep on the loop, then
    ``commit`` on another thread (a request committing through the app's
    ORM): what each got. Each must wake at the commit (within 5 s), not at a
    re-check, which comes every 50 s here."""
    db = honker.open(path, watch_fallback=5)

    async def main() -> dict:
        got: dict = {}

        async def consume() -> None:
            async for job in db.queue(queue).claim("worker", wait=30):
                got["job"] = job.payload
                job.ack()
                return

        async def subscribe() -> None:
            async for e in db.stream(stream).subscribe("projector", wait=30):
                got["event"] = e.payload
                return

        async def listen() -> None:
            async for n in db.listen(channel, wait=30):
                got["notification"] = n.payload
                return

        waiting = [asyncio.ensure_future(f()) for f in (consume, subscribe, listen)]
        await asyncio.sleep(0.5)  # all three asleep on the loop
        started = time.monotonic()
        await asyncio.get_running_loop().run_in_executor(None, commit)
        await asyncio.wait_for(asyncio.gather(*waiting), 20)
        assert time.monotonic() - started < 5, "woken by the commit, not a re-check"
        return got

    try:
        return asyncio.run(main())
    finally:
        db.close()
