"""The ``honker`` command the package installs (the operator's command of
the Rust crate, run inside the native module): it sees what this binding
wrote, keeps the binary's exit codes and stderr, is what ``python -m
honker`` runs, and stops on Ctrl-C at once while it waits."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import honker

HONKER = str(Path(sys.executable).parent / "honker")


def run(*args: str, via_python: bool = False) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "honker"] if via_python else [HONKER]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60)


def test_status_and_jobs_see_what_python_wrote_and_change_nothing(path: Path) -> None:
    db = honker.open(path)
    q = db.queue("emails")
    ids = [q.enqueue({"to": f"u{n}"}).id for n in range(3)]
    q.enqueue({"to": "later"}, delay=3600)
    s = db.stream("orders")
    s.publish({"n": 1})
    s.commit("billing", 2)  # the next event to read (Kafka's rule)
    db.close()
    before = path.read_bytes()
    status = json.loads(run("status", str(path), "--json").stdout)
    assert status["queues"] == [
        {
            "name": "emails",
            "ready": 3,
            "scheduled": 1,
            "running": 0,
            "dead": 0,
            "oldest_ready_age_ms": status["queues"][0]["oldest_ready_age_ms"],
            "paused": None,
            "max_running": None,
            "max_running_per_key": None,
            "round_robin": False,
            "key_limit": None,
            "key_per_ms": None,
        }
    ]
    assert status["streams"][0]["consumers"] == [{"name": "billing", "next_offset": 2, "lag": 0}]
    listed = json.loads(run("jobs", "list", str(path), "--state", "ready", "--json").stdout)
    assert [j["id"] for j in listed] == ids
    assert [j["payload"] for j in listed] == [{"to": "u0"}, {"to": "u1"}, {"to": "u2"}]
    # `python -m honker` is the same command.
    assert json.loads(run("jobs", "list", str(path), "--json", via_python=True).stdout) == (
        json.loads(run("jobs", "list", str(path), "--json").stdout)
    )
    assert path.read_bytes() == before, "a read command changed the file"


def test_write_commands_and_exit_codes(path: Path) -> None:
    honker.open(path).close()
    done = run("enqueue", str(path), "emails", '{"to": "z"}')
    assert done.returncode == 0, done.stderr
    job_id = int(done.stdout)
    db = honker.open(path)
    assert db.queue("emails").get_job(job_id).payload == {"to": "z"}
    db.close()
    bad = run("enqueue", str(path), "emails", "{not json")
    assert (bad.returncode, bad.stderr.split(":")[:2]) == (1, ["honker", " INVALID_ARGUMENT"])
    missing = run("jobs", "show", str(path), "99")
    assert missing.returncode == 1 and missing.stderr.startswith("honker: NOT_FOUND: ")
    usage = run("jobs", "frobnicate", str(path))
    assert usage.returncode == 2 and "frobnicate" in usage.stderr
    assert run("--version").stdout.strip() == f"honker {honker.__version__}"
    absent = run("status", str(path.parent / "absent.db"))
    assert absent.returncode == 1
    assert not (path.parent / "absent.db").exists(), "a read command created a file"


def test_doctor_names_a_process_with_two_sqlite_libraries(path: Path) -> None:
    # A real one: this package (its own SQLite inside _native) and the
    # system's libsqlite3 (the stdlib module's, loaded by name so it is there
    # whatever the stdlib links) in one process, both with the file open.
    honker.open(path).close()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import ctypes, ctypes.util, sqlite3, sys, honker\n"
            "ctypes.CDLL(ctypes.util.find_library('sqlite3'))\n"
            "c = sqlite3.connect(sys.argv[1])\n"
            "c.execute('SELECT count(*) FROM _honker_jobs').fetchall()\n"
            "db = honker.open(sys.argv[1])\n"
            "print('ready', flush=True)\n"
            "sys.stdin.read()\n",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        done = run("doctor", str(path), "--json")
        # Ok, and says why: on Linux honker guards the file with OFD locks
        # (ADR 13; issue 53: it warned for every Python honker process).
        assert done.returncode == 0, done.stderr
        checks = {c["check"]: c for c in json.loads(done.stdout)}
        libs = checks["SQLite libraries"]
        assert libs["level"] == "ok", libs
        assert "open-file-description locks" in libs["detail"], libs
        assert f"pid {child.pid}:" in libs["detail"], libs
        assert "libsqlite3" in libs["detail"] and "_native" in libs["detail"], libs
        assert f"pid {child.pid}" in checks["processes"]["detail"]
    finally:
        child.kill()
        child.wait()
    # Alone, the same process is fine.
    done = run("doctor", str(path), "--json")
    checks = {c["check"]: c for c in json.loads(done.stdout)}
    assert checks["SQLite libraries"]["level"] == "ok", checks
    # A plain honker process maps one library: `import honker` does not
    # import the stdlib's sqlite3 (it did, and doctor named every one).
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, honker\n"
            "db = honker.open(sys.argv[1])\n"
            "print('sqlite3' in sys.modules, flush=True)\n"
            "sys.stdin.read()\n",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "False"
        checks = {c["check"]: c for c in json.loads(run("doctor", str(path), "--json").stdout)}
        assert f"pid {child.pid}" in checks["processes"]["detail"], checks
        libs = checks["SQLite libraries"]
        assert libs["detail"] == "each process maps one SQLite library", libs
    finally:
        child.kill()
        child.wait()


def test_ctrl_c_ends_listen_at_once(path: Path) -> None:
    honker.open(path).close()
    proc = subprocess.Popen(
        [HONKER, "listen", str(path), "changes"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None and proc.stdout is not None
        assert "listening" in proc.stderr.readline()
        db = honker.open(path)
        db.notify("changes", {"n": 1})
        db.close()
        assert json.loads(proc.stdout.readline().split(" ", 1)[1]) == {"n": 1}
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=5)
        assert time.monotonic() - started < 2, "Ctrl-C waited for the listen to return"
        assert proc.returncode == -signal.SIGINT
    finally:
        proc.kill()
