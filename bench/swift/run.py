"""Swift vs Python on the queue workloads W1–W4, in the same run.

    python bench/swift/run.py [--smoke] [--runs N]

Python is this repository's binding through bench/python/workloads.py (run
by the interpreter running this script: a venv with the honker wheel, as
scripts/bench-python.sh makes). Swift is bindings-swift's HonkerBench
(the same counts, payloads and batch sizes, through the async API an app
calls), built in release mode and run in the Debian 13 chroot
(scripts/swift-chroot.sh; root needed, as for the Swift tests) from the
package that scripts/swift-test.sh prepares. Each figure is the median of
`--runs` runs, the two languages alternating. Ratios are the result;
nothing is asserted. `--smoke` checks the benchmark works (its numbers mean
nothing), on the debug build that scripts/swift-test.sh already made.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = REPO / "bench" / "python" / "workloads.py"
COUNTS = {"W1": 10_000, "W2": 100, "W3": 10_000, "W4": 20_000}
SMOKE = {"W1": 50, "W2": 2, "W3": 50, "W4": 64}
NAMES = {
    "W1": "W1 enqueue, 1 per tx (jobs/s)",
    "W2": "W2 enqueue, 1,000 per tx (jobs/s)",
    "W3": "W3 claim 1 + ack 1 (jobs/s)",
    "W4": "W4 claim 32 + ack 32 (jobs/s)",
}


def chroot_root() -> Path:
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "swift-chroot.sh")],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def in_chroot(root: Path, command: str) -> str:
    out = subprocess.run(
        [
            "chroot",
            str(root),
            "/usr/bin/env",
            "-i",
            "HOME=/root",
            "PATH=/usr/bin:/bin",
            "TMPDIR=/tmp",
            "/bin/sh",
            "-c",
            command,
        ],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"in the chroot: {command}\n{out.stdout}{out.stderr}")
    return out.stdout


def python_rate(workload: str, n: int, tmp: Path) -> float:
    path = tmp / f"py-{workload}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)

    def child(w: str, count: int) -> dict:
        out = subprocess.run(
            [sys.executable, str(WORKLOADS), "honker", w, str(path), str(count)],
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    if workload in ("W3", "W4"):
        child("fill", n)
    r = child(workload, n)
    return r["ops"] / r["seconds"]


def swift_rate(root: Path, workload: str, n: int, config: str) -> float:
    db = f"/tmp/honker-bench-{workload}.db"
    clean = f"rm -f {db} {db}-wal {db}-shm"
    fill = f"$bench fill {db} {n} >/dev/null && " if workload in ("W3", "W4") else ""
    # The bench's exit status is the command's (a failed run must not look
    # like an empty result).
    out = in_chroot(
        root,
        f"bench=/work/honker-swift/.build/{config}/HonkerBench; {clean}; "
        f"{fill}$bench {workload} {db} {n}; rc=$?; {clean}; exit $rc",
    )
    lines = out.strip().splitlines()
    if not lines:
        raise SystemExit(f"HonkerBench {workload} printed nothing")
    r = json.loads(lines[-1])
    return r["ops"] / r["seconds"]


@contextlib.contextmanager
def proc_mounted(root: Path) -> Iterator[None]:
    """/proc in the chroot while the benchmark runs: Swift reads its
    arguments (and its tools their libraries) through it. Mounted here if
    scripts/swift-test.sh (which unmounts what it mounted) is not running."""
    proc = root / "proc"
    mounted = subprocess.run(["mountpoint", "-q", str(proc)]).returncode == 0
    if not mounted:
        subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
    try:
        yield
    finally:
        if not mounted:
            subprocess.run(["umount", str(proc)], check=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    counts = SMOKE if args.smoke else COUNTS
    runs = 1 if args.smoke else args.runs
    root = chroot_root()
    if not (root / "work/honker-swift/Package.swift").exists():
        raise SystemExit("run scripts/swift-test.sh first: it prepares the package")
    config = "debug" if args.smoke else "release"
    with proc_mounted(root):
        run(root, config, counts, runs, args.smoke)


def run(
    root: Path, config: str, counts: dict[str, int], runs: int, smoke: bool
) -> None:
    if not smoke:
        in_chroot(
            root,
            "cd /work/honker-swift && swift build -c release --product HonkerBench >/dev/null",
        )
    tmp = Path(tempfile.mkdtemp(prefix="honker-swift-bench-"))
    try:
        print(f"{'workload':36} {'python':>10} {'swift':>10} {'swift/python':>13}")
        for w, n in counts.items():
            py, sw = [], []
            for _ in range(runs):
                py.append(python_rate(w, n, tmp))
                sw.append(swift_rate(root, w, n, config))
            p, s = statistics.median(py), statistics.median(sw)
            mark = "" if s >= 0.9 * p else "  !"
            print(f"{NAMES[w]:36} {p:10.0f} {s:10.0f} {s / p:12.2f}x{mark}")
        print("goal: swift >= 0.9x python on each; '!' marks a miss")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
