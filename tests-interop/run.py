"""tests-interop runner: plays every scenario (scenarios/*.json) with its roles
given to different surfaces — Rust, Python, Node, and SQL through the stdlib
sqlite3 module with the extension — each a separate process on one file.

    python tests-interop/run.py [--only NAME,...] [--keep DIR] [--repeat N]

--keep DIR copies the file of every passing play of a steps scenario into
DIR as SCENARIO--ROLE=SURFACE,....db, with the time of the copy in ms in
….db.now (the `honker` command's snapshot tests, cli/tests/interop_files.rs,
read them). --repeat N plays the chosen scenarios N times, each time in
new files: tests-interop/load.sh runs the worker plays so, under load.

Needs: HONKER_VENV (a venv with the Python binding), HONKER_EXT (the built
extension), the Rust driver built (target/debug/honker-interop-driver) and
the Node addon built (`npm run build` in bindings-node puts it in
target/node/). scripts/test.sh provides
all of them. Prints one line per play and a closing "interop: N passed,
M failed" line; exits non-zero on any failure.

Matrix: a two-role scenario runs for every ordered pair of surfaces (the
same surface twice included, as two processes); a three-role scenario runs
its `always` assignments (Python enqueues, Node claims, Rust acks) plus the
cyclic rotations that put every surface in every role; a one-role scenario
runs on every surface. A play a surface cannot express (SQL cannot set a
per-job backoff) is reported as skipped, not passed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SURFACES = ["python", "node", "rust", "sql"]
STEP_TIMEOUT = 60.0  # seconds; a step normally takes milliseconds
# The Swift surface runs in the Debian 13 chroot (scripts/swift-test.sh
# builds its driver there); HONKER_SWIFT_ROOT names the chroot.
SWIFT_ROOT = os.environ.get("HONKER_SWIFT_ROOT")
if SWIFT_ROOT:
    SURFACES.append("swift")


def command(surface: str) -> list[str]:
    venv = os.environ["HONKER_VENV"]
    return {
        "python": [f"{venv}/bin/python", str(HERE / "drivers/driver.py")],
        "node": ["node", str(HERE / "drivers/driver.mjs")],
        "rust": [str(ROOT / "target/debug/honker-interop-driver")],
        "sql": ["/usr/bin/python3", str(HERE / "drivers/sql_driver.py")],
        "swift": [
            *([] if os.getuid() == 0 else ["sudo"]),
            "chroot",
            str(SWIFT_ROOT),
            "/usr/bin/env",
            "-i",
            "HOME=/root",
            "PATH=/usr/bin:/bin",
            "/work/honker-swift/.build/debug/HonkerInteropDriver",
        ],
    }[surface]


def inside(surface: str, path: str) -> str:
    """A host path as the surface sees it (the chroot's files are under its root)."""
    if surface == "swift" and SWIFT_ROOT and path.startswith(SWIFT_ROOT):
        return path[len(SWIFT_ROOT) :]
    return path


class Driver:
    """One driver process: a JSON step per line in, a JSON answer per line out."""

    def __init__(self, surface: str) -> None:
        self.surface = surface
        self.proc = subprocess.Popen(
            command(surface),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def send(self, step: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if "path" in step:
            step = {**step, "path": inside(self.surface, step["path"])}
        self.proc.stdin.write(json.dumps(step) + "\n")
        self.proc.stdin.flush()
        return self.receive(step.get("op", "?"))

    def receive(self, what: str, timeout: float = STEP_TIMEOUT) -> dict:
        """The next answer; a driver that hangs fails the play instead of CI."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.proc.kill()
            raise Failure(
                f"{self.surface} driver gave no answer to {what} in {timeout:.0f} s"
            )
        line = self.proc.stdout.readline()
        if not line:
            raise Failure(f"{self.surface} driver died (exit {self.proc.poll()})")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def lookup(vars_: dict, ref: str):
    name, *path = ref[1:].split(".")
    value = vars_[name]
    for p in path:
        value = value[int(p)] if isinstance(value, list) else value[p]
    return value


def resolve(value, vars_: dict):
    if isinstance(value, str) and value.startswith("$"):
        return lookup(vars_, value)
    if isinstance(value, dict):
        return {k: resolve(v, vars_) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, vars_) for v in value]
    return value


def at(value, path: str):
    for p in path.split("."):
        value = value[int(p)] if isinstance(value, list) else value[p]
    return value


def check(expect: dict, reply: dict, where: str) -> None:
    if "error" in expect:
        if reply.get("error") != expect["error"]:
            raise Failure(f"{where}: expected error {expect['error']}, got {reply}")
        return
    if "ok" not in reply:
        raise Failure(f"{where}: expected success, got {reply}")
    got = reply["ok"]
    if "len" in expect and len(got) != expect["len"]:
        raise Failure(f"{where}: expected {expect['len']} items, got {got}")
    if "equals" in expect and got != expect["equals"]:
        raise Failure(f"{where}: expected {expect['equals']!r}, got {got!r}")
    if "equals_path" in expect:
        path, want = expect["equals_path"]
        if not got or at(got, path) != want:
            raise Failure(f"{where}: expected {path} = {want!r}, got {got!r}")
    if "field" in expect:
        name, want = expect["field"]
        if [item.get(name) for item in got] != want:
            raise Failure(
                f"{where}: expected each item's {name} to be {want!r}, got {got!r}"
            )
    if "match" in expect:
        for k, v in expect["match"].items():
            if got.get(k) != v:
                raise Failure(f"{where}: expected {k} = {v!r}, got {got!r}")
    if "run_at_from_now_ms" in expect:
        lo, hi = expect["run_at_from_now_ms"]
        delta = got["run_at_ms"] - got["now_ms"]
        if not lo <= delta <= hi:
            raise Failure(
                f"{where}: run_at is {delta} ms from now, expected {lo}..{hi}"
            )


class Pool:
    """Driver processes by (surface, role), reused across plays."""

    def __init__(self) -> None:
        self.drivers: dict[tuple[str, str], Driver] = {}

    def get(self, surface: str, role: str) -> Driver:
        key = (surface, role)
        if key not in self.drivers or self.drivers[key].proc.poll() is not None:
            self.drivers[key] = Driver(surface)
        return self.drivers[key]

    def close(self) -> None:
        for d in self.drivers.values():
            d.close()


def play(pool: Pool, scenario: dict, assignment: dict[str, str], path: str) -> None:
    drivers = {role: pool.get(surface, role) for role, surface in assignment.items()}
    for role, d in drivers.items():
        check({}, d.send({"op": "open", "path": path}), f"open ({role})")
    vars_: dict = {}
    try:
        for i, step in enumerate(scenario["steps"]):
            role = step["role"]
            args = {
                k: v for k, v in step.items() if k not in ("role", "expect", "save")
            }
            reply = drivers[role].send(resolve(args, vars_))
            if "unsupported" in reply:
                raise Skip(
                    f"{assignment[role]} cannot {step['op']} with {sorted(args)}"
                )
            check(
                resolve(step.get("expect", {}), vars_),
                reply,
                f"step {i} ({role} {step['op']})",
            )
            if "save" in step:
                vars_[step["save"]] = reply["ok"]
    finally:
        for d in drivers.values():
            d.send({"op": "rollback"})
            d.send({"op": "close"})


def keep(path: str, keep_dir: str, scenario: dict, assignment: dict[str, str]) -> None:
    """A consistent copy of a play's file (SQLite's backup API), named by
    its scenario and who played which role, and beside it (`.now`) the
    moment it was taken in ms, at which its views are compared (a lease or a
    lock that lapses a minute after the play is seen as it was)."""
    slug = ",".join(f"{r}={s}" for r, s in assignment.items())
    copy = f"{keep_dir}/{scenario['name']}--{slug}.db"
    src = sqlite3.connect(path)
    dst = sqlite3.connect(copy)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()
    Path(f"{copy}.now").write_text(str(int(time.time() * 1000)))


def assignments(scenario: dict) -> list[dict[str, str]]:
    roles = scenario["roles"]
    if len(roles) == 1:
        return [{roles[0]: s} for s in SURFACES]
    if len(roles) == 2:
        return [
            dict(zip(roles, pair)) for pair in itertools.product(SURFACES, repeat=2)
        ]
    # An `always` play that names a surface not here (Swift without its
    # chroot) is left out; the rotations still give every role to each.
    out = [a for a in scenario.get("always", []) if set(a.values()) <= set(SURFACES)]
    for shift in range(len(SURFACES)):
        rotated = SURFACES[shift:] + SURFACES[:shift]
        play = dict(zip(roles, rotated))
        if play not in out:
            out.append(play)
    return out


def integrity_ok(path: str) -> bool:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def fill(path: str, n: int, queue: str) -> None:
    rust = Driver("rust")
    try:
        check({}, rust.send({"op": "open", "path": path}), "open")
        for start in range(0, n, 500):
            rust.send({"op": "begin"})
            for i in range(start, min(n, start + 500)):
                check(
                    {},
                    rust.send(
                        {
                            "op": "enqueue",
                            "queue": queue,
                            "payload": {"i": i},
                            "in_tx": True,
                        }
                    ),
                    "fill",
                )
            rust.send({"op": "commit"})
        rust.send({"op": "close"})
    finally:
        rust.close()


def run_rate(scenario: dict, tmp: str) -> None:
    """Processes of several surfaces check one rate limit on one key as fast
    as they can: together they are granted no more than GCRA allows over the
    whole run (`burst` + one per interval), and close to it (the limit, not
    their speed, bound them)."""
    path = f"{tmp}/rate.db"
    limit, per_ms, burst = scenario["limit"], scenario["per_ms"], scenario["burst"]
    setup = Driver("rust")
    check({}, setup.send({"op": "open", "path": path}), "open")
    step = {
        "op": "rate_limit_set",
        "name": "shared",
        "limit": limit,
        "per_ms": per_ms,
        "burst": burst,
    }
    check({}, setup.send(step), "rate_limit_set")
    setup.send({"op": "close"})
    setup.close()
    hammers = [Driver(s) for s, k in scenario["processes"].items() for _ in range(k)]
    try:
        for h in hammers:
            check({}, h.send({"op": "open", "path": path}), "open")
        started = time.monotonic()
        for h in hammers:
            assert h.proc.stdin is not None
            h.proc.stdin.write(
                json.dumps(
                    {
                        "op": "rate_limit_hammer",
                        "name": "shared",
                        "key": "k",
                        "for_ms": scenario["for_ms"],
                    }
                )
                + "\n"
            )
            h.proc.stdin.flush()
        results = []
        for h in hammers:
            reply = h.receive("rate_limit_hammer", timeout=120)
            check({}, reply, f"rate_limit_hammer ({h.surface})")
            results.append((h.surface, reply["ok"]))
        elapsed_ms = (time.monotonic() - started) * 1000
    finally:
        for h in hammers:
            h.close()
    granted = sum(r["granted"] for _, r in results)
    calls = sum(r["calls"] for _, r in results)
    interval = per_ms / limit
    bound = burst + int(elapsed_ms // interval) + 1
    by_surface = {
        s: sum(r["granted"] for t, r in results if t == s) for s, _ in results
    }
    if granted > bound:
        raise Failure(
            f"{granted} grants in {elapsed_ms:.0f} ms; GCRA allows at most {bound}"
        )
    if granted < 0.5 * scenario["for_ms"] / interval:
        raise Failure(
            f"only {granted} grants of {calls} calls in {elapsed_ms:.0f} ms: the limit did not bind"
        )
    if not all(by_surface.values()):
        raise Failure(f"a surface was never granted a call: {by_surface}")


def run_drain(scenario: dict, tmp: str) -> None:
    path = f"{tmp}/drain.db"
    n = scenario["jobs"]
    fill(path, n, "work")
    setup = Driver("rust")
    check({}, setup.send({"op": "open", "path": path}), "open")
    check(
        {},
        setup.send(
            {
                "op": "exec",
                "sql": "CREATE TABLE done (job_id INTEGER PRIMARY KEY, surface TEXT)",
            }
        ),
        "table",
    )
    setup.send({"op": "close"})
    setup.close()
    workers = [Driver(s) for s, k in scenario["workers"].items() for _ in range(k)]
    try:
        for i, w in enumerate(workers):
            check({}, w.send({"op": "open", "path": path}), "open")
            assert w.proc.stdin is not None
            w.proc.stdin.write(
                json.dumps(
                    {
                        "op": "drain",
                        "queue": "work",
                        "worker": f"{w.surface}-{i}",
                        "table": "done",
                    }
                )
                + "\n"
            )
            w.proc.stdin.flush()
        results = []
        for w in workers:
            reply = w.receive("drain", timeout=600)
            check({}, reply, f"drain ({w.surface})")
            results.append((w.surface, reply["ok"]))
        errors = [e for _, r in results for e in r["errors"]]
        if errors:
            raise Failure(
                f"errors surfaced while draining: {errors[:5]} ({len(errors)} in all)"
            )
        total = sum(r["done"] for _, r in results)
        conn = sqlite3.connect(path)
        rows, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT job_id) FROM done"
        ).fetchone()
        by_surface = dict(
            conn.execute(
                "SELECT surface, count(*) FROM done GROUP BY surface"
            ).fetchall()
        )
        left = conn.execute("SELECT count(*) FROM _honker_jobs").fetchone()[0]
        conn.close()
        if (total, rows, distinct, left) != (n, n, n, 0):
            raise Failure(
                f"processed {total}, rows {rows}, distinct {distinct}, left {left}; expected {n}"
            )
        if set(by_surface) != set(scenario["workers"]):
            raise Failure(f"not every surface took part: {by_surface}")
        if not integrity_ok(path):
            raise Failure("integrity_check failed")
        print(f"        per surface: {by_surface}")
    finally:
        for w in workers:
            w.close()


def run_crash(scenario: dict, tmp: str) -> None:
    path = f"{tmp}/crash.db"
    n, lease = scenario["jobs"], scenario["lease_ms"]
    fill(path, n, "work")
    victim = Driver(scenario["victim"])
    check({}, victim.send({"op": "open", "path": path}), "open")
    claimed = victim.send(
        {"op": "claim", "queue": "work", "worker": "victim", "n": n, "lease_ms": lease}
    )
    check({"len": n}, claimed, "victim claim")
    os.kill(victim.proc.pid, signal.SIGKILL)  # holding every lease
    victim.proc.wait()
    rescuer = Driver(scenario["rescuer"])
    try:
        check({}, rescuer.send({"op": "open", "path": path}), "open")
        early = rescuer.send(
            {"op": "claim", "queue": "work", "worker": "rescuer", "n": n}
        )
        check({"len": 0}, early, "claim before the lease lapses")
        got: list = []
        deadline = time.monotonic() + lease / 1000 + 10
        while len(got) < n and time.monotonic() < deadline:
            r = rescuer.send(
                {
                    "op": "claim",
                    "queue": "work",
                    "worker": "rescuer",
                    "n": n,
                    "wait_ms": 1000,
                }
            )
            check({}, r, "rescuer claim")
            got += r["ok"]
        if sorted(j["id"] for j in got) != sorted(j["id"] for j in claimed["ok"]):
            raise Failure(f"the rescuer got {len(got)} of the {n} jobs")
        if any(j["attempts"] != 2 for j in got):
            raise Failure(f"reclaimed jobs should be on attempt 2: {got}")
        for j in got:
            check(
                {},
                rescuer.send(
                    {"op": "ack", "queue": "work", "id": j["id"], "token": j["token"]}
                ),
                "ack",
            )
        rescuer.send({"op": "close"})
        if not integrity_ok(path):
            raise Failure("integrity_check failed")
    finally:
        rescuer.close()


def kill(surface: str, pid: int, sig: int = signal.SIGKILL) -> None:
    """Signals a driver by its own pid (the Swift one runs as root, under
    sudo and chroot: killing sudo would leave it running)."""
    if surface == "swift" and os.getuid() != 0:
        subprocess.run(["sudo", "kill", f"-{int(sig)}", str(pid)], check=True)
    else:
        os.kill(pid, sig)


def work_file(path: str, n: int) -> sqlite3.Connection:
    """A file with n jobs on queue "work" and the table the `work` op writes,
    and the harness's connection to it. Held open for the whole play: the
    WAL files stay the harness user's, whichever driver (the Swift one runs
    as root) opens the file next."""
    fill(path, n, "work")
    conn = sqlite3.connect(path, timeout=30)
    conn.execute("CREATE TABLE done (job_id INTEGER, attempts INTEGER, worker TEXT)")
    # A row per handler that started (the `work` op's `started`): what a play
    # waits for before it signals the worker. A claim alone is not enough: a
    # job claimed and not yet handed to a handler (under load, the hand-over
    # can lag the claim's commit) is only released at shutdown.
    conn.execute("CREATE TABLE started (job_id INTEGER, attempts INTEGER)")
    conn.commit()
    return conn


def start_work(w: Driver, scenario: dict, **extra) -> None:
    """Sends the `work` op without waiting: its answer comes when it stops."""
    assert w.proc.stdin is not None
    step = {"op": "work", "queue": "work", "worker": w.surface, "table": "done"}
    step |= {k: scenario[k] for k in ("concurrency", "sleep_ms", "lease_ms")}
    w.proc.stdin.write(json.dumps({**step, **extra}) + "\n")
    w.proc.stdin.flush()


def run_sigterm(scenario: dict, tmp: str, surface: str) -> None:
    """SIGTERM to a Worker with a short and a long job running: no claim after
    the signal, the short job acks, the long one is released with its
    attempts unchanged, and the worker returns within the grace period."""
    path = f"{tmp}/sigterm-{surface}.db"
    n, grace = scenario["jobs"], scenario["grace_ms"] / 1000
    conn = work_file(path, n)
    w = Driver(surface)
    try:
        check({}, w.send({"op": "open", "path": path}), "open")
        pid = w.send({"op": "pid"})["ok"]
        start_work(
            w,
            scenario,
            long_ms=scenario["long_ms"],
            grace_ms=scenario["grace_ms"],
            signals=True,
            started="started",
        )
        # Both slots' handlers running: the long job (the first) and the
        # second short one, started after the first short one acked (gone
        # from the queue).
        deadline = time.monotonic() + 30
        busy = (
            "SELECT (SELECT count(*) FROM _honker_jobs) = ?"
            " AND (SELECT count(*) FROM started) = 3"
        )
        while not conn.execute(busy, [n - 1]).fetchone()[0]:
            if time.monotonic() > deadline:
                raise Failure("the worker did not run the long and a second short job")
            time.sleep(0.002)
        kill(surface, pid, signal.SIGTERM)
        sent = time.monotonic()
        check({}, w.receive("work", timeout=grace + 10), "work")
        took = time.monotonic() - sent
        if took > grace + 2:
            raise Failure(
                f"the worker returned {took:.1f} s after SIGTERM (grace {grace} s)"
            )
        jobs = dict(
            conn.execute("SELECT id, attempts FROM _honker_jobs ORDER BY id").fetchall()
        )
        rows = conn.execute(
            "SELECT count(*), count(DISTINCT job_id) FROM done"
        ).fetchone()
        first = min(jobs) if jobs else None
        done = rows[0]
        if rows[0] != rows[1] or done + len(jobs) != n:
            raise Failure(f"{done} done and {len(jobs)} left of {n}")
        if (
            first is None
            or conn.execute(
                "SELECT count(*) FROM done WHERE job_id = ?", [first]
            ).fetchone()[0]
        ):
            raise Failure("the long job is not back in the queue")
        claimed = {i: a for i, a in jobs.items() if a != 0}
        if claimed:
            raise Failure(
                f"jobs left with attempts spent (claimed after SIGTERM, or the long one): {claimed}"
            )
        # The short job running at the signal finished: one more than before it.
        # The short job done before the signal, and the one running at it.
        if done != 2:
            raise Failure(
                f"{done} jobs acked; expected 2 (one before SIGTERM, one running at it)"
            )
        print(
            f"        returned {took:.2f} s after SIGTERM; {done} acked, {len(jobs)} left"
        )
    finally:
        conn.close()
        w.close()


def run_sigstop(scenario: dict, tmp: str, surface: str) -> None:
    """SIGSTOP to a Worker while its handler runs, past the lease: another
    process reclaims the job (attempt 2). Resumed, the worker finds its lease
    lost, tells the handler to stop, and its outcome is refused: the job
    stays the rescuer's, whose ack succeeds."""
    path = f"{tmp}/sigstop-{surface}.db"
    lease = scenario["lease_ms"]
    conn = work_file(path, 1)
    w, rescuer = Driver(surface), Driver("rust")
    try:
        check({}, w.send({"op": "open", "path": path}), "open")
        check({}, rescuer.send({"op": "open", "path": path}), "open")
        pid = w.send({"op": "pid"})["ok"]
        start_work(
            w, scenario, long_ms=scenario["long_ms"], signals=True, started="started"
        )
        # The handler is running (not only the job claimed), so the worker
        # has a lease to lose.
        deadline = time.monotonic() + 30
        running = "SELECT count(*) FROM started"
        while not conn.execute(running).fetchone()[0]:
            if time.monotonic() > deadline:
                raise Failure("the worker did not start the job")
            time.sleep(0.002)
        kill(surface, pid, signal.SIGSTOP)
        try:
            got: list = []
            deadline = time.monotonic() + lease / 1000 + 10
            while not got and time.monotonic() < deadline:
                r = rescuer.send(
                    {
                        "op": "claim",
                        "queue": "work",
                        "worker": "rescuer",
                        "n": 1,
                        "lease_ms": 60_000,
                        "wait_ms": 1000,
                    }
                )
                check({}, r, "rescuer claim")
                got = r["ok"]
        finally:
            kill(surface, pid, signal.SIGCONT)
        if len(got) != 1 or got[0]["attempts"] != 2:
            raise Failure(f"the rescuer should hold the job on attempt 2: {got}")
        # Resumed, then stopped: the drain renews first and finds the lease
        # lost (if the worker's clock did not already), so it waits for no one.
        kill(surface, pid, signal.SIGTERM)
        reply = w.receive("work", timeout=30)
        check({}, reply, "work")
        if reply["ok"].get("lease_lost") != 1:
            raise Failure(f"the worker should report one lost lease: {reply['ok']}")
        [(attempts, worker)] = conn.execute(
            "SELECT attempts, worker_id FROM _honker_jobs"
        ).fetchall()
        if (attempts, worker) != (2, "rescuer"):
            raise Failure(f"the late outcome changed the job: {(attempts, worker)}")
        ran = conn.execute("SELECT count(*) FROM done").fetchone()[0]
        if ran:
            raise Failure("the handler was not told to stop (it finished its run)")
        job = got[0]
        check(
            {},
            rescuer.send(
                {"op": "ack", "queue": "work", "id": job["id"], "token": job["token"]}
            ),
            "the rescuer's ack",
        )
        print("        lease lost and the late outcome refused; the rescuer acked")
    finally:
        conn.close()
        w.close()
        rescuer.close()


def run_cancel_running(scenario: dict, tmp: str, surface: str) -> None:
    """Another surface cancels a job that `surface`'s Worker is running
    (issue 56 §5): the handler is told (an asyncio task cancelled, a sync
    handler's flag, Node's AbortSignal, a Swift Task cancelled) at the
    worker's next lease renewal, a third of the lease; its outcome is
    refused (lease_lost), the job ends cancelled with the reason, and the
    handler never finishes it. How long the handler took to hear is printed."""
    path = f"{tmp}/cancel-running-{surface}.db"
    conn = work_file(path, 1)  # the job {"i": 0}: the long one
    conn.execute("CREATE TABLE aborted (job_id INTEGER, attempts INTEGER)")
    conn.commit()
    w, admin = Driver(surface), Driver("rust")
    try:
        check({}, w.send({"op": "open", "path": path}), "open")
        check({}, admin.send({"op": "open", "path": path}), "open (admin)")
        # It stops once the handler has recorded that it was told to stop.
        start_work(
            w,
            scenario,
            started="started",
            long_ms=scenario["long_ms"],
            aborted="aborted",
            table="aborted",
            until=1,
        )
        deadline = time.monotonic() + 60
        while not (row := conn.execute("SELECT job_id FROM started").fetchone()):
            if time.monotonic() > deadline:
                raise Failure(f"the {surface} worker started no handler in 60 s")
            time.sleep(0.005)
        (job_id,) = row
        cancelled = time.monotonic()
        step = {
            "op": "cancel",
            "queue": "work",
            "id": job_id,
            "reason": "by the operator",
        }
        check({"equals": True}, admin.send(step), "cancel")
        bound = scenario["lease_ms"] / 3000 + 5
        while not conn.execute("SELECT count(*) FROM aborted").fetchone()[0]:
            if time.monotonic() > cancelled + bound:
                raise Failure(f"the {surface} handler was not told in {bound:.1f} s")
            time.sleep(0.002)
        heard = time.monotonic() - cancelled
        r = w.receive("work", timeout=60)
        check({"match": {"done": 0, "lease_lost": 1}}, r, f"work ({surface})")
        job = admin.send({"op": "get_job", "queue": "work", "id": job_id})
        check(
            {"match": {"state": "cancelled", "last_error": "by the operator"}},
            job,
            "get_job",
        )
        print(
            f"        the {surface} handler was told {heard * 1000:.0f} ms after the "
            f"cancel (lease {scenario['lease_ms']} ms: renewed every third)",
            flush=True,
        )
    finally:
        w.close()
        admin.close()
        conn.close()


def run_pause_workers(scenario: dict, tmp: str) -> None:
    """Waiting Workers in several languages on a paused queue (issue 56 §1):
    the jobs enqueued in one commit wake each of them, and each claims
    nothing and reports the look (its `paused` count, which its driver
    writes to `skips`): the play waits for every worker's row, no fixed
    sleep. Resumed, the jobs are all done, once each. How long the first
    handler took to start after the resume is printed, not asserted."""
    path = f"{tmp}/pause-workers.db"
    n = scenario["jobs"]
    conn = work_file(path, 0)
    conn.execute("CREATE TABLE skips (worker TEXT PRIMARY KEY, n INTEGER)")
    conn.commit()
    surfaces = [s for s in scenario["workers"] if s in SURFACES]
    admin = Driver("rust")
    workers = {f"{s}-{i}": Driver(s) for i, s in enumerate(surfaces)}
    try:
        check({}, admin.send({"op": "open", "path": path}), "open (admin)")
        check({}, admin.send({"op": "pause", "queue": "work"}), "pause")
        for name, w in workers.items():
            check({}, w.send({"op": "open", "path": path}), f"open ({name})")
            start_work(w, scenario, worker=name, until=n, skips="skips")
        deadline = time.monotonic() + 60
        while conn.execute("SELECT count(*) FROM skips").fetchone()[0] < len(workers):
            if time.monotonic() > deadline:
                raise Failure("the workers did not start in 60 s")
            time.sleep(0.005)
        admin.send({"op": "begin"})
        for i in range(n):
            admin.send(
                {
                    "op": "enqueue",
                    "queue": "work",
                    "payload": {"i": i + 1},
                    "in_tx": True,
                }
            )
        check({}, admin.send({"op": "commit"}), "commit")
        deadline = time.monotonic() + 60
        while conn.execute("SELECT count(*) FROM skips WHERE n >= 1").fetchone()[
            0
        ] < len(workers):
            if time.monotonic() > deadline:
                rows = conn.execute("SELECT * FROM skips").fetchall()
                raise Failure(f"not every worker reported the pause in 60 s: {rows}")
            time.sleep(0.005)
        if conn.execute("SELECT count(*) FROM done").fetchone()[0]:
            raise Failure("a worker ran a job of the paused queue")
        skipped = dict(conn.execute("SELECT worker, n FROM skips").fetchall())
        resumed = time.monotonic()
        check({"equals": True}, admin.send({"op": "resume", "queue": "work"}), "resume")
        while conn.execute("SELECT count(*) FROM done").fetchone()[0] == 0:
            if time.monotonic() > resumed + 60:
                raise Failure("no job ran in 60 s after the resume")
            time.sleep(0.001)
        first = time.monotonic() - resumed
        done = 0
        for name, w in workers.items():
            r = w.receive("work", timeout=120)
            check({}, r, f"work ({name})")
            done += r["ok"]["done"]
        rows = conn.execute(
            "SELECT job_id, count(*) FROM done GROUP BY job_id"
        ).fetchall()
        twice = [j for j, c in rows if c > 1]
        if len(rows) != n or twice or done != n:
            raise Failure(
                f"{len(rows)} of {n} jobs done ({done} by the workers); twice: {twice}"
            )
        print(
            f"        looks that found the work paused, per worker: {skipped}; first job done {first * 1000:.0f} ms "
            f"after the resume (handlers sleep {scenario['sleep_ms']} ms)",
            flush=True,
        )
    finally:
        for w in [admin, *workers.values()]:
            w.close()
        conn.close()


def run_caps(scenario: dict, tmp: str) -> None:
    """Workers in several languages on a queue with concurrency caps (issue
    56 §2): a checker samples the file's unexpired leases the whole time and
    never finds more than `max_running`, nor more than `max_running_per_key`
    of one key; it must find both caps reached (so the play can fail). Two
    workers, chosen at random, are SIGKILLed while they hold leases: their
    slots come back when those leases end, the others run every job, and
    nothing is lost (a job runs twice only when a killed worker held it)."""
    import random
    import threading

    path = f"{tmp}/caps.db"
    n, keys = scenario["jobs"], scenario["keys"]
    cap, per_key = scenario["max_running"], scenario["max_running_per_key"]
    conn = work_file(path, 0)
    surfaces = [s for s in scenario["workers"] if s in SURFACES]
    admin = Driver("rust")
    workers = {f"{s}-{i}": Driver(s) for i, s in enumerate(surfaces)}
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    victims: list = []
    seen = {"global": 0, "key": 0, "samples": 0}
    over: list = []
    stop = threading.Event()

    def checker() -> None:
        c = sqlite3.connect(path, timeout=30)
        try:
            while not stop.is_set():
                rows = c.execute(
                    "SELECT concurrency_key, lease_expires_at FROM _honker_jobs "
                    "WHERE queue = 'work' AND state = 'running'"
                ).fetchall()
                # The time after the read: a lease that looks unexpired now
                # was unexpired for every claim that committed before it.
                now = time.time() * 1000
                live = [k for k, expires in rows if expires > now]
                by_key: dict = {}
                for k in live:
                    by_key[k] = by_key.get(k, 0) + 1
                top = max(by_key.values(), default=0)
                seen["global"] = max(seen["global"], len(live))
                seen["key"] = max(seen["key"], top)
                seen["samples"] += 1
                if len(live) > cap or top > per_key:
                    over.append((len(live), by_key))
                time.sleep(0.001)
        finally:
            c.close()

    sampler = threading.Thread(target=checker, daemon=True)
    try:
        check({}, admin.send({"op": "open", "path": path}), "open (admin)")
        step = {"op": "limit_concurrency", "queue": "work"}
        step |= {"max_running": cap, "max_running_per_key": per_key}
        check({}, admin.send(step), "limit_concurrency")
        admin.send({"op": "begin"})
        for i in range(n):
            # Most jobs share the first key: it floods, the others trickle.
            key = "k0" if i % 2 == 0 else f"k{1 + i % (keys - 1)}"
            step = {"op": "enqueue", "queue": "work", "payload": {"i": i + 1}}
            step |= {"concurrency_key": key, "in_tx": True}
            check({}, admin.send(step), "enqueue")
        check({}, admin.send({"op": "commit"}), "commit")
        sampler.start()
        pids = {}
        for name, w in workers.items():
            check({}, w.send({"op": "open", "path": path}), f"open ({name})")
            pids[name] = w.send({"op": "pid"})["ok"]
            start_work(w, scenario, worker=name)
        held_at_kill = {}
        holders = (
            "SELECT DISTINCT worker_id FROM _honker_jobs WHERE state = 'running' "
            "AND lease_expires_at > ?"
        )
        # A worker's ack claims its next job in the same transaction, so the
        # first workers to hold the slots keep them: the kills free them for
        # the others (the Swift driver starts last).
        for _ in range(scenario["kills"]):
            # A victim chosen at random among the workers holding a lease now.
            deadline = time.monotonic() + 60
            while True:
                now = time.time() * 1000
                live = {r[0] for r in conn.execute(holders, [now]).fetchall()}
                candidates = sorted(live & set(workers) - set(victims))
                if candidates:
                    break
                if time.monotonic() > deadline:
                    raise Failure("no surviving worker held a lease in 60 s")
                time.sleep(0.002)
            victim = rng.choice(candidates)
            victims.append(victim)
            kill(victim.rsplit("-", 1)[0], pids[victim])
            workers[victim].proc.wait(10)
            held_at_kill[victim] = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM _honker_jobs WHERE state = 'running' AND worker_id = ?",
                    [victim],
                ).fetchall()
            ]
        for name, w in workers.items():
            if name not in victims:
                check({}, w.receive("work", timeout=180), f"work ({name})")
        stop.set()
        sampler.join(10)
        rows = conn.execute(
            "SELECT job_id, attempts, worker FROM done ORDER BY job_id, attempts"
        ).fetchall()
        runs: dict = {}
        for job_id, attempts, worker in rows:
            runs.setdefault(job_id, []).append((attempts, worker))
        left = conn.execute("SELECT count(*) FROM _honker_jobs").fetchone()[0]
        twice = {j: r for j, r in runs.items() if len(r) > 1 and r[0][1] not in victims}
        if len(runs) != n or left or twice:
            raise Failure(
                f"{len(runs)} of {n} jobs done, {left} left, run twice without a "
                f"killed holder: {dict(list(twice.items())[:5])}"
            )
        if over:
            raise Failure(f"caps exceeded (first samples): {over[:5]}")
        if (seen["global"], seen["key"]) != (cap, per_key):
            raise Failure(
                f"the caps never bound ({seen}): the play proves nothing; "
                "give the workers more concurrency"
            )
        by_worker = dict(
            conn.execute("SELECT worker, count(*) FROM done GROUP BY worker").fetchall()
        )
        languages = {w.rsplit("-", 1)[0] for w in [*by_worker, *victims]}
        if languages != {w.rsplit("-", 1)[0] for w in workers}:
            raise Failure(f"not every language ran jobs under the caps: {by_worker}")
        # The killed holders' jobs ran again elsewhere: their slots came back.
        rerun = [j for ids in held_at_kill.values() for j in ids]
        missing = [j for j in rerun if all(w in victims for _, w in runs.get(j, []))]
        if not rerun or missing:
            raise Failure(f"the killed workers' jobs were not run again: {missing}")
        print(
            f"        seed {seed}: killed {victims} holding {sum(map(len, held_at_kill.values()))} "
            f"leases; {seen['samples']} samples, at most {seen['global']} running "
            f"(cap {cap}) and {seen['key']} of one key (cap {per_key}); jobs run: {by_worker}",
            flush=True,
        )
    finally:
        stop.set()
        for w in [admin, *workers.values()]:
            w.close()
        conn.close()


