"""Queue metrics counted in the file (ADR 27): :meth:`Queue.metrics`,
:meth:`Database.metrics` and :meth:`Database.metrics_text`.

Every process and language counts into the same rows, so the numbers are the
whole file's: a rolled-back enqueue counts nothing. A process writes its counts
at most a second after they commit, at close and at exit (a killed process
loses its last second of counts, never a job); it reads its own at once.
They are cumulative; compute rates from two readings (as Prometheus does).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LatencyHistogram:
    """Claim latency: from when a job was due to when it was claimed."""

    buckets: tuple[tuple[float | None, int], ...]
    """Cumulative ``(upper bound in seconds, claims up to it)``; the last
    bound is ``None`` (+Inf) and its count is :attr:`count`."""
    sum: float
    """The latencies' sum, seconds."""
    count: int
    """How many claims."""


@dataclass(frozen=True)
class QueueMetrics:
    """One queue's counters since the file was created (or reached schema
    10), and its jobs by state now."""

    queue: str
    enqueued: int
    """Jobs enqueued (a dedupe hit that returned the live job is not)."""
    claimed: int
    """Claims (a job claimed again after a retry or a lapsed lease counts again)."""
    acked: int
    retried: int
    """Given back by a worker for another attempt."""
    reclaimed: int
    """Taken back after their lease lapsed (the worker died or stalled)."""
    dead: int
    """Dead-lettered."""
    expired: int
    cancelled: int
    claim_latency: LatencyHistogram
    ready: int
    """Jobs due and waiting for a worker now."""
    scheduled: int
    running: int
    dead_letters: int
    """Dead letters kept now."""

    @classmethod
    def _from(cls, d: dict[str, Any]) -> QueueMetrics:
        t, lat, jobs = d["totals"], d["claim_latency"], d["jobs"]
        return cls(
            queue=d["queue"],
            enqueued=t["enqueued"],
            claimed=t["claimed"],
            acked=t["acked"],
            retried=t["retried"],
            reclaimed=t["reclaimed"],
            dead=t["dead"],
            expired=t["expired"],
            cancelled=t["cancelled"],
            claim_latency=LatencyHistogram(
                buckets=tuple((b["le_seconds"], b["count"]) for b in lat["buckets"]),
                sum=lat["sum_seconds"],
                count=lat["count"],
            ),
            ready=jobs["ready"],
            scheduled=jobs["scheduled"],
            running=jobs["running"],
            dead_letters=jobs["dead"],
        )


def from_json(text: str) -> list[QueueMetrics]:
    return [QueueMetrics._from(d) for d in json.loads(text)]
