"""Switching from Honker: a file written by Honker 0.2.4 from PyPI (its own
Python API, in its own venv: HONKER024_PYTHON, which scripts/test.sh sets
up) is refused by honker.open, refused for import while a Honker process
has it open, then imported and drained by this binding and by SQL through
the stdlib sqlite3 module: ids kept, each consumer resumes at the right
event, each schedule's next fire unchanged, the held lock held; a second
import changes nothing."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import honker
import pytest

HONKER024 = os.environ.get("HONKER024_PYTHON")
if not HONKER024 and os.environ.get("CI"):
    raise RuntimeError("HONKER024_PYTHON must name a Python with honker==0.2.4 in CI")
pytestmark = pytest.mark.skipif(
    not HONKER024, reason="HONKER024_PYTHON (a Python with honker==0.2.4) is not set"
)

# Runs under Honker 0.2.4. `write` fills the file through Honker's API and
# prints what it made; `hold` opens it and waits (a Honker process between
# jobs) until its stdin closes.
WRITER = r"""
import json, sys, time
import honker

path, mode = sys.argv[1], sys.argv[2]
db = honker.open(path)
if mode == "hold":
    db.queue("emails")
    print("ready", flush=True)
    sys.stdin.read()
    sys.exit(0)

q = db.queue("emails", max_attempts=3)
ids = {}
for name in ("held", "dies", "done", "retried"):
    ids[name] = q.enqueue({"to": name})
jobs = q.claim_batch("honker-w1", 4)
assert len(jobs) == 4, jobs
for job in jobs:
    what = job.payload["to"]
    if what == "done":
        q.save_result(job.id, {"sent": True})
        assert job.ack()
    elif what == "dies":
        assert job.fail("smtp 550")
    elif what == "retried":
        assert job.retry(delay_s=600, error="busy")
ids["ready"] = q.enqueue({"to": "ready"}, priority=5)
ids["later"] = q.enqueue({"to": "later"}, delay=3600)
ids["expires"] = q.enqueue({"to": "expires"}, expires=1)
time.sleep(2.2)
assert q.sweep_expired() == 1

orders, audit = db.stream("orders"), db.stream("audit")
keys = ["o1", "o2", "o1", None, "o3"]
for i, key in enumerate(keys):
    orders.publish({"n": i + 1}, key=key)
    if i < 3:
        audit.publish({"a": i + 1})
o = [e["offset"] for e in orders._read_since(0)]
a = [e["offset"] for e in audit._read_since(0)]
orders.save_offset("billing", o[2])
orders.save_offset("search", o[0])
audit.save_offset("billing", a[1])

sched = honker.Scheduler(db)
sched.add(name="friday13", queue="reports", schedule=honker.crontab("0 9 13 * 5"),
          payload={"r": 1})
sched.add(name="every5", queue="pings", schedule=honker.every_s(300))
sched.pause("every5")
db.lock("reindex", ttl=3600, owner="node-a").__enter__()

with db.transaction() as tx:
    fires = {r["name"]: r["next_fire_at"]
             for r in tx.query("SELECT name, next_fire_at FROM _honker_scheduler_tasks")}
    lock_expires = tx.query("SELECT expires_at FROM _honker_locks")[0]["expires_at"]
