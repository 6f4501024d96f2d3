"""The Python benchmark: workloads W1–W6 of the core benchmark through the
Python binding, next to the same operations with the stdlib sqlite3 module
and with Honker 0.2.4 from PyPI, all in the same run, and next to the raw
rusqlite figures of the core benchmark (also run now).

    python bench/python/run.py [--quick | --smoke] [--honker024 PYTHON] [--rust BENCH]

`--smoke` runs tiny counts to check the benchmark works (scripts/test.sh);
its numbers mean nothing. Ratios are the result; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "workloads.py"

SCALES = {
    "full": {
        "W1": 10_000,
        "W2": 100,
        "W3": 10_000,
        "W4": 20_000,
        "W5": 20_000,
        "W6": 500,
        "W7": 10_000,
    },
    "quick": {
        "W1": 2_000,
        "W2": 20,
        "W3": 2_000,
        "W4": 6_400,
        "W5": 8_000,
        "W6": 200,
        "W7": 3_000,
    },
    "smoke": {"W1": 50, "W2": 2, "W3": 50, "W4": 64, "W5": 200, "W6": 5, "W7": 50},
}


def child(python: str, library: str, workload: str, path: Path, count: int) -> dict:
    out = subprocess.run(
        [python, str(WORKLOADS), library, workload, str(path), str(count)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"{library} {workload} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fresh(tmp: Path, name: str) -> Path:
    p = tmp / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{p}{suffix}").unlink(missing_ok=True)
    return p


def rate(r: dict) -> float:
    return r["ops"] / r["seconds"]


def run_rate(python: str, library: str, workload: str, tmp: Path, n: int) -> float:
    path = fresh(tmp, f"{library}-{workload}")
    if workload == "W1":
        return rate(child(python, library, "W1", path, n))
    if workload == "W2":
        return rate(child(python, library, "W2", path, n))
    child(python, library, "fill", path, n)
    if workload in ("W3", "W4"):
        r = child(python, library, workload, path, n)
        assert r["ops"] == n, r
        return rate(r)
    # W5: four processes drain the file together.
    procs = [
        subprocess.Popen(
            [python, str(WORKLOADS), library, "drain", str(path), str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for p in procs:  # every drainer has opened the file
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in procs:
        stdout, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"{library} W5 worker failed")
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    done = sum(r["ops"] for r in results)
    assert done == n, (library, done, n)
    # time.monotonic() is one clock for every process on the machine.
    return n / (max(r["end"] for r in results) - min(r["start"] for r in results))


def run_w6(python: str, library: str, mode: str, tmp: Path, n: int) -> dict:
    path = fresh(tmp, f"{library}-{mode}")
    child(python, library, "fill", path, 0)  # creates the schema
    consumer = subprocess.Popen(
        [python, str(WORKLOADS), library, mode, str(path), str(n)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert consumer.stdout is not None
    assert consumer.stdout.readline().strip() == "ready"
    time.sleep(0.2)  # the consumer is waiting
    child(python, library, "W6-producer", path, n)
    stdout, _ = consumer.communicate(timeout=120)
    r = json.loads(stdout.strip().splitlines()[-1])
    lat = r["latencies_ms"]
    return {
        "p50": statistics.median(lat),
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "idle_cpu": r["idle_cpu_percent"],
    }


def run_w7(python: str, library: str, mode: str, tmp: Path, n: int) -> dict:
    path = fresh(tmp, f"{library}-{mode}")
    r = child(python, library, mode, path, n)
    assert r["ops"] == n, r
    return {"rate": rate(r), "lag_p99": r["lag_p99_ms"]}


def w7(libs: list[tuple[str, str]], tmp: Path, n: int) -> None:
    """The worker runtime, no-op async handler: honker.Worker at
    concurrency 1/8/64 against the hand-written claim-run-ack loop (the
    baseline, same run) and Honker 0.2.4's run_workers."""
    ours = dict(libs)["honker"]
    hand = run_w7(ours, "honker", "W7-hand", tmp, n)
    print(
        f"W7 hand loop (async for claim, ack) {hand['rate']:>10.0f}/s, "
        f"loop lag p99 {hand['lag_p99']:.2f} ms",
        flush=True,
    )
    for c in (1, 8, 64):
        r = run_w7(ours, "honker", f"W7-{c}", tmp, n)
        line = (
            f"W7 Worker, concurrency {c:<3}        {r['rate']:>10.0f}/s, "
            f"loop lag p99 {r['lag_p99']:.2f} ms, {r['rate'] / hand['rate']:.2f}x hand loop"
        )
        if "honker024" in dict(libs):
            old = run_w7(dict(libs)["honker024"], "honker024", f"W7-{c}", tmp, n)
            line += (
                f", {r['rate'] / old['rate']:.2f}x Honker 0.2.4's run_workers "
                f"({old['rate']:.0f}/s, lag p99 {old['lag_p99']:.2f} ms)"
            )
        print(line, flush=True)
    print("targets: >= 0.9x the hand loop at concurrency 1, above it at 8", flush=True)