def run_unique(scenario: dict, tmp: str) -> None:
    """Unique modes under concurrency (issue 56 §4's proof): `processes`
    enqueuers, Python and Node in turn, each a process of its own, send
    `each` enqueues of every mode at the same time (a thread per driver), so
    their transactions interleave. A completed job holds `P` under `period`
    beforehand. The counts must be exact: one job for the `live`,
    `throttle` and `debounce` keys, none added under the held `period` key,
    one job per distinct payload for payload keys (Node's payloads with
    their keys in the other order and whole floats as integers), and every
    enqueue that added nothing names the holder and the mode that acted."""
    from concurrent.futures import ThreadPoolExecutor

    path = f"{tmp}/unique.db"
    conn = work_file(path, 0)
    n, each, distinct = scenario["processes"], scenario["each"], scenario["payloads"]
    langs = ["python", "node"]
    drivers = [Driver(langs[i % len(langs)]) for i in range(n)]
    hour = 3_600_000
    try:
        for d in drivers:
            check({}, d.send({"op": "open", "path": path}), f"open ({d.surface})")
        held = {"op": "enqueue", "queue": "period", "payload": "first"}
        held |= {"dedupe_key": "P", "unique": "period", "unique_for_ms": hour}
        holder = drivers[0].send(held)["ok"]["id"]
        step = {"op": "claim", "queue": "period", "worker": "w", "n": 1}
        job = drivers[1].send(step | {"lease_ms": 60_000, "wait_ms": 0})["ok"][0]
        step = {"op": "ack", "queue": "period", "id": job["id"], "token": job["token"]}
        check({}, drivers[1].send(step), "ack (period holder)")

        def steps(i: int, surface: str) -> list:
            out = []
            for j in range(each):
                mine = {"p": i, "j": j}
                k = (i * each + j) % distinct
                hashed = (
                    {"k": k, "w": 2.0, "tag": "t"}
                    if surface == "python"
                    else {"tag": "t", "w": 2, "k": k}
                )
                out += [
                    {"queue": "live", "payload": mine, "dedupe_key": "L"},
                    {"queue": "throttle", "payload": mine, "dedupe_key": "T"}
                    | {"unique": "throttle", "unique_for_ms": hour},
                    {"queue": "period", "payload": mine, "dedupe_key": "P"}
                    | {"unique": "period", "unique_for_ms": hour},
                    {"queue": "debounce", "payload": mine, "dedupe_key": "D"}
                    | {"unique": "debounce", "delay_ms": 600_000},
                    {"queue": "hashed", "payload": hashed, "dedupe_by_payload": True},
                ]
            return [{"op": "enqueue"} | s for s in out]

        def play_one(i: int) -> list:
            d = drivers[i]
            answers = []
            for st in steps(i, d.surface):
                reply = d.send(st)
                if "ok" not in reply:
                    raise Failure(f"enqueue ({d.surface} #{i}) {st}: {reply}")
                answers.append((st["queue"], reply["ok"]))
            return answers

        with ThreadPoolExecutor(n) as pool_:
            results = [a for r in pool_.map(play_one, range(n)) for a in r]
        by_queue: dict = {}
        for q, e in results:
            by_queue.setdefault(q, []).append(e)
        jobs = dict(
            conn.execute("SELECT queue, count(*) FROM _honker_jobs GROUP BY queue")
        )
        want_jobs = {"live": 1, "throttle": 1, "debounce": 1, "hashed": distinct}
        if {q: jobs.get(q, 0) for q in [*want_jobs, "period"]} != want_jobs | {
            "period": 0
        }:
            raise Failure(
                f"jobs per queue {jobs}, expected {want_jobs} and none for period"
            )
        for q, added, mode in [
            ("live", 1, "live"),
            ("throttle", 1, "throttle"),
            ("period", 0, "period"),
            ("debounce", 1, "debounce"),
            ("hashed", distinct, "live"),
        ]:
            got = by_queue[q]
            new = [e for e in got if not e["existing"]]
            if len(new) != added or any(e["unique"] is not None for e in new):
                raise Failure(f"{q}: {len(new)} enqueues added a job, expected {added}")
            ids = {e["id"] for e in new} if added else {holder}
            wrong = [
                e
                for e in got
                if e["existing"] and (e["unique"] != mode or e["id"] not in ids)
            ]
            if wrong:
                raise Failure(f"{q}: held enqueues answered {wrong[:3]} (mode {mode})")
        (payload,) = conn.execute(
            "SELECT payload FROM _honker_jobs WHERE queue = 'debounce'"
        ).fetchone()
        if json.loads(payload)["j"] != each - 1:
            raise Failure(f"the debounced job holds {payload}, not a last enqueue's")
    finally:
        for d in drivers:
            d.close()
        conn.close()


