"""The scheduler benchmark: honker's Python binding next to Honker 0.2.4
from PyPI, in the same run, each library in its own process.

    python bench/python/scheduler.py [--smoke] [--honker024 PYTHON]

A file holds N schedules (10, 1,000, 10,000), of which 10 are due at every
tick (``@every 1s``, the clock moved one second per tick) and the rest fire
once a year. Measured: ticks per second, each firing those 10 jobs — ours
``db.scheduler().tick()`` (a read-only check, then one write transaction),
Honker's loop body (one transaction with ``honker_scheduler_tick(now)`` and
``honker_scheduler_soonest()``). Targets: ours at least 2x Honker with
10,000 schedules, and flat: a tick with 10,000 schedules at most 1.3x the
cost of one with 10. `--smoke` runs tiny counts to check the benchmark
works (scripts/test.sh); its numbers mean nothing. Ratios are the result;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run import fresh  # bench/python/run.py: a fresh file in the scratch folder

SCALES = {"full": 2_000, "smoke": 20}
DUE = 10


def child(library: str, schedules: int, path: str, n: int) -> dict:
    """`n` ticks (after a warm-up) with `schedules` schedules; seconds."""
    import honker

    start = int(time.time())
    if library == "honker":
        clock = honker.ManualClock(now=start)
        db = honker.open(path, clock=clock)
        with db.transaction() as tx:
            for i in range(schedules):
                spec = "@every 1s" if i < DUE else "0 0 1 1 *"
                tx.query(
                    "SELECT honker_schedule_add(?, 'jobs', ?, 'null')",
                    [f"s{i}", spec],
                )
        s = db.scheduler()

        def tick() -> int:
            clock.advance(1)
            return len(s.tick())

    else:
        db = honker.open(path)
        with db.transaction() as tx:
            for i in range(schedules):
                spec = "@every 1s" if i < DUE else "0 0 1 1 *"
                tx.query(
                    "SELECT honker_scheduler_register(?, 'jobs', ?, 'null', 0, NULL)",
                    [f"s{i}", spec],
                )
        now = [start]

        def tick() -> int:
            now[0] += 1
            with db.transaction() as tx:
                fired = tx.query("SELECT honker_scheduler_tick(?) AS f", [now[0]])
                tx.query("SELECT honker_scheduler_soonest() AS t")
            return len(json.loads(fired[0]["f"]))

    for _ in range(max(n // 10, 2)):
        tick()
    t = time.perf_counter()
    fires = 0
    for _ in range(n):
        fires += tick()
    elapsed = time.perf_counter() - t
    return {"ticks": n, "fires": fires, "seconds": elapsed}


def run(python: str, library: str, schedules: int, path: Path, n: int) -> dict:
    out = subprocess.run(
        [python, __file__, "child", library, str(schedules), str(path), str(n)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        _, _, library, schedules, path, n = sys.argv
        print(json.dumps(child(library, int(schedules), path, int(n))))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--honker024", help="a Python with honker==0.2.4 installed")
    args = ap.parse_args()
    n = SCALES["smoke" if args.smoke else "full"]
    libs = [("honker", sys.executable)]
    if args.honker024:
        libs.append(("honker024", args.honker024))
    print(
        f"{'ticks/s, 10 due per tick':40} {'honker':>10} {'Honker 0.2.4':>14} {'ratio':>8}"
    )
    per_tick: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for schedules in (10, 1_000, 10_000):
            rates = {}
            for lib, py in libs:
                r = run(py, lib, schedules, fresh(tmp, f"{lib}-{schedules}"), n)
                assert r["fires"] == DUE * r["ticks"], r
                rates[lib] = r["ticks"] / r["seconds"]
                per_tick[(lib, schedules)] = r["seconds"] / r["ticks"]
            ours, old = rates["honker"], rates.get("honker024")
            name = f"{schedules:,} schedules"
            if old is None:
                print(f"{name:40} {ours:10.0f}")
            else:
                note = (
                    ""
                    if schedules < 10_000 or ours / old >= 2
                    else "  (target >= 2x: missed)"
                )
                print(f"{name:40} {ours:10.0f} {old:14.0f} {ours / old:7.2f}x{note}")
    for lib, _ in libs:
        flat = per_tick[(lib, 10_000)] / per_tick[(lib, 10)]
        target = "  (target <= 1.3x)" if lib == "honker" and flat > 1.3 else ""
        label = "honker" if lib == "honker" else "Honker 0.2.4"
        print(
            f"{label}: a tick with 10,000 schedules costs {flat:.2f}x one with 10{target}"
        )


if __name__ == "__main__":
    main()