def rust_figures(bench: str | None, quick: bool) -> dict[str, dict[str, float]]:
    """The core benchmark's figures, run now: core's own throughput
    (`honker`) and raw rusqlite's (`raw`) per workload."""
    if not bench:
        return {}
    args = [bench, "W1", "W2", "W3", "W4", "W5"] + (["--quick"] if quick else [])
    out = subprocess.run(
        args,
        capture_output=True,
        text=True,
        env={**os.environ, "HONKER_BENCH_JSON": "1"},
    )
    figures: dict[str, dict[str, float]] = {}
    for line in out.stdout.splitlines():
        if line.startswith("@json "):
            j = json.loads(line[6:])
            if j["workload"] == "W5" and "NORMAL" not in j["name"]:
                continue
            figures[j["workload"]] = {"honker": j["honker"], "raw": j["raw"]}
    return figures


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--honker024", help="a Python with honker==0.2.4 installed")
    ap.add_argument(
        "--rust", help="the core benchmark binary (target/release/honker-bench)"
    )
    args = ap.parse_args()
    scale_name = "smoke" if args.smoke else "quick" if args.quick else "full"
    scale = SCALES[scale_name]
    if args.smoke:
        os.environ["HONKER_BENCH_IDLE_S"] = "0.2"
    ours = sys.executable
    libs = [("honker", ours), ("stdlib", ours)]
    if args.honker024:
        libs.append(("honker024", args.honker024))
    rust = rust_figures(args.rust, quick=scale_name != "full") if not args.smoke else {}

    print(f"honker Python benchmark ({scale_name}); Python {sys.version.split()[0]}")
    head = f"{'workload':<34}" + "".join(f"{name:>14}" for name, _ in libs)
    print(head + f"{'vs stdlib':>11}{'vs 0.2.4':>10}{'vs core':>10}{'vs raw rs':>11}")
    names = {
        "W1": "W1 enqueue, 1 per tx (jobs/s)",
        "W2": "W2 enqueue, 1,000 per tx (jobs/s)",
        "W3": "W3 claim 1 + ack 1 (jobs/s)",
        "W4": "W4 claim 32 + ack 32 (jobs/s)",
        "W5": "W5 4 processes drain (jobs/s)",
    }
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for w, label in names.items():
            n = scale[w]
            # W5 depends on how four processes meet at the write lock and
            # varies run to run: the median of three.
            runs = 3 if w == "W5" and scale_name != "smoke" else 1
            rates = {
                name: statistics.median(
                    run_rate(py, name, w, tmp, n) for _ in range(runs)
                )
                for name, py in libs
            }
            line = f"{label:<34}" + "".join(
                f"{rates[name]:>12.0f}/s" for name, _ in libs
            )
            ours_rate = rates["honker"]
            line += f"{ours_rate / rates['stdlib']:>10.2f}x"
            if "honker024" in rates:
                ratio = ours_rate / rates["honker024"]
                line += f"{ratio:>9.2f}x" + ("" if ratio >= 3 else "!")
            else:
                line += f"{'-':>10}"
            if w in rust:
                ratio = ours_rate / rust[w]["honker"]
                miss = w in ("W1", "W3", "W4") and ratio < 0.85
                line += f"{ratio:>9.2f}x" + ("!" if miss else " ")
                line += f"{ours_rate / rust[w]['raw']:>10.2f}x"
            print(line, flush=True)
        print(
            "targets: >= 3x Honker 0.2.4, >= 0.85x core's own (W1, W3, W4); '!' marks a miss"
        )
        w7(libs, tmp, scale["W7"])
        for name, py in libs:
            modes = ["W6"] + (["W6-sync"] if name == "honker" else [])
            for mode in modes:
                r = run_w6(py, name, mode, tmp, scale["W6"])
                kind = "async for" if mode == "W6" else "sync iterator"
                if name == "stdlib":
                    kind = "1 ms polling"
                print(
                    f"W6 wake latency {name:<10} {kind:<14} p50 {r['p50']:.3f} ms, "
                    f"p99 {r['p99']:.3f} ms, idle CPU {r['idle_cpu']:.2f} % "
                    "(targets: p50 <= 0.3 ms, idle <= 0.3 %)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
