"""The locks and rate limits benchmark: honker's Python binding next to
Honker 0.2.4 from PyPI, in the same run, each library in its own process.

    python bench/python/locks.py [--smoke] [--honker024 PYTHON]

Measures, one call after another on one file (what a service does per
request): a lock taken and released (ours: ``try_acquire`` + ``release``,
and ``with lock.hold()``, which also starts and stops the renewal; Honker's:
``with db.lock()``), and a rate-limit check that allows (ours:
``try_acquire`` on a limit that never binds; Honker's: ``try_rate_limit``).
Each measure runs 20,000 calls after 3,000 that warm up the statement caches
and the WAL. Then ours alone: W3 (claim 1 + ack 1) and W4 (claim 32 +
``ack_many``) on a queue whose rate limit never binds, next to the same
without a limit, alternating three times (the issue's target: the limit
costs at most 5 %). `--smoke` runs tiny counts to check the benchmark works
(scripts/test.sh); its numbers mean nothing. Ratios are the result; nothing
is asserted.
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

SCALES = {"full": 20_000, "smoke": 50}


def child(library: str, workload: str, path: str, n: int) -> dict:
    """One measurement in this process: `n` calls; the elapsed seconds."""
    import honker

    db = honker.open(path)
    if library == "honker":
        lock = db.lock("bench")
        rl = db.rate_limiter("bench", limit=1_000_000_000, per=1, burst=1_000_000)

        def lock_cycle() -> None:
            g = lock.try_acquire("me", ttl=60)
            assert g is not None
            lock.release(g.token)

        def hold_cycle() -> None:
            with lock.hold("me", ttl=60):
                pass

        def rate_check() -> None:
            assert rl.try_acquire("k").allowed

        ops = {"lock": lock_cycle, "hold": hold_cycle, "rate": rate_check}
    else:

        def lock_cycle() -> None:
            with db.lock("bench", ttl=60, owner="me"):
                pass

        def rate_check() -> None:
            assert db.try_rate_limit("bench", 1_000_000_000, 60)

        ops = {"lock": lock_cycle, "hold": lock_cycle, "rate": rate_check}
    if workload.startswith("queue-"):
        return queue_child(db, workload, n)
    op = ops[workload]
    # Warm up past the first checkpoint (1,000 WAL pages), so that both
    # libraries are measured appending to a WAL that is reused, not grown.
    for _ in range(min(3_000, n)):
        op()
    t = time.perf_counter()
    for _ in range(n):
        op()
    return {"ops": n, "seconds": time.perf_counter() - t}


def queue_child(db, workload: str, n: int) -> dict:
    """``queue-W3`` / ``queue-W4``, ``-limited`` or ``-plain``: `n` jobs
    claimed and acked, after 1,000 that warm up."""
    _, w, kind = workload.split("-")
    batch = {"W3": 1, "W4": 32}[w]
    q = db.queue("bench")
    warm = 1_000
    for start in range(0, n + warm, 1_000):
        q.enqueue_many([{"i": i} for i in range(start, min(n + warm, start + 1_000))])
    if kind == "limited":
        q.set_rate_limit(limit=1_000_000_000, per=1, burst=1_000_000)

    def cycle() -> int:
        jobs = q.claim_batch("bench", batch)
        if batch == 1:
            for job in jobs:
                job.ack()
        elif jobs:
            q.ack_many(jobs)
        return len(jobs)

    done = 0
    while done < warm:
        done += cycle()
    t = time.perf_counter()
    done = 0
    while (got := cycle()) > 0:
        done += got
    return {"ops": done, "seconds": time.perf_counter() - t}


def run(python: str, library: str, workload: str, path: Path, n: int) -> dict:
    out = subprocess.run(
        [python, __file__, "child", library, workload, str(path), str(n)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        _, _, library, workload, path, n = sys.argv
        print(json.dumps(child(library, workload, path, int(n))))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--honker024", help="a Python with honker==0.2.4 installed")
    args = ap.parse_args()
    n = SCALES["smoke" if args.smoke else "full"]
    libs = [("honker", sys.executable)]
    if args.honker024:
        libs.append(("honker024", args.honker024))
    rows = [
        ("lock acquire + release (cycles/s)", "lock"),
        ("lock held by a block: with hold() (cycles/s)", "hold"),
        ("rate limit check, allowed (checks/s)", "rate"),
    ]
    print(f"{'measure':48} {'honker':>12} {'Honker 0.2.4':>14} {'ratio':>8}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, w in rows:
            rates = {}
            for lib, py in libs:
                r = run(py, lib, w, fresh(tmp, f"{lib}-{w}"), n)
                rates[lib] = r["ops"] / r["seconds"]
            ours, old = rates["honker"], rates.get("honker024")
            if old is None:
                print(f"{name:48} {ours:12.0f}")
            else:
                note = "" if ours / old >= 2 else "  (target >= 2x: missed)"
                print(f"{name:48} {ours:12.0f} {old:14.0f} {ours / old:7.2f}x{note}")
        print(f"{'queue limit that never binds':48} {'limited':>12} {'no limit':>14}")
        for name, w in [
            ("W3 claim 1 + ack 1 (jobs/s)", "W3"),
            ("W4 claim 32 + ack 32 (jobs/s)", "W4"),
        ]:
            totals = {"limited": [0, 0.0], "plain": [0, 0.0]}
            for i in range(3):
                for kind in ("plain", "limited"):
                    f = fresh(tmp, f"queue-{w}-{kind}-{i}")
                    r = run(sys.executable, "honker", f"queue-{w}-{kind}", f, n)
                    totals[kind][0] += r["ops"]
                    totals[kind][1] += r["seconds"]
            lim, plain = (o / s for o, s in (totals["limited"], totals["plain"]))
            note = "" if lim / plain >= 0.95 else "  (target: cost <= 5%: missed)"
            print(f"{name:48} {lim:12.0f} {plain:14.0f} {lim / plain:7.2f}x{note}")


if __name__ == "__main__":
    main()
