"""The workload that tests-faults/run.py runs under strace, which kills it
(SIGKILL) or fails one write (ENOSPC, EIO) at a chosen pwrite64 call.

An application on honker, logging every unit of work before it starts
("try M") and after its commit returned OK ("ok M"), one write() each, so
the log survives a SIGKILL. It holds the paths an earlier crash sweep
lacked:

(a) a transaction that spills a few MB and rolls back, after which a second
    writer in another process (run.py, with Debian's stdlib sqlite3) commits
    before honker writes again: the workload prints SYNC and waits for a line
    on stdin;
(b) statements with a statement journal (a multi-row UPDATE, INSERT ...
    SELECT, an enqueue in its savepoint) inside a transaction whose pages
    spill, so that they are the ones that meet an injected error; the
    application catches the error and commits anyway.

Errors honker reports (HonkerError but InternalError) are caught and the
work goes on; anything else ends the process with a traceback (a failure).

Usage: workload.py DB LOG
"""

from __future__ import annotations

import os
import sys

import honker


class Log:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())


def unit(log: Log, marker: str, work) -> bool:
    """One unit of work: logged before, and after its commit returned OK.
    Whether it did."""
    log(f"try {marker}")
    try:
        work()
    except honker.InternalError:
        raise
    except honker.HonkerError as e:
        log(f"error {marker} {e.code}")
        return False
    log(f"ok {marker}")
    return True


def outbox(db, q, marker: str) -> None:
    """A business row, its job and its event, in one transaction."""
    with db.transaction() as tx:
        tx.execute("INSERT INTO ledger (marker, writer) VALUES (?, 'A')", [marker])
        q.enqueue({"m": marker}, tx=tx)
        db.stream("events").publish({"m": marker}, tx=tx)


def project(db, log: Log) -> None:
    """An independent consumer whose projection row ("read:M") and offset
    commit in one transaction, event by event."""
    try:
        sub = db.stream("events").subscribe("projector", auto_commit=False)
        events = [e for e in iter(lambda: sub.next(wait=0), None)][:5]
    except honker.InternalError:
        raise
    except honker.HonkerError as e:
        log(f"error subscribe {e.code}")
        return
    for event in events:

        def read(event=event) -> None:
            with db.transaction() as tx:
                tx.execute(
                    "INSERT INTO ledger (marker, writer) VALUES (?, 'A')",
                    [f"read:{event.payload['m']}"],
                )
                sub.commit(event, tx=tx)

        # A commit after a later event would pass the failed one: stop.
        if not unit(log, f"read:{event.payload['m']}", read):
            return


def main() -> None:
    path, log_path = sys.argv[1], sys.argv[2]
    log = Log(log_path)
    try:
        db = honker.open(path)
    except honker.InternalError:
        raise
    except honker.HonkerError as e:
        # An application that cannot start; the other writer still runs.
        log(f"error open {e.code}")
        print("SYNC", flush=True)
        sys.stdin.readline()
        log("done")
        return
    q = db.queue("work")

    # (a) the first write transaction after open spills a few MB (default page
    # cache) and rolls back; then the other writer commits.
    log("try big")
    try:
        with db.transaction() as tx:
            for i in range(2500):
                tx.execute(
                    "INSERT INTO ledger (marker, writer, v) VALUES (?, 'A', randomblob(1000))",
                    [f"big{i}"],
                )
            raise RuntimeError("declined")
    except RuntimeError:
        pass
    except honker.InternalError:
        raise
    except honker.HonkerError as e:
        log(f"error big {e.code}")
    print("SYNC", flush=True)
    sys.stdin.readline()  # the other writer has committed
    # A small page cache from here on: transactions spill frames to the WAL
    # before their commit, so writes happen inside statements, not only at
    # COMMIT.
    db.execute("PRAGMA cache_size = 20")
    for i in range(14):
        unit(log, f"o{i}", lambda m=f"o{i}": outbox(db, q, m))

    # (b) statement-journal statements inside a spilling transaction; the
    # application catches their errors and commits what it has.
    for k in range(3):
        marker = f"s{k}"

        def statements(marker: str = marker, k: int = k) -> None:
            with db.transaction() as tx:
                tx.execute(
                    "INSERT INTO ledger (marker, writer) VALUES (?, 'A')", [marker]
                )
                for stmt, params in (
                    (
                        "INSERT INTO bulk (k, v) SELECT ?, randomblob(600) "
                        "FROM (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL "
                        "SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 "
                        "UNION ALL SELECT 8), (SELECT 1 UNION ALL SELECT 2 UNION ALL "
                        "SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5)",
                        [k],
                    ),
                    ("UPDATE bulk SET v = randomblob(700) WHERE k <= ?", [k]),
                ):
                    try:
                        tx.execute(stmt, params)
                    except (honker.SqliteError, honker.RolledBack) as e:
                        log(f"caught {marker} stmt {e.code}")
                try:
                    q.enqueue_many([{"m": f"{marker}-{j}"} for j in range(20)], tx=tx)
                except (honker.SqliteError, honker.RolledBack) as e:
                    log(f"caught {marker} enqueue {e.code}")

        unit(log, marker, statements)

    # Claims, and acks that commit with their effect.
    for _ in range(3):
        try:
            jobs = q.claim_batch("w", 4)
        except honker.InternalError:
            raise
        except honker.HonkerError as e:
            log(f"error claim {e.code}")
            continue
        for job in jobs:
            m = job.payload["m"]

            def ack(job=job, m=m) -> None:
                with db.transaction() as tx:
                    tx.execute(
                        "INSERT INTO ledger (marker, writer) VALUES (?, 'A')",
                        [f"ack:{m}"],
                    )
                    job.ack(tx=tx)

            unit(log, f"ack:{m}", ack)

    project(db, log)
    for i in range(14, 18):
        unit(log, f"o{i}", lambda m=f"o{i}": outbox(db, q, m))
    try:
        db.close()
    except honker.InternalError:
        raise
    except honker.HonkerError as e:
        log(f"error close {e.code}")
    log("done")


if __name__ == "__main__":
    main()