print(json.dumps({"ids": ids, "fires": fires, "lock_expires": lock_expires}))
"""


def honker024(path: Path, mode: str, **kw: Any) -> subprocess.Popen[str]:
    assert HONKER024
    return subprocess.Popen(
        [HONKER024, "-c", WRITER, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        **kw,
    )


def written_by_honker(path: Path) -> dict[str, Any]:
    p = honker024(path, "write")
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    made: dict[str, Any] = json.loads(out)
    return made


def dump(path: Path) -> list[Any]:
    """Every object and row of the file (read with the stdlib module)."""
    c = sqlite3.connect(path)
    try:
        out: list[Any] = []
        for kind, name in c.execute("SELECT type, name FROM sqlite_master ORDER BY name"):
            out.append((kind, name))
            if kind == "table":
                out.append(sorted(map(repr, c.execute(f'SELECT * FROM "{name}"'))))
        return out
    finally:
        c.close()


def test_a_honker_024_file_is_imported_and_drained(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    made = written_by_honker(path)
    ids = made["ids"]

    # honker does not touch Honker's tables on open.
    before = dump(path)
    with pytest.raises(honker.Unsafe, match="import_honker"):
        honker.open(path)
    assert dump(path) == before

    # Not while a Honker process has the file open.
    holder = honker024(path, "hold")
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    try:
        with pytest.raises(honker.Unsafe, match=f"pid {holder.pid}"):
            honker.import_honker(path)
        dry = honker.import_honker(path, dry_run=True)
        assert any(f"pid {holder.pid}" in h for h in dry["holders"]), dry
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert dump(path) == before

    report = honker.import_honker(path, time_zone="America/New_York")
    assert report["jobs"] == {"ready": 1, "scheduled": 2, "running": 1}, report
    assert (report["dead"], report["expired"], report["results"]) == (1, 1, 1), report
    assert (report["streams"], report["events"], report["consumers"]) == (2, 8, 3), report
    assert (report["schedules"], report["locks"]) == (2, 1), report
    assert report["process_check"] == "proc-locks"
    notes = [(n["name"], n["note"]) for n in report["schedule_notes"]]
    assert any(name == "friday13" and "AND" in note for name, note in notes), notes
    # Honker 0.2.4 wrote its wake-up notifications: listed, not imported.
    assert [n["what"] for n in report["not_imported"]] == ["notifications"], report

    t0 = time.time()
    clock = honker.ManualClock(now=t0)
    db = honker.open(path, clock=clock)
    try:
        q = db.queue("emails")
        # Only the ready job is due; its id is Honker's.
        jobs = q.claim_batch("us", 10)
        assert [j.id for j in jobs] == [ids["ready"]]
        assert jobs[0].payload == {"to": "ready"}
        jobs[0].ack()
        held = q.get_job(ids["held"])
        assert (held.state, held.attempts) == ("running", 1)
        retried = q.get_job(ids["retried"])
        # (Honker keeps no error on a retried job: there is none to move.)
        assert (retried.state, retried.attempts) == ("scheduled", 1)
        dead = {j.id: j.last_error for j in q.dead_letters()}
        assert dead == {ids["dies"]: "smtp 550"}
        assert q.get_job(ids["expires"]).state == "expired"
        assert q.get_result(ids["done"]) == {"sent": True}
        # A new job's id comes after every id Honker handed out.
        new_id = q.enqueue({"to": "new"}).id
        assert new_id > max(ids.values())

        # Each consumer resumes at the event after the last it processed.
        orders = db.stream("orders")
        assert orders.position("billing") == 4
        assert [e.payload for e in orders.read(after=3)] == [{"n": 4}, {"n": 5}]
        assert [e.key for e in orders.read()] == ["o1", "o2", "o1", None, "o3"]
        assert orders.position("search") == 2
        assert db.stream("audit").position("billing") == 3
        sub = orders.subscribe("billing")
        try:
            first = sub.next(wait=1.0)
            assert first is not None and first.payload == {"n": 4}
        finally:
            sub.close()

        # Each schedule's next fire is Honker's; Honker's meaning is kept.
        rows = db.query(
            "SELECT name, next_fire_at, paused, day_rule, time_zone FROM _honker_schedules"
            " ORDER BY name"
        )
        assert [tuple(r) for r in rows] == [
            ("every5", made["fires"]["every5"] * 1000, 1, "and", "America/New_York"),
            ("friday13", made["fires"]["friday13"] * 1000, 0, "and", "America/New_York"),
        ]
        info = db.lock("reindex").info()
        assert info is not None and (info.owner, info.token) == ("node-a", 1)
        assert info.expires_at.timestamp() == made["lock_expires"]

        # Drained: two hours on, the lapsed lease and the delayed jobs come.
        clock.advance(7200)
        rest = q.claim_batch("us", 10)
        assert sorted(j.id for j in rest) == sorted(
            [ids["held"], ids["retried"], ids["later"], new_id]
        )
        for j in rest:
            j.ack()
    finally:
        db.close()

    # SQL through the stdlib module: Honker's functions read what moved.
    c = sqlite3.connect(path)
    try:
        honker.load_extension(c)
        assert json.loads(
            c.execute("SELECT honker_result_get(?)", [ids["done"]]).fetchone()[0]
        ) == {"sent": True}
        assert c.execute("SELECT honker_stream_get_offset('billing', 'orders')").fetchone()[0] == 3
        assert c.execute("SELECT count(*) FROM _honker_dead").fetchone()[0] == 2
        # A second import finds nothing and changes nothing.
        before = dump(path)
        again = json.loads(c.execute("SELECT honker_import_honker()").fetchone()[0])
        assert again["found"] == []
        assert dump(path) == before
    finally:
        c.close()
    assert honker.import_honker(path)["found"] == []


def test_bad_import_arguments_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(honker.InvalidArgument):
        honker.import_honker(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    path = tmp_path / "app.db"
    written_by_honker(path)
    before = dump(path)
    with pytest.raises(honker.InvalidArgument, match="time zone"):
        honker.import_honker(path, time_zone="Nowhere/Atlantis")
    assert dump(path) == before
