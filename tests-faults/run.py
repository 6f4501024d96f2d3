"""Crash points and error points: runs tests-faults/workload.py under strace,
killing it (SIGKILL) before its Nth pwrite64, or failing that write with
ENOSPC or EIO, for many N; after each run, checks what the files alone
recover (a fresh connection of Debian's stdlib sqlite3, which replays the
WAL):

- `integrity_check` is ok;
- every commit either writer saw return OK is there, and nothing else: the
  workload's (its log) and the second writer's (this process, which commits
  with the stdlib sqlite3 module while the workload waits after its
  spilled-and-rolled-back transaction);
- a business row and its jobs exist together or not at all; an acked job is
  gone exactly when its ack's row exists; the rolled-back rows never exist;
- an error point's workload handles every error and finishes (no hang, no
  INTERNAL, no crash); a kill point's run ends within the timeout.

Points are spread evenly over the workload's pwrite64 calls (counted by a
first run): by default 200 kill points and 100 error points (CI); with
HONKER_SLOW=1, every call, both ways. strace injects into the workload's
main thread, where its writes happen (the checkpoint thread is not traced).
Needs strace (scripts/deps.sh installs it).

Usage: run.py [--kill N] [--errors N] [--jobs J]
Prints "faults: P passed, F failed" last; exits non-zero on a failure.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "workload.py")
TIMEOUT_S = 120
B_COMMITS = 30


def make_template(dir_: str) -> str:
    import honker

    path = os.path.join(dir_, "template.db")
    db = honker.open(path)
    db.execute(
        "CREATE TABLE ledger (marker TEXT PRIMARY KEY, writer TEXT NOT NULL, v BLOB)"
    )
    db.execute("CREATE TABLE bulk (k INTEGER, v BLOB)")
    db.close()
    return path


def second_writer(path: str) -> list[str]:
    """Commits B's rows, one transaction each; returns those that returned OK."""
    ok = []
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        for i in range(B_COMMITS):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO ledger (marker, writer, v) VALUES (?, 'B', randomblob(300))",
                [f"b{i}"],
            )
            conn.execute("COMMIT")
            ok.append(f"b{i}")
    finally:
        conn.close()
    return ok


def run_point(template: str, work: str, inject: str | None) -> dict:
    """Runs the workload once; returns what happened."""
    os.makedirs(work)
    db = os.path.join(work, "app.db")
    shutil.copy(template, db)
    log = os.path.join(work, "log")
    trace = os.path.join(work, "trace")
    cmd = ["strace", "-qq", "-o", trace, "-e", "trace=pwrite64"]
    if inject:
        cmd += ["-e", f"inject=pwrite64:{inject}"]
    cmd += [sys.executable, WORKLOAD, db, log]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    b_ok: list[str] = []
    synced = False
    # A run that outlives the timeout is killed and reported as hung.
    timer = threading.Timer(TIMEOUT_S, proc.kill)
    timer.start()
    for line in proc.stdout:
        if line.strip() == "SYNC":
            synced = True
            b_ok = second_writer(db)
            proc.stdin.write("go\n")
            proc.stdin.flush()
    stderr = proc.communicate()[1]
    hung = not timer.is_alive()
    timer.cancel()
    with open(trace) as f:
        writes = sum(1 for line in f if line.startswith("pwrite64("))
    return {
        "db": db,
        "log": log,
        "b_ok": b_ok,
        "synced": synced,
        "returncode": proc.returncode,
        "stderr": stderr,
        "hung": hung,
        "writes": writes,
    }


def read_log(path: str) -> tuple[set[str], set[str], set[str], list[str]]:
    tried, ok, caught_enqueue, lines = set(), set(), set(), []
    if os.path.exists(path):
        with open(path) as f:
            lines = f.read().splitlines()
    for line in lines:
        word, _, rest = line.partition(" ")
        marker = rest.split(" ")[0]
        if word == "try":
            tried.add(marker)
        elif word == "ok":
            ok.add(marker)
        elif word == "caught" and rest.split(" ")[1:2] == ["enqueue"]:
            caught_enqueue.add(marker)
    return tried, ok, caught_enqueue, lines