def run_fair(scenario: dict, tmp: str) -> None:
    """Fair tenants (issue 56 §3's proof) across languages: the SQL
    functions put a queue in round-robin order; Python floods one key with
    `flood` jobs in one transaction, then the other languages enqueue
    `small` jobs for each of ten keys after it; claims of one job taken in
    turn by every surface must start every small key's first job within the
    first 50 claims (round-robin order gives each key one turn: within 11).
    Then Swift (or Node) sets a rate limit per key of one start a minute: a
    batch claim from Node takes one job of each key with jobs left and no
    more, and a claim from Python right after takes none."""
    path = f"{tmp}/fair.db"
    flood, small, keys = scenario["flood"], scenario["small"], scenario["keys"]
    conn = work_file(path, 0)
    surfaces = [s for s in SURFACES]
    drivers = {s: Driver(s) for s in surfaces}
    try:
        for s, d in drivers.items():
            check({}, d.send({"op": "open", "path": path}), f"open ({s})")
        step = {"op": "set_fairness", "queue": "work", "order": "round_robin"}
        check({}, drivers["sql"].send(step), "set_fairness (sql)")
        py = drivers["python"]
        py.send({"op": "begin"})
        for i in range(flood):
            step = {"op": "enqueue", "queue": "work", "payload": {"i": i}}
            check(
                {}, py.send(step | {"concurrency_key": "big", "in_tx": True}), "enqueue"
            )
        check({}, py.send({"op": "commit"}), "commit (python)")
        enqueuers = [s for s in surfaces if s != "python"]
        for k in range(keys):
            d = drivers[enqueuers[k % len(enqueuers)]]
            d.send({"op": "begin"})
            for i in range(small):
                step = {"op": "enqueue", "queue": "work", "payload": {"k": k, "i": i}}
                check(
                    {},
                    d.send(step | {"concurrency_key": f"s{k}", "in_tx": True}),
                    "enqueue",
                )
            check({}, d.send({"op": "commit"}), f"commit ({d.surface})")
        key_of = "SELECT concurrency_key FROM _honker_jobs WHERE id = ?"
        order: list = []
        claimers = list(drivers.values())
        for n in range(scenario["claims"]):
            d = claimers[n % len(claimers)]
            step = {"op": "claim", "queue": "work", "worker": d.surface, "n": 1}
            jobs = d.send(step | {"lease_ms": 600_000, "wait_ms": 0}).get("ok") or []
            if len(jobs) != 1:
                raise Failure(f"claim {n + 1} ({d.surface}) took {jobs}")
            order.append(conn.execute(key_of, [jobs[0]["id"]]).fetchone()[0])
        first = {k: order.index(k) + 1 for k in set(order)}
        late = {f"s{k}": first.get(f"s{k}") for k in range(keys)}
        if any(at is None or at > 50 for at in late.values()):
            raise Failure(
                f"a small key started late (claim numbers): {late}; order {order}"
            )
        setter = drivers.get("swift") or drivers["node"]
        step = {"op": "set_fairness", "queue": "work", "order": "round_robin"}
        step |= {"key_limit": 1, "key_per_ms": 60_000}
        check({}, setter.send(step), f"set_fairness ({setter.surface})")
        step = {"op": "claim", "queue": "work", "worker": "node", "n": 100}
        batch = drivers["node"].send(step | {"lease_ms": 600_000, "wait_ms": 0})["ok"]
        batch_keys = sorted(
            conn.execute(key_of, [j["id"]]).fetchone()[0] for j in batch
        )
        left = {
            k
            for (k,) in conn.execute(
                "SELECT DISTINCT concurrency_key FROM _honker_jobs WHERE state = 'ready'"
                " AND id NOT IN (SELECT value FROM json_each(?))",
                [json.dumps([j["id"] for j in batch])],
            )
        }
        if len(set(batch_keys)) != len(batch_keys) or not set(batch_keys) >= left - {
            None
        }:
            raise Failure(f"a batch under one start per key took {batch_keys}")
        step = {"op": "claim", "queue": "work", "worker": "python", "n": 10}
        after = py.send(step | {"lease_ms": 600_000, "wait_ms": 0})["ok"]
        if after:
            raise Failure(f"a claim took {len(after)} jobs of keys at their limit")
        print(
            f"        first claims of the small keys: {sorted(late.values())} "
            f"(of {len(order)} claims by {len(claimers)} surfaces); "
            f"under a limit per key a batch took {len(batch_keys)} jobs, one per key",
            flush=True,
        )
    finally:
        for d in drivers.values():
            d.close()
        conn.close()


