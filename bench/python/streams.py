"""The streams and pub/sub benchmark: honker's Python binding next to Honker
0.2.4 from PyPI, in the same run, each library in its own processes.

    python bench/python/streams.py [--smoke] [--honker024 PYTHON]

Measures publish with one event per transaction and with 1,000 per
transaction, an independent consumer's read throughput (asyncio, auto-commit
on, each payload read), notify -> listener and publish -> subscriber latency to 1 and to 4
listening processes (p50/p99), and the CPU an idle listener uses.

Latency is bracketed as in the core benchmark's W6: the sender reads the
clock just before its notify/publish call and just after it returns, the
receiver when the item reaches its loop. "From the commit" (receipt minus the
call's return) is the wake-up path; "from the call" adds the sender's whole
write transaction, which on an idle machine costs far more than a busy one
(a 15 us SQLite commit takes ~150 us after a 5 ms sleep here, in plain
sqlite3 too), and is the same work for both libraries. asyncio on
both sides: what a Python service runs. `--smoke` runs tiny counts to check
the benchmark works (scripts/test.sh); its numbers mean nothing. Ratios are
the result; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run import fresh  # bench/python/run.py: a fresh file in the scratch folder

SCALES = {
    "full": {
        "publish1": 3_000,
        "publish1000": 50_000,
        "read": 100_000,
        "latency": 300,
        "idle_s": 5.0,
    },
    "smoke": {
        "publish1": 20,
        "publish1000": 2_000,
        "read": 2_000,
        "latency": 5,
        "idle_s": 0.2,
    },
}


# ----- the libraries, as their documented APIs use them ---------------------


class Ours:
    def __init__(self, path: str) -> None:
        import honker

        self.db = honker.open(path)
        self.s = self.db.stream("bench")

    def publish(self, p) -> None:
        self.s.publish(p)

    def publish_batch(self, ps) -> None:
        self.s.publish_many(ps)

    def subscribe(self, consumer: str, latest: bool):
        return self.s.subscribe(
            consumer, start="latest" if latest else "beginning", wait=1.0
        )

    def listen(self, channel: str):
        return self.db.listen(channel)

    def notify(self, channel: str, p) -> None:
        self.db.notify(channel, p)


class Honker024:
    def __init__(self, path: str) -> None:
        import honker

        self.db = honker.open(path)
        self.s = self.db.stream("bench")

    def publish(self, p) -> None:
        self.s.publish(p)

    def publish_batch(self, ps) -> None:
        with self.db.transaction() as tx:
            for p in ps:
                self.s.publish(p, tx=tx)

    def subscribe(self, consumer: str, latest: bool):
        return self.s.subscribe(consumer=consumer)

    def listen(self, channel: str):
        return self.db.listen(channel)

    def notify(self, channel: str, p) -> None:
        with self.db.transaction() as tx:
            tx.notify(channel, p)


LIBRARIES = {"honker": Ours, "honker024": Honker024}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(library: str, workload: str, path: str, n: int, extra: str) -> dict:
    """One measurement in this process; its result is the last stdout line."""
    lib = LIBRARIES[library](path)
    if workload == "publish1":
        t = time.perf_counter()
        for i in range(n):
            lib.publish({"i": i})
        return {"ops": n, "seconds": time.perf_counter() - t}
    if workload == "publish1000":
        t = time.perf_counter()
        for start in range(0, n, 1000):
            lib.publish_batch([{"i": i} for i in range(start, min(n, start + 1000))])
        return {"ops": n, "seconds": time.perf_counter() - t}
    if workload == "fill":
        for start in range(0, n, 1000):
            lib.publish_batch([{"i": i} for i in range(start, min(n, start + 1000))])
        return {}
    if workload == "read":

        async def read() -> float:
            t = time.perf_counter()
            got = 0
            async for e in lib.subscribe("reader", latest=False):
                got += e.payload["i"] >= 0  # a consumer reads the payload
                if got == n:
                    break
            return time.perf_counter() - t

        return {"ops": n, "seconds": asyncio.run(read())}
    if workload in ("hear", "subscriber"):
        # A listening process: prints "ready" once listening, then when
        # each of n messages arrived (by the sender's number in the payload).

        async def hear() -> list[float]:
            it = (
                lib.listen("bench")
                if workload == "hear"
                else lib.subscribe(extra, latest=True)
            )
            print("ready", flush=True)
            got: dict[int, int] = {}
            async for m in it:
                got[m.payload["i"]] = time.time_ns()
                if len(got) == n:
                    break
            return got

        return {"arrived_ns": asyncio.run(hear())}
    if workload in ("notify", "publish"):
        sent = {}
        for i in range(n):
            before = time.time_ns()
            p = {"i": i}
            lib.notify("bench", p) if workload == "notify" else lib.publish(p)
            sent[i] = (before, time.time_ns())
            time.sleep(0.005)
        return {"sent_ns": sent}
    if workload == "idle":
        # A listener with nothing to hear for n ms: the CPU its wait costs.

        async def idle() -> float:
            listener = lib.listen("quiet")

            async def wait() -> None:
                async for _ in listener:
                    pass

            task = asyncio.ensure_future(wait())
            await asyncio.sleep(0.5)  # settled: watcher started
            c0, t0 = cpu(), time.monotonic()
            await asyncio.sleep(n / 1000)
            used = (cpu() - c0) / (time.monotonic() - t0)
            task.cancel()
            return used

        return {"cpu_fraction": asyncio.run(idle())}
    raise SystemExit(f"unknown workload {workload}")


# ----- the runner ----------------------------------------------------------


def run(
    python: str, library: str, workload: str, path: Path, n: int, extra: str = ""
) -> dict:
    out = subprocess.run(
        [python, __file__, "child", library, workload, str(path), str(n), extra],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"{library} {workload} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def latency(
    python: str, library: str, kind: str, listeners: int, tmp: Path, n: int
) -> tuple[list[float], list[float]]:
    """(from the commit, from the call) in ms, over every listener."""
    path = fresh(tmp, f"{library}-{kind}-{listeners}")
    run(python, library, "fill", path, 0)  # creates the file (and Honker's schema)
    hear = "hear" if kind == "notify" else "subscriber"
    procs = [
        subprocess.Popen(
            [python, __file__, "child", library, hear, str(path), str(n), f"c{i}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(listeners)
    ]
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"{library} {hear} did not start")
    sent = run(python, library, kind, path, n)["sent_ns"]
    commit: list[float] = []
    call: list[float] = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        for i, at in json.loads(out.strip().splitlines()[-1])["arrived_ns"].items():
            before, after = sent[i]
            commit.append((at - after) / 1e6)
            call.append((at - before) / 1e6)
    return commit, call


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        _, _, library, workload, path, n, *rest = sys.argv
        print(
            json.dumps(child(library, workload, path, int(n), rest[0] if rest else ""))
        )
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--honker024", help="a Python with honker==0.2.4 installed")
    args = ap.parse_args()
    scale = SCALES["smoke" if args.smoke else "full"]
    libs = [("honker", sys.executable)]
    if args.honker024:
        libs.append(("honker024", args.honker024))
    rows: list[tuple[str, dict[str, float], str]] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for w in ("publish1", "publish1000"):
            rates = {
                lib: (lambda r: r["ops"] / r["seconds"])(
                    run(py, lib, w, fresh(tmp, f"{lib}-{w}"), scale[w])
                )
                for lib, py in libs
            }
            rows.append((f"{w} (events/s)", rates, "higher"))
        rates = {}
        for lib, py in libs:
            path = fresh(tmp, f"{lib}-read")
            run(py, lib, "fill", path, scale["read"])
            r = run(py, lib, "read", path, scale["read"])
            rates[lib] = r["ops"] / r["seconds"]
        rows.append(("independent read (events/s)", rates, "higher"))
        for kind in ("notify", "publish"):
            for listeners in (1, 4):
                lats = {
                    lib: latency(py, lib, kind, listeners, tmp, scale["latency"])
                    for lib, py in libs
                }
                what = f"{kind} -> {listeners} process{'es' if listeners > 1 else ''}"
                for side, since in ((0, "commit"), (1, "call")):
                    for q, label in ((0.5, "p50"), (0.99, "p99")):
                        rows.append(
                            (
                                f"{what} {label} from {since} (ms)",
                                {k: pct(v[side], q) for k, v in lats.items()},
                                "lower",
                            )
                        )
        idle = {
            lib: 100
            * run(
                py, lib, "idle", fresh(tmp, f"{lib}-idle"), int(scale["idle_s"] * 1000)
            )["cpu_fraction"]
            for lib, py in libs
        }
        rows.append(("idle listener CPU (% of a core)", idle, "lower"))
    print(f"{'measure':48} {'honker':>12} {'Honker 0.2.4':>14} {'ratio':>8}")
    for name, v, better in rows:
        ours, old = v["honker"], v.get("honker024")
        if old is None:
            print(f"{name:48} {ours:12.3f}")
            continue
        # The ratio reads "times better than Honker 0.2.4" either way.
        ratio = (
            (ours / old if better == "higher" else old / ours)
            if ours and old
            else float("nan")
        )
        print(f"{name:48} {ours:12.3f} {old:14.3f} {ratio:7.2f}x")


if __name__ == "__main__":
    main()