def check(r: dict, expect_finish: bool) -> list[str]:
    """What is wrong with the files after a run (empty: nothing)."""
    problems = []
    if r["hung"]:
        problems.append("the workload hung")
    tried, ok, caught_enqueue, lines = read_log(r["log"])
    if expect_finish and (r["returncode"] != 0 or "done" not in lines):
        problems.append(
            f"the workload did not finish: exit {r['returncode']}: {r['stderr'][-600:]}"
        )
    if (
        not expect_finish
        and r["returncode"] not in (0, -9, 137)
        and "Killed" not in r["stderr"]
    ):
        # strace reports the tracee's death by SIGKILL as its own exit status.
        if "Traceback" in r["stderr"]:
            problems.append(f"the workload failed: {r['stderr'][-600:]}")
    conn = sqlite3.connect(r["db"], isolation_level=None)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchall()
        if integrity != [("ok",)]:
            return problems + [f"integrity_check: {integrity[:3]}"]
        ledger = dict(conn.execute("SELECT marker, writer FROM ledger").fetchall())
        jobs: dict[str, int] = {}
        live: set[str] = set()
        for table in ("_honker_jobs", "_honker_finished"):
            for (payload,) in conn.execute(f"SELECT payload FROM {table}"):
                m = json.loads(payload)["m"]
                jobs[m] = jobs.get(m, 0) + 1
                if table == "_honker_jobs":
                    live.add(m)
        # The outbox's events and the projector's committed place.
        events = conn.execute(
            'SELECT "offset", payload FROM _honker_stream_events WHERE stream = ? ORDER BY 1',
            ["events"],
        ).fetchall()
        place = conn.execute(
            "SELECT next_offset FROM _honker_stream_offsets WHERE stream = ? AND consumer = ?",
            ["events", "projector"],
        ).fetchall()
    except sqlite3.DatabaseError as e:
        return problems + [f"the file does not open: {e}"]
    finally:
        conn.close()
    offsets = [o for o, _ in events]
    if offsets != list(range(1, len(offsets) + 1)):
        problems.append(f"event offsets are not dense from 1: {offsets}")
    evented = [json.loads(p)["m"] for _, p in events]
    outboxed = {m for m in ledger if m.startswith("o")}
    if sorted(evented) != sorted(outboxed):
        problems.append(
            f"events {sorted(evented)} differ from business rows {sorted(outboxed)}"
        )
    # Projected rows are exactly the events before the committed place.
    next_offset = place[0][0] if place else 1
    projected = {m[len("read:") :] for m in ledger if m.startswith("read:")}
    if projected != {m for o, m in zip(offsets, evented) if o < next_offset}:
        problems.append(
            f"projection {sorted(projected)} disagrees with the place {next_offset}"
        )
    a_rows = {m for m, w in ledger.items() if w == "A"}
    b_rows = {m for m, w in ledger.items() if w == "B"}
    for m in sorted(ok - a_rows - {m for m in ok if m.startswith("big")}):
        problems.append(f"commit {m} returned OK but is gone")
    for m in sorted(set(r["b_ok"]) - b_rows):
        problems.append(f"the second writer's commit {m} returned OK but is gone")
    for m in sorted(a_rows - tried):
        if not m.startswith("big"):
            problems.append(f"row {m} exists but was never written")
    if any(m.startswith("big") for m in ledger):
        problems.append("rows of the rolled-back transaction exist")
    if len(b_rows) > B_COMMITS:
        problems.append("the second writer's rows are more than it wrote")
    for m in a_rows:
        if m.startswith("o"):
            acked = f"ack:{m}" in a_rows
            if jobs.get(m, 0) != 1 and not (acked and jobs.get(m, 0) == 0):
                problems.append(f"business row {m} without its job ({jobs.get(m, 0)})")
        if m.startswith("s"):
            n = sum(1 for j in jobs if j.startswith(f"{m}-"))
            acked = sum(1 for a in a_rows if a.startswith(f"ack:{m}-"))
            if n + acked not in (0, 20) and n != 20:
                problems.append(
                    f"transaction {m} has {n} of its 20 jobs ({acked} acked)"
                )
            if n + acked == 0 and m not in caught_enqueue:
                problems.append(f"transaction {m} committed without its jobs")
    for m, count in jobs.items():
        base = m.split("-")[0]
        if base not in a_rows:
            problems.append(f"job {m} exists without its business row")
        if count != 1:
            problems.append(f"job {m} exists {count} times")
    for a in a_rows:
        if a.startswith("ack:") and a[4:] in live:
            problems.append(f"{a} committed but the job is still live")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser()
    slow = os.environ.get("HONKER_SLOW") == "1"
    ap.add_argument(
        "--kill", type=int, default=0 if slow else 200, help="kill points (0: all)"
    )
    ap.add_argument(
        "--errors", type=int, default=0 if slow else 100, help="error points (0: all)"
    )
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    if shutil.which("strace") is None:
        print(
            "tests-faults: strace is missing (scripts/deps.sh installs it)",
            file=sys.stderr,
        )
        return 1
    tmp = tempfile.mkdtemp(prefix="honker-faults-")
    try:
        template = make_template(tmp)
        started = time.monotonic()
        base = run_point(template, os.path.join(tmp, "count"), None)
        problems = check(base, expect_finish=True)
        if problems or not base["synced"]:
            print(
                "tests-faults: the workload fails without faults:",
                *problems,
                sep="\n  ",
            )
            return 1
        total = base["writes"]

        def spread(n: int) -> list[int]:
            if n <= 0 or n >= total:
                return list(range(1, total + 1))
            return sorted({1 + (i * (total - 1)) // (n - 1) for i in range(n)})

        points = [(n, "signal=KILL") for n in spread(args.kill)]
        errors = spread(args.errors)
        points += [
            (n, f"error={'ENOSPC' if i % 2 == 0 else 'EIO'}")
            for i, n in enumerate(errors)
        ]

        def one(i_point: tuple[int, tuple[int, str]]) -> tuple[str, list[str]]:
            i, (n, how) = i_point
            r = run_point(template, os.path.join(tmp, f"p{i}"), f"{how}:when={n}")
            problems = check(r, expect_finish=not how.startswith("signal"))
            if not problems:
                shutil.rmtree(os.path.join(tmp, f"p{i}"))
            return f"{how} at pwrite64 #{n} of {total}", problems

        passed = failed = 0
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for name, problems in pool.map(one, enumerate(points)):
                if problems:
                    failed += 1
                    print(f"FAIL {name}:", *problems[:5], sep="\n  ")
                else:
                    passed += 1
        kills = sum(1 for _, h in points if h.startswith("signal"))
        print(
            f"tests-faults: {kills} kill points and {len(points) - kills} error points over "
            f"{total} pwrite64 calls in {time.monotonic() - started:.0f} s"
        )
        print(f"faults: {passed} passed, {failed} failed")
        return 1 if failed else 0
    finally:
        if os.environ.get("HONKER_KEEP") != "1":
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