def run_workers(scenario: dict, tmp: str, victim: str) -> None:
    """Each surface's Worker on one queue; `victim`'s is SIGKILLed mid-batch.
    Every job must be done, once, or twice only when the victim's run was
    cut short and another worker ran it again after the lease lapsed."""
    path = f"{tmp}/workers-{victim}.db"
    n = scenario["jobs"]
    conn = work_file(path, n)
    surfaces = [s for s in scenario["workers"] if s in SURFACES]
    workers = {s: Driver(s) for s in surfaces}
    try:
        pids = {}
        for s, w in workers.items():
            check({}, w.send({"op": "open", "path": path}), f"open ({s})")
            pids[s] = w.send({"op": "pid"})["ok"]
        for w in workers.values():
            start_work(w, scenario)
        deadline = time.monotonic() + 60
        while (
            conn.execute(
                "SELECT count(*) FROM done WHERE worker = ?", [victim]
            ).fetchone()[0]
            < scenario["kill_after"]
        ):
            if time.monotonic() > deadline:
                raise Failure(f"the {victim} worker did no work in 60 s")
            time.sleep(0.005)
        kill(victim, pids[victim])
        workers[victim].proc.wait(10)
        for s, w in workers.items():
            if s != victim:
                check({}, w.receive("work", timeout=120), f"work ({s})")
        rows = conn.execute(
            "SELECT job_id, attempts, worker FROM done ORDER BY job_id, attempts"
        ).fetchall()
        runs: dict[int, list] = {}
        for job_id, attempts, worker in rows:
            runs.setdefault(job_id, []).append((attempts, worker))
        lost = n - len(runs)
        twice = {j: r for j, r in runs.items() if len(r) > 1}
        wrong = {
            j: r
            for j, r in twice.items()
            if len(r) != 2 or r[0][1] != victim or r[1][0] <= r[0][0]
        }
        left = conn.execute("SELECT count(*) FROM _honker_jobs").fetchone()[0]
        if lost or wrong or left:
            raise Failure(
                f"{lost} jobs lost, {left} left in the queue, duplicates not explained by "
                f"the victim's lapsed lease: {dict(list(wrong.items())[:5])}"
            )
        # Mid-batch: the victim held leases, and others took them after they lapsed.
        reclaimed = sum(
            1 for r in runs.values() if r[-1][0] >= 2 and r[-1][1] != victim
        )
        if reclaimed == 0:
            raise Failure(f"the {victim} worker held no job when it was killed")
        by_worker = dict(
            conn.execute("SELECT worker, count(*) FROM done GROUP BY worker").fetchall()
        )
        if set(by_worker) != set(surfaces):
            raise Failure(f"not every worker took part: {by_worker}")
        # The file's metrics (ADR 27), counted by every language's worker.
        # The survivors exit (end of input; none closes its database
        # explicitly): their counts are all in the file then. The killed
        # one loses what it had not flushed yet (its last second at most),
        # so the jobs whose last run was its own may be missing from acked,
        # and its claims from claimed; nothing may be counted twice. The Rust
        # driver that enqueued the jobs closed too.
        for s, w in workers.items():
            if s != victim:
                w.close()
        counted = dict(
            conn.execute(
                "SELECT event, sum(n) FROM _honker_queue_counters WHERE queue = 'work' "
                "GROUP BY event"
            ).fetchall()
        )
        c = {
            e: counted.get(e, 0) for e in ("enqueued", "claimed", "acked", "reclaimed")
        }
        victim_last = sum(1 for r in runs.values() if r[-1][1] == victim)
        survivors_acked = n - victim_last
        if (
            c["enqueued"] != n
            or not survivors_acked <= c["acked"] <= n
            or c["reclaimed"] < reclaimed
            or not survivors_acked <= c["claimed"] <= len(rows) + c["reclaimed"]
            or counted.get("dead", 0) + counted.get("retried", 0)
        ):
            raise Failure(
                f"the metrics do not add up for {n} jobs ({victim_last} last run by the "
                f"killed {victim} worker): {counted}"
            )
        print(
            f"        per worker: {by_worker}; reclaimed after the lease: {reclaimed}; "
            f"run twice: {len(twice)}; counted: {c}"
        )
    finally:
        conn.close()
        for w in workers.values():
            w.close()


