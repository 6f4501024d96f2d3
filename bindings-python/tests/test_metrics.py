"""Queue metrics from Python (ADR 27): what this binding does is counted in
the file with what other processes count (one that exits without closing
writes its counts at exit); the Prometheus text parses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import honker


def test_counts_are_the_files_also_from_a_process_that_never_closed(
    path: Path, clock: honker.ManualClock
) -> None:
    db = honker.open(path, clock=clock)
    q = db.queue("emails")
    q.enqueue({"to": "a"})
    q.enqueue({"to": "b"})
    with db.transaction() as tx:
        q.enqueue({"to": "rolled back"}, tx=tx)
        tx.rollback()
    clock.advance(0.2)
    jobs = q.claim_batch("w", 2)
    jobs[0].ack()
    jobs[1].fail("550")
    # Another process enqueues on the same file and exits without closing.
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import honker, sys\n"
            "db = honker.open(sys.argv[1])\n"
            "q = db.queue('emails')\n"
            "q.enqueue({'to': 'c'})\n",
            str(path),
        ],
        check=True,
    )
    m = q.metrics()
    assert (m.enqueued, m.claimed, m.acked, m.dead, m.retried) == (3, 2, 1, 1, 0)
    assert (m.ready, m.dead_letters) == (1, 1)
    assert m.claim_latency.count == 2
    assert m.claim_latency.sum == 0.4
    assert m.claim_latency.buckets[-1] == (None, 2)
    assert (0.25, 2) in m.claim_latency.buckets and (0.1, 0) in m.claim_latency.buckets
    assert [x.queue for x in db.metrics()] == ["emails"]
    db.close()


def test_metrics_text_parses_with_prometheus_clients_parser(
    path: Path, clock: honker.ManualClock
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    db = honker.open(path, clock=clock)
    q = db.queue("emails")
    q.enqueue({})
    q.enqueue({})
    clock.advance(0.7)
    q.claim_batch("w", 1)[0].ack()
    text = db.metrics_text()
    db.close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # (The parser names a counter's family without its _total suffix.)
    assert {n: f.type for n, f in families.items()} == {
        "honker_jobs": "counter",
        "honker_claim_latency_seconds": "histogram",
        "honker_queue_jobs": "gauge",
    }
    totals = {
        s.labels["event"]: s.value
        for s in families["honker_jobs"].samples
        if s.labels["queue"] == "emails"
    }
    assert (totals["enqueued"], totals["claimed"], totals["acked"]) == (2, 1, 1)
    buckets = {
        s.labels["le"]: s.value
        for s in families["honker_claim_latency_seconds"].samples
        if s.name.endswith("_bucket")
    }
    assert (buckets["0.5"], buckets["1"], buckets["+Inf"]) == (0, 1, 1)
    sums = [
        s.value for s in families["honker_claim_latency_seconds"].samples if s.name.endswith("_sum")
    ]
    assert sums == [0.7]
    assert 'honker_jobs_total{queue="emails",event="enqueued"} 2\n' in text
    assert "# TYPE honker_claim_latency_seconds histogram\n" in text
    for line in text.splitlines():
        if line.startswith("#"):
            assert line.split()[1] in ("HELP", "TYPE")
            continue
        series, value = line.rsplit(" ", 1)
        float(value)
        assert series.endswith("}") and "{" in series
