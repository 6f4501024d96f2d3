"""One Python workload for the instruction-count check (check.py), run under
callgrind: honker's binding only, `COUNT` jobs on the file at `PATH`.

    python workload.py fill|W1|W2|W3|W4 PATH COUNT

`fill` (not measured) enqueues COUNT jobs for W3/W4. With
HONKER_INSTR_EXTRA=1, one extra statement per job (a point read of the jobs
table, the cheapest statement honker's verbs run): the check's self-test,
which must fail.
"""

from __future__ import annotations

import os
import sys

import honker

WORKER = "instr"


def payload(i: int) -> dict:
    return {"to": f"user{i}@example.com", "template": "order-confirmed"}


def main() -> None:
    workload, path, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    db = honker.open(path)
    q = db.queue("emails")
    if os.environ.get("HONKER_INSTR_EXTRA"):
        for i in range(count):
            db.query("SELECT state FROM _honker_jobs WHERE id = ?", [i])
    if workload == "fill":
        for start in range(0, count, 1000):
            q.enqueue_many([payload(i) for i in range(start, min(count, start + 1000))])
    elif workload == "W1":
        for i in range(count):
            q.enqueue(payload(i))
    elif workload == "W2":
        for b in range(count // 1000):
            q.enqueue_many([payload(b * 1000 + i) for i in range(1000)])
    elif workload == "W3":
        for _ in range(count):
            (job,) = q.claim_batch(WORKER, 1)
            job.ack()
    elif workload == "W4":
        for _ in range(count // 32):
            jobs = q.claim_batch(WORKER, 32)
            assert len(jobs) == 32
            q.ack_many(jobs)
    else:
        raise SystemExit(f"unknown workload {workload}")


if __name__ == "__main__":
    main()