def swift_proc(mount: bool) -> bool:
    """The chroot's /proc (Swift's runtime needs it); mounts it if missing."""
    if not SWIFT_ROOT:
        return False
    sudo = [] if os.getuid() == 0 else ["sudo"]
    proc = f"{SWIFT_ROOT}/proc"
    if mount:
        if subprocess.run(["mountpoint", "-q", proc]).returncode == 0:
            return False
        subprocess.run([*sudo, "mount", "-t", "proc", "proc", proc], check=True)
        return True
    subprocess.run([*sudo, "umount", proc], check=False)
    return False


def check_steps(scenarios: list[dict]) -> None:
    """Every step uses an op of the protocol (ops.json) with its arguments
    only: a typo in a scenario fails here, not as a skip or a silent default."""
    ops = {
        o["op"]: set(o["args"])
        for o in json.loads((HERE / "ops.json").read_text())["ops"]
    }
    for s in scenarios:
        for i, step in enumerate(s.get("steps", [])):
            op = step.get("op")
            if op not in ops:
                raise SystemExit(
                    f"interop: {s['name']} step {i}: unknown op {op!r} (ops.json)"
                )
            extra = set(step) - ops[op] - {"role", "op", "expect", "save"}
            if extra:
                raise SystemExit(
                    f"interop: {s['name']} step {i}: {op} takes no {sorted(extra)} (ops.json)"
                )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="scenario names, comma-separated")
    ap.add_argument("--keep", metavar="DIR")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="play the chosen scenarios N times (a flakiness check, under load)",
    )
    args = ap.parse_args()
    scenarios = [
        json.loads(p.read_text()) for p in sorted((HERE / "scenarios").glob("*.json"))
    ]
    check_steps(scenarios)
    if args.only:
        names = args.only.split(",")
        unknown = set(names) - {s["name"] for s in scenarios}
        if unknown:
            raise SystemExit(f"interop: no scenario named {sorted(unknown)}")
        scenarios = [s for s in scenarios if s["name"] in names]
    if args.repeat < 1:
        raise SystemExit("interop: --repeat takes a count >= 1")
    # Each repetition plays in a directory of its own (the plays name their
    # files by scenario and surface).
    rounds = [(r, s) for r in range(args.repeat) for s in scenarios]
    passed = failed = skipped = 0
    pool = Pool()
    mounted = swift_proc(mount=True)
    # With Swift, the files live inside the chroot so that every surface sees them.
    tmp_parent = f"{SWIFT_ROOT}/tmp" if SWIFT_ROOT else None
    with tempfile.TemporaryDirectory(dir=tmp_parent) as top:
        for r, scenario in rounds:
            tmp = f"{top}/{r}"
            os.makedirs(tmp, exist_ok=True)
            kind = scenario.get("kind", "steps")
            if kind in ("sigterm", "sigstop", "cancel_running"):
                plays = [{"worker": s} for s in scenario["workers"] if s in SURFACES]
            elif kind == "workers":
                plays = [{"victim": s} for s in scenario["workers"] if s in SURFACES]
            else:
                plays = [None] if kind != "steps" else assignments(scenario)
            for n, assignment in enumerate(plays):
                label = scenario["name"] + (
                    ""
                    if assignment is None
                    else " ["
                    + " ".join(f"{r}={s}" for r, s in assignment.items())
                    + "]"
                )
                started = time.monotonic()
                try:
                    if kind == "drain":
                        run_drain(scenario, tmp)
                    elif kind == "rate":
                        run_rate(scenario, tmp)
                    elif kind == "crash":
                        run_crash(scenario, tmp)
                    elif kind == "sigterm":
                        assert assignment is not None
                        run_sigterm(scenario, tmp, assignment["worker"])
                    elif kind == "sigstop":
                        assert assignment is not None
                        run_sigstop(scenario, tmp, assignment["worker"])
                    elif kind == "workers":
                        assert assignment is not None
                        run_workers(scenario, tmp, assignment["victim"])
                    elif kind == "pause_workers":
                        run_pause_workers(scenario, tmp)
                    elif kind == "caps":
                        run_caps(scenario, tmp)
                    elif kind == "fair":
                        run_fair(scenario, tmp)
                    elif kind == "unique":
                        run_unique(scenario, tmp)
                    elif kind == "cancel_running":
                        assert assignment is not None
                        run_cancel_running(scenario, tmp, assignment["worker"])
                    else:
                        path = f"{tmp}/{scenario['name']}-{n}.db"
                        play(pool, scenario, assignment, path)
                        if args.keep:
                            keep(path, args.keep, scenario, assignment)
                    passed += 1
                    print(
                        f"PASS    {label} ({time.monotonic() - started:.2f} s)",
                        flush=True,
                    )
                except Skip as e:
                    skipped += 1
                    print(f"SKIP    {label}: {e}", flush=True)
                except Failure as e:
                    failed += 1
                    print(f"FAIL    {label}: {e}", flush=True)
    pool.close()
    if mounted:
        swift_proc(mount=False)
    print(
        f"interop: {passed} passed, {failed} failed ({skipped} skipped: a surface cannot express the step)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
