"""The Python surface of tests-interop: one JSON step per line on stdin, one
JSON answer per line on stdout ({"ok": ...} or {"error": CODE, ...}). The
step vocabulary is in tests-interop/README.md; every driver implements it."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import honker
from opentelemetry import trace as _otel_trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState


def _span(traceparent: str, tracestate: str | None) -> NonRecordingSpan:
    """A producer's span, from its W3C headers (the OpenTelemetry API alone:
    no SDK)."""
    _, trace_id, span_id, flags = traceparent.split("-")
    return NonRecordingSpan(
        SpanContext(
            trace_id=int(trace_id, 16),
            span_id=int(span_id, 16),
            is_remote=False,
            trace_flags=TraceFlags(int(flags, 16)),
            trace_state=TraceState.from_header([tracestate])
            if tracestate
            else TraceState(),
        )
    )


def stop_when_empty(worker: honker.Worker, q: honker.Queue) -> None:
    """Stops `worker` once nothing of `q` is ready, scheduled or running."""

    def watch() -> None:
        while not worker.stopping:
            st = q.stats()
            if st.ready + st.scheduled + st.running == 0:
                worker.stop()
            time.sleep(0.1)

    threading.Thread(target=watch, daemon=True).start()


def report_until(db: honker.Database, worker: honker.Worker, s: dict) -> None:
    """Writes the looks that found the queue's work held by a pause, as the
    worker reports them, to the table `skips` (when given); stops the worker
    once the table `table` has `until` rows."""
    skips = -1
    while not worker.stopping:
        n = worker.paused.get(s["queue"], 0)
        if "skips" in s and n != skips:
            skips = n
            db.execute(
                f"INSERT OR REPLACE INTO {s['skips']} (worker, n) VALUES (?, ?)",
                [s["worker"], n],
            )
        [(count,)] = db.query(f"SELECT count(*) FROM {s['table']}")
        if count >= s["until"]:
            worker.stop()
        time.sleep(0.01)


class Driver:
    def __init__(self) -> None:
        self.db: honker.Database | None = None
        self.tx: honker.Transaction | None = None
        self.listeners: dict[str, honker.Listener] = {}

    def queue(self, s: dict) -> honker.Queue:
        assert self.db is not None
        return self.db.queue(
            s["queue"],
            backoff_base=s["backoff_base_ms"] / 1000
            if "backoff_base_ms" in s
            else None,
            backoff_jitter=s.get("backoff_jitter"),
        )

    def tx_for(self, s: dict):
        return self.tx if s.get("in_tx") else None

    def lease_job(self, s: dict) -> tuple:
        return s["id"], s["token"]

    def run(self, s: dict):
        op = s["op"]
        if op == "pid":
            return os.getpid()
        if op == "open":
            self.tx = None
            self.db = honker.open(s["path"])
            return None
        if op == "close":
            if self.db is not None:
                self.db.close()
            self.db = self.tx = None
            return None
        if op == "begin":
            assert self.db is not None
            self.tx = self.db.transaction()
            return None
        if op in ("commit", "rollback"):
            if self.tx is not None:
                getattr(self.tx, op)()
            self.tx = None
            return None
        if op == "exec":
            assert self.db is not None
            if self.tx is not None:
                return [list(r) for r in self.tx.query(s["sql"], s.get("params", []))]
            self.db.execute(s["sql"], s.get("params", []))
            return None
        if op in (
            "publish",
            "consume",
            "stream_info",
            "stream_read",
            "notify",
            "listen",
            "heard",
        ):
            return self.events(op, s)
        if op.startswith("group_"):
            return self.group(op, s)
        if op.startswith(("lock_", "rate_limit_")):
            return self.locks(op, s)
        if op.startswith("schedule_"):
            return self.schedules(op, s)
        if op in ("pause", "resume") and s.get("all"):
            assert self.db is not None
            if op == "pause":
                return self.db.pause_all(note=s.get("note"))
            return self.db.resume_all()
        q = self.queue(s)
        if op == "pause":
            return q.pause(note=s.get("note"))
        if op == "resume":
            return q.resume()
        if op == "limit_concurrency":
            return q.limit_concurrency(
                max_running=s.get("max_running"),
                max_running_per_key=s.get("max_running_per_key"),
            )
        if op == "set_fairness":
            per = s.get("key_per_ms")
            return q.set_fairness(
                order=s.get("order"),
                key_limit=s.get("key_limit"),
                key_per=None if per is None else per / 1000,
                key_burst=s.get("key_burst"),
            )
        if op == "enqueue":
            e = q.enqueue(
                s["payload"],
                delay=s["delay_ms"] / 1000 if "delay_ms" in s else None,
                priority=s.get("priority", 0),
                max_attempts=s.get("max_attempts"),
                dedupe_key=s.get("dedupe_key"),
                dedupe_by_payload=s.get("dedupe_by_payload", False),
                unique=s.get("unique"),
                unique_for=s["unique_for_ms"] / 1000 if "unique_for_ms" in s else None,
                concurrency_key=s.get("concurrency_key"),
                tx=self.tx_for(s),
            )
            return {"id": e.id, "existing": e.existing, "unique": e.unique}
        if op == "claim":
            jobs = q.claim_batch(
                s["worker"],
                s.get("n", 1),
                lease=s["lease_ms"] / 1000 if "lease_ms" in s else None,
                wait=s.get("wait_ms", 0) / 1000,
            )
            return [
                {
                    "id": j.id,
                    "token": j.token,
                    "attempts": j.attempts,
                    "payload": j.payload,
                }
                for j in jobs
            ]
        if op in ("ack", "retry", "fail", "release", "heartbeat"):
            # A lease another surface handed over, rebuilt with public API.
            job = q.job(s["id"], s["token"])
            if op == "ack":
                job.ack(tx=self.tx_for(s), result=s.get("result"))
                return None
            if op == "retry":
                delay = s["delay_ms"] / 1000 if "delay_ms" in s else None
                return job.retry(delay=delay, error=s.get("error"))
            if op == "fail":
                job.fail(s["error"])
                return None
            if op == "release":
                job.release()
                return None
            ext = s["extend_ms"] / 1000 if "extend_ms" in s else None
            return round(job.heartbeat(extend=ext).timestamp() * 1000)
        if op == "configure":
            q.configure(
                lease=s["lease_ms"] / 1000 if "lease_ms" in s else None,
                max_attempts=s.get("max_attempts"),
                backoff_base=s["backoff_base_ms"] / 1000
                if "backoff_base_ms" in s
                else None,
                backoff_jitter=s.get("backoff_jitter"),
            )
            return None
        if op == "requeue_dead":
            return q.requeue_dead(s["id"])
        if op == "requeue_all_dead":
            return q.requeue_all_dead()
        if op == "purge_dead":
            return q.purge_dead()
        if op == "get_result":
            return q.get_result(s["id"])
        if op == "cancel":
            return q.cancel(s["id"], reason=s.get("reason"))
        if op == "get_job":
            j = q.get_job(s["id"])
            return {
                "state": j.state,
                "attempts": j.attempts,
                "last_error": j.last_error,
                "run_at_ms": round(j.run_at.timestamp() * 1000),
                "now_ms": round(time.time() * 1000),
            }
        if op == "stats":
            st = q.stats()
            return {
                "ready": st.ready,
                "scheduled": st.scheduled,
                "running": st.running,
                "dead": st.dead,
                "paused": st.paused,
            }
        if op == "drain":
            return self.drain(q, s)
        if op == "work":
            return self.work(s)
        if op == "enqueue_traced":
            with _otel_trace.use_span(_span(s["traceparent"], s.get("tracestate"))):
                return {"id": q.enqueue(s["payload"]).id}
        if op == "work_traced":
            return self.work_traced(q)
        return UNSUPPORTED

    def group(self, op: str, s: dict):
        assert self.db is not None
        g = self.db.stream(s["stream"]).group(s["group"])
        if op == "group_create":
            lease = s["lease_ms"] / 1000 if "lease_ms" in s else None
            return g.create(max_deliveries=s.get("max_deliveries"), lease=lease)
        if op == "group_claim":
            events = g.claim(
                s["member"],
                s.get("n", 1),
                lease=s["lease_ms"] / 1000 if "lease_ms" in s else None,
                wait=s.get("wait_ms", 0) / 1000,
            )
            return [
                {
                    "offset": e.offset,
                    "key": e.key,
                    "deliveries": e.deliveries,
                    "token": e.token,
                    "payload": e.payload,
                }
                for e in events
            ]
        if op == "group_ack":
            g.ack((s["offset"], s["token"]), tx=self.tx_for(s))
            return None
        if op == "group_retry":
            return g.retry((s["offset"], s["token"]), error=s.get("error"))
        if op == "group_fail":
            g.fail((s["offset"], s["token"]), s["error"])
            return None
        if op == "group_release":
            g.release((s["offset"], s["token"]))
            return None
        if op == "group_heartbeat":
            g.heartbeat((s["offset"], s["token"]))
            return None
        if op == "group_remove_member":
            return g.remove_member(s["member"], force=s.get("force", False))
        if op == "group_info":
            i = g.info()
            return {
                "next_offset": i.next_offset,
                "lag": i.lag,
                "pending": i.pending,
                "delivered": i.delivered,
                "dead": i.dead,
                "members": {m.member: m.holds for m in i.members},
            }
        return UNSUPPORTED

    def locks(self, op: str, s: dict):
        assert self.db is not None
        if op.startswith("lock_"):
            lock = self.db.lock(s["name"])
            if op == "lock_acquire":
                ttl = s["ttl_ms"] / 1000
                wait = s.get("wait_ms", 0) / 1000
                g = (
                    lock.acquire(s["owner"], ttl=ttl, wait=wait)
                    if wait
                    else lock.try_acquire(s["owner"], ttl=ttl, tx=self.tx_for(s))
                )
                return None if g is None else {"token": g.token}
            if op == "lock_renew":
                lock.renew(s["token"], ttl=s["ttl_ms"] / 1000)
                return None
            if op == "lock_release":
                return lock.release(s["token"])
            if op == "lock_fence":
                assert self.tx is not None, (
                    "lock_fence runs in the driver's transaction"
                )
                lock.fence(self.tx, s["token"])
                return None
            if op == "lock_info":
                i = lock.info()
                return None if i is None else {"owner": i.owner, "token": i.token}
        if op == "rate_limit_set":
            self.db.rate_limiter(
                s["name"],
                limit=s["limit"],
                per=s["per_ms"] / 1000,
                burst=s.get("burst", 1),
                update=s.get("update", True),
            )
            return None
        if op == "rate_limit_params":
            try:
                p = self.db.rate_limiter(s["name"]).params()
            except honker.NotFound:
                return None
            return {"limit": p.limit, "per_ms": round(p.per * 1000), "burst": p.burst}
        if op == "rate_limit_hammer":
            rl = self.db.rate_limiter(s["name"])
            end = time.monotonic() + s["for_ms"] / 1000
            calls = granted = 0
            while time.monotonic() < end:
                calls += 1
                granted += rl.try_acquire(s.get("key", "")).allowed
            return {"calls": calls, "granted": granted}
        if op == "rate_limit_try":
            d = self.db.rate_limiter(s["name"]).try_acquire(
                s.get("key", ""), cost=s.get("cost", 1), tx=self.tx_for(s)
            )
            return {
                "allowed": d.allowed,
                "remaining": d.remaining,
                "retry_after_ms": round(d.retry_after * 1000),
            }
        return UNSUPPORTED

    def schedules(self, op: str, s: dict):
        assert self.db is not None
        sched = self.db.scheduler()
        if op == "schedule_add":
            return sched.add(
                s["name"],
                s["schedule"],
                s["queue"],
                s.get("payload"),
                time_zone=s.get("time_zone"),
            )
        if op == "schedule_info":
            i = sched.get(s["name"])
            if i is None:
                return None
            return {
                "time_zone": i.time_zone,
                "day_rule": i.day_rule,
                "fires": i.fires,
                "missed": i.missed,
            }
        if op == "schedule_run":
            # The scheduler's run() on a thread, stopped as soon as the
            # schedule has fired enough (or the wait is over).
            stop = threading.Event()
            failed: list[BaseException] = []

            def run() -> None:
                try:
                    sched.run(stop)
                except BaseException as e:  # reported below, not lost on the thread
                    failed.append(e)

            runner = threading.Thread(target=run, name="interop-scheduler")
            runner.start()
            deadline = time.monotonic() + s["wait_ms"] / 1000
            try:
                while True:
                    fires = sched.get(s["name"]).fires  # type: ignore[union-attr]
                    if fires >= s["fires"] or time.monotonic() > deadline or failed:
                        break
                    runner.join(0.05)
            finally:
                stop.set()
                runner.join()
            if failed:
                raise failed[0]
            return {"fires": fires, "reached": fires >= s["fires"]}
        return UNSUPPORTED

    def events(self, op: str, s: dict):
        assert self.db is not None
        if op == "publish":
            st = self.db.stream(s["stream"])
            return st.publish(s["payload"], **s.get("options", {}), tx=self.tx_for(s))
        if op == "consume":
            st = self.db.stream(s["stream"])
            wait = s.get("wait_ms", 1000) / 1000
            got = []
            with st.subscribe(s["consumer"], auto_commit=False, wait=wait) as sub:
                while len(got) < s["n"]:
                    e = sub.next(wait)
                    if e is None:
                        break
                    got.append(e)
                if got:
                    sub.commit(got[-1])
            return [{"offset": e.offset, "payload": e.payload} for e in got]
        if op == "stream_read":
            events = self.db.stream(s["stream"]).read(limit=100)
            return [
                {"offset": e.offset, "key": e.key, "priority": e.priority}
                for e in events
            ]
        if op == "stream_info":
            i = self.db.stream(s["stream"]).info()
            return {
                "length": i.length,
                "last_offset": i.last_offset,
                "lag": {c.consumer: c.lag for c in i.consumers},
            }
        if op == "notify":
            return self.db.notify(s["channel"], s["payload"], tx=self.tx_for(s))
        if op == "listen":
            self.listeners[s["channel"]] = self.db.listen(s["channel"])
            return None
        listener = self.listeners[s["channel"]]
        heard = []
        while len(heard) < s["n"]:
            n = listener.next(s.get("wait_ms", 1000) / 1000)
            if n is None:
                break
            heard.append(n.payload)
        return heard

    def work_traced(self, q: honker.Queue) -> list:
        """Runs honker.Worker until the queue is empty; each handler reports
        the OpenTelemetry span context active in it."""
        assert self.db is not None
        worker = honker.Worker(self.db)
        seen = []

        @worker.task(q.name)
        def handle(job: honker.Job) -> None:
            ctx = _otel_trace.get_current_span().get_span_context()
            valid = ctx.is_valid
            seen.append(
                {
                    "payload": job.payload,
                    "trace_id": f"{ctx.trace_id:032x}" if valid else None,
                    "span_id": f"{ctx.span_id:016x}" if valid else None,
                    "remote": ctx.is_remote if valid else None,
                    "tracestate": (ctx.trace_state.to_header() or None)
                    if valid
                    else None,
                }
            )

        stop_when_empty(worker, q)
        worker.run(signals=False)
        return sorted(seen, key=lambda r: json.dumps(r["payload"], sort_keys=True))

    def work(self, s: dict) -> dict:
        """Runs honker.Worker on the queue until nothing is left to run: each
        handler sleeps, then records a row (in its own transaction, so that
        a job run twice leaves two rows), and the worker acks."""
        assert self.db is not None
        db = self.db
        worker = honker.Worker(
            db,
            concurrency=s["concurrency"],
            worker_id=s["worker"],
            grace=s.get("grace_ms", 30_000) / 1000,
        )
        done = 0
        # Handlers started and finished, and lost leases (from the hooks).
        events = {"start": 0, "finished": 0, "lease_lost": 0}
        settled = threading.Condition()

        def count(e: honker.WorkerEvent) -> None:
            with settled:
                if e.kind != "start":
                    events["finished"] += 1
                events[e.kind] = events.get(e.kind, 0) + 1
                settled.notify_all()

        for kind in honker.worker.KINDS:
            worker.on(kind, count)

        @worker.task(s["queue"], lease=s["lease_ms"] / 1000)
        def handle(job: honker.Job) -> None:
            nonlocal done
            if "started" in s:
                # The harness waits for this row, not for a claim: a job
                # claimed and not yet handed to a handler is only released.
                with db.transaction() as tx:
                    tx.execute(
                        f"INSERT INTO {s['started']} (job_id, attempts) VALUES (?, ?)",
                        [job.id, job.attempts],
                    )
            long = job.payload == {"i": 0} and "long_ms" in s
            end = time.monotonic() + (s["long_ms"] if long else s["sleep_ms"]) / 1000
            # A sync handler stops when told to (a timeout, a shutdown).
            while time.monotonic() < end:
                if job.cancelled:
                    if "aborted" in s:
                        db.execute(
                            f"INSERT INTO {s['aborted']} (job_id, attempts) VALUES (?, ?)",
                            [job.id, job.attempts],
                        )
                    raise RuntimeError("cancelled")
                time.sleep(0.005)
            with db.transaction() as tx:
                tx.execute(
                    f"INSERT INTO {s['table']} (job_id, attempts, worker) VALUES (?, ?, ?)",
                    [job.id, job.attempts, s["worker"]],
                )
            done += 1

        q = db.queue(s["queue"])

        if "until" in s:
            threading.Thread(
                target=report_until, args=(db, worker, s), daemon=True
            ).start()
        else:
            stop_when_empty(worker, q)
        worker.run(signals=bool(s.get("signals")))
        # A sync handler whose job the drain gave up on may still be
        # returning: its outcome (refused) is part of the answer.
        with settled:
            settled.wait_for(lambda: events["finished"] >= events["start"], timeout=10)
        return {"done": done, "lease_lost": events["lease_lost"]}

    def drain(self, q: honker.Queue, s: dict) -> dict:
        assert self.db is not None
        done, idle, errors = 0, 0, []
        while idle < 3:
            try:
                jobs = q.claim_batch(s["worker"], 16, wait=0.3)
            except honker.HonkerError as e:
                errors.append(e.code)
                continue
            if not jobs:
                idle += 1
                continue
            idle = 0
            for job in jobs:
                try:
                    with self.db.transaction() as tx:
                        tx.execute(
                            f"INSERT INTO {s['table']} (job_id, surface) VALUES (?, 'python')",
                            [job.id],
                        )
                        job.ack(tx=tx)
                    done += 1
                except honker.HonkerError as e:
                    errors.append(e.code)
        return {"done": done, "errors": errors}


UNSUPPORTED = object()


def main() -> None:
    d = Driver()
    for line in sys.stdin:
        step = json.loads(line)
        try:
            result = d.run(step)
            reply = (
                {"unsupported": step["op"]} if result is UNSUPPORTED else {"ok": result}
            )
        except honker.HonkerError as e:
            reply = {"error": e.code, "message": e.message}
        except TypeError as e:
            reply = {"error": "INVALID_ARGUMENT", "message": str(e)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
