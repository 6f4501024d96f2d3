"""The instruction-count check: instructions per job of W1–W4 through core
(target/release/honker-bench) and through the Python binding, counted by
callgrind, against the committed baseline (bench/instr/baseline.json).

    python bench/instr/check.py --bench target/release/honker-bench
        [--update] [--runs K] [--only core/W1,python/W3] [--self-test]

Each workload runs twice under ``valgrind --tool=callgrind``, at N and 2N
jobs, in a fresh process on a fresh copy of the same file; instructions per
job are (I(2N) − I(N)) / N, so start-up, imports and opening the file cancel
out. Callgrind counts every thread of the process (the watcher's, the
pool's), so work moved to a background thread still counts. Python runs
with PYTHONHASHSEED=0.

Figures depend on the toolchain (the machine, rustc, the Python, the
compiler of the wheel's SQLite), so the baseline keeps one set per
toolchain, and a toolchain without one fails. Fails when a figure is more
than 5 % over its baseline, and when one is more
than 3 % under it (the ratchet: a commit that makes a workload cheaper lowers
the baseline with it — ``--update`` writes the figures measured now; say why
in the commit message). ``--runs K`` measures everything K times and prints
the spread. ``--self-test`` adds one statement per job (HONKER_INSTR_EXTRA)
and succeeds only if the check then fails for every workload measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "baseline.json"
WORKLOAD_PY = HERE / "workload.py"
# Jobs per workload (the smaller of the two runs): big enough that the
# difference dwarfs noise, small enough that callgrind takes seconds.
SIZES = {"W1": 500, "W2": 2000, "W3": 500, "W4": 1600}
# Core's W3 commits twice per job, and how much of the WAL the background
# checkpointer copies depends on how its thread and the commits interleave:
# single runs vary by up to 4-5 %, so its figure is the median of five.
RUNS_OF = {"core/W3": 5}
GROW, SHRINK = 0.05, 0.03
WORKLOADS = [f"{s}/{w}" for s in ("core", "python") for w in SIZES]


def command(
    surface: str, bench: str, python: str, workload: str, path: Path, n: int
) -> list:
    if surface == "core":
        if workload == "fill":
            return [bench, "child", "instr-fill", str(path), str(n)]
        return [bench, "child", "instr", str(path), workload, str(n)]
    return [python, str(WORKLOAD_PY), workload, str(path), str(n)]


def instructions(cmd: list, env: dict, out: Path) -> int:
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd],
        capture_output=True,
        text=True,
        env=env,
    )
    if run.returncode != 0:
        raise SystemExit(f"instr: {' '.join(cmd)} failed:\n{run.stderr[-3000:]}")
    m = re.search(r"Collected : (\d+)", run.stderr)
    if not m:
        raise SystemExit(f"instr: no callgrind total in:\n{run.stderr[-2000:]}")
    return int(m.group(1))


def per_job(key: str, bench: str, python: str, env: dict, tmp: Path) -> float:
    surface, workload = key.split("/")
    n = SIZES[workload]
    template = tmp / f"{surface}-{workload}-template.db"
    if not template.exists():
        fill = 2 * n if workload in ("W3", "W4") else 0
        subprocess.run(
            command(surface, bench, python, "fill", template, fill), check=True, env=env
        )
    counts = []
    for size in (n, 2 * n):
        db = tmp / f"{surface}-{workload}-{size}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(template, db)  # the fill closed cleanly: no -wal
        counts.append(
            instructions(
                command(surface, bench, python, workload, db, size),
                env,
                tmp / "callgrind.out",
            )
        )
    return (counts[1] - counts[0]) / n


TOOLCHAIN_PY = """
import os, sys, tempfile, honker
with tempfile.TemporaryDirectory(prefix="honker-instr-") as d:
    db = honker.open(os.path.join(d, "t.db"))
    opts = [r[0] for r in db.query("PRAGMA compile_options")]
    db.close()
