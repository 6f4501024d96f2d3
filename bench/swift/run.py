"""Swift vs Python on the queue workloads W1–W4, in the same run.

    python bench/swift/run.py [--smoke] [--runs N]

Python is this repository's binding through bench/python/workloads.py (run
by the interpreter running this script: a venv with the honker wheel, as
scripts/bench-python.sh makes). Swift is bindings-swift's HonkerBench
(the same counts, payloads and batch sizes, through the async API an app
calls), built in release mode and run in the Debian 13 chroot
(scripts/swift-chroot.sh; root needed, as for the Swift tests) from the
package that scripts/swift-test.sh prepares. Each figure is the median of
`--runs` runs, the languages alternating. Ratios are the result; nothing is
asserted. `--smoke` checks the benchmark works (its numbers mean nothing),
on the debug build that scripts/swift-test.sh already made.

Swift runs twice: as it ships, on the system SQLite (ADR 18: Debian 13's
3.46.1 in the chroot, which Debian compiles from SQLite's separate source
files rather than the amalgamation), and on the very SQLite objects
Python's module links (libsqlite3-sys's bundled build from this workspace's
release target, linked into a shared library that the Swift process loads
instead). The second isolates what the Swift binding costs; the first adds
what the SQLite build costs. Issue 20's goal (Swift >= 0.9x Python on each)
is judged on the second, as ADR 18 decides; the first is printed beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
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


def swift_rate(
    root: Path, workload: str, n: int, config: str, sqlite: str | None = None
) -> float:
    """`sqlite`: a directory in the chroot holding the libsqlite3.so.0 to
    load instead of the system's."""
    db = f"/tmp/honker-bench-{workload}.db"
    preload = f"export LD_LIBRARY_PATH={sqlite}; " if sqlite else ""
    clean = f"rm -f {db} {db}-wal {db}-shm"
    fill = f"$bench fill {db} {n} >/dev/null && " if workload in ("W3", "W4") else ""
    # The bench's exit status is the command's (a failed run must not look
    # like an empty result).
    out = in_chroot(
        root,
        f"{preload}bench=/work/honker-swift/.build/{config}/HonkerBench; {clean}; "
        f"{fill}$bench {workload} {db} {n}; rc=$?; {clean}; exit $rc",
    )
    lines = out.strip().splitlines()
    if not lines:
        raise SystemExit(f"HonkerBench {workload} printed nothing")
    r = json.loads(lines[-1])
    return r["ops"] / r["seconds"]


PYTHONS_SQLITE = "/work/pythons-sqlite"


def link_pythons_sqlite(root: Path) -> str:
    """Python's SQLite as a shared library in the chroot: the static
    archive that libsqlite3-sys's build script compiled for the release
    profile (its out_dir, from cargo's own report), every object linked in.
    Returns the directory, as the chroot sees it."""
    out = subprocess.run(
        ["cargo", "build", "--release", "--locked", "-q", "-p", "honker"]
        + ["--message-format=json"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    dirs = [
        m["out_dir"]
        for m in map(json.loads, out.splitlines())
        if m.get("reason") == "build-script-executed"
        and "libsqlite3-sys" in m["package_id"]
    ]
    archive = Path(dirs[0]) / "libsqlite3.a" if dirs else None
    if archive is None or not archive.exists():
        raise SystemExit("no bundled libsqlite3.a in the release target")
    target = root / PYTHONS_SQLITE.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["cc", "-shared", "-o", str(target / "libsqlite3.so.0")]
        + ["-Wl,--whole-archive", str(archive), "-Wl,--no-whole-archive"]
        + ["-Wl,-soname,libsqlite3.so.0", "-lpthread", "-lm", "-ldl"],
        check=True,
    )
    return PYTHONS_SQLITE


def loaded_sqlite(root: Path, sqlite: str, config: str) -> str:
    """The SQLite library the Swift process loads with `sqlite` first on
    its library path (what the second column claims, checked)."""
    return in_chroot(
        root,
        f"LD_LIBRARY_PATH={sqlite} /usr/bin/ldd "
        f"/work/honker-swift/.build/{config}/HonkerBench | grep libsqlite3",
    ).strip()


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
    sqlite = link_pythons_sqlite(root)
    loaded = loaded_sqlite(root, sqlite, config)
    if PYTHONS_SQLITE not in loaded:
        raise SystemExit(f"the Swift process does not load Python's SQLite: {loaded}")
    with tempfile.TemporaryDirectory(
        prefix="honker-swift-bench-", ignore_cleanup_errors=True
    ) as d:
        tmp = Path(d)
        scale = (
            "smoke: Swift's debug build and a few jobs, the numbers mean nothing"
            if smoke
            else f"full: release builds, the median of {runs} run{'s' if runs != 1 else ''}"
        )
        print(f"honker Swift vs Python benchmark ({scale})")
        print(
            f"{'workload':36} {'python':>10} {'swift':>10} {'ratio':>7}"
            f" {'swift*':>10} {'ratio*':>7}"
        )
        for w, n in counts.items():
            py, sw, same = [], [], []
            for _ in range(runs):
                py.append(python_rate(w, n, tmp))
                sw.append(swift_rate(root, w, n, config))
                same.append(swift_rate(root, w, n, config, sqlite))
            p, s, s2 = (statistics.median(x) for x in (py, sw, same))
            mark = "" if s2 >= 0.9 * p else "!"
            print(
                f"{NAMES[w]:36} {p:10.0f} {s:10.0f} {s / p:6.2f}x"
                f" {s2:10.0f} {s2 / p:6.2f}x{mark:1}"
            )
        print(
            "swift: as it ships on Linux, on the system SQLite (Debian compiles it from"
            " separate source files: slower per statement)\n"
            "swift*: the same Swift on Python's own SQLite objects, so only the binding"
            " differs\n"
            "goal (issue 20, ADR 18): swift* >= 0.9x python on each; '!' marks a miss"
        )


if __name__ == "__main__":
    main()