cc = [o for o in opts if o.startswith("COMPILER=")]
print(sys.version.split()[0], cc[0][9:] if cc else "?")
"""


def toolchain(python: str, env: dict) -> str:
    """What the figures depend on besides honker's code: the machine, rustc,
    the Python, and the C compiler of the wheel's SQLite (a zig build's
    clang and gcc differ by 4-5 % on W2 and W4). Baselines are kept per
    toolchain."""
    py, cc = subprocess.run(
        [python, "-c", TOOLCHAIN_PY],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    rustc = subprocess.run(
        ["rustc", "--version"], capture_output=True, text=True
    ).stdout
    return (
        f"{platform.machine()}, rustc {rustc.split()[1]}, Python {py}, SQLite by {cc}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="target/release/honker-bench")
    ap.add_argument(
        "--python", default=sys.executable, help="a Python with honker installed"
    )
    ap.add_argument(
        "--update", action="store_true", help="write the figures as the baseline"
    )
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", help="comma-separated, e.g. core/W1,python/W3")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    keys = args.only.split(",") if args.only else WORKLOADS
    unknown = set(keys) - set(WORKLOADS)
    if unknown:
        raise SystemExit(
            f"instr: unknown workloads {sorted(unknown)}; known: {WORKLOADS}"
        )
    if shutil.which("valgrind") is None:
        raise SystemExit(
            "instr: valgrind is not installed (scripts/deps.sh installs it)"
        )
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("HONKER_INSTR_EXTRA", None)
    if args.self_test:
        env["HONKER_INSTR_EXTRA"] = "1"
    baseline = (
        json.loads(BASELINE.read_text()) if BASELINE.exists() else {"toolchains": {}}
    )
    key = toolchain(args.python, env)
    print(f"toolchain: {key}")
    known = baseline["toolchains"]
    figures = known.get(key, {})
    measured: dict[str, float] = {}
    failures = []
    print(f"{'workload':<12}{'instr/job':>12}{'baseline':>12}{'change':>9}")
    with tempfile.TemporaryDirectory(prefix="honker-instr-") as d:
        for name in keys:
            times = max(args.runs, RUNS_OF.get(name, 1))
            runs = [
                per_job(name, args.bench, args.python, env, Path(d))
                for _ in range(times)
            ]
            value = measured[name] = sorted(runs)[len(runs) // 2]
            line = f"{name:<12}{value:>12.0f}"
            base = figures.get(name)
            if base:
                change = value / base - 1
                line += f"{base:>12.0f}{change:>+8.1%}"
                if change > GROW:
                    failures.append(
                        f"{name} grew {change:+.1%} over its baseline (limit +5 %)"
                    )
                elif change < -SHRINK:
                    failures.append(
                        f"{name} fell {change:+.1%} under its baseline: lower the baseline "
                        "in this commit (bench/instr/check.py --update), the ratchet"
                    )
            if times > 1:
                spread = (max(runs) - min(runs)) / min(runs)
                line += f"   runs {', '.join(f'{r:.0f}' for r in runs)}: spread {spread:.2%}"
            print(line, flush=True)
    if args.self_test:
        caught = [k for k in keys if any(f.startswith(f"{k} grew") for f in failures)]
        missed = sorted(set(keys) - set(caught))
        if missed:
            raise SystemExit(
                f"instr self-test: one extra statement per job went unnoticed: {missed}"
            )
        print(
            f"instr self-test: one extra statement per job fails the check ({len(caught)} workloads)"
        )
        return
    if args.update:
        figures.update({k: round(v) for k, v in measured.items()})
        known[key] = dict(sorted(figures.items()))
        BASELINE.write_text(json.dumps({"toolchains": known}, indent=2) + "\n")
        print(f"instr: wrote {BASELINE.relative_to(HERE.parent.parent)} for {key}")
        return
    missing = [k for k in keys if k not in figures]
    if missing:
        failures.append(
            f"no baseline for {missing} on this toolchain ({key}; known: {sorted(known)}): "
            "measure it here with --update and commit it"
        )
    if failures:
        raise SystemExit("instr: " + "\n       ".join(failures))


if __name__ == "__main__":
    main()
