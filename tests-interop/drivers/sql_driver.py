"""The SQL surface of tests-interop: honker's own SQL forms (honker_queue_*,
honker_job_*, honker_dead_*: ms, (id, token), coded errors; docs/sql.md)
through the stdlib sqlite3 module of Debian's /usr/bin/python3 with
libhonker_ext loaded (HONKER_EXT). One JSON step per line on stdin, one JSON
answer per line on stdout. The SQL surface reports errors as text starting
with the stable code; that prefix is its structured error, and it is all
this reads. Operations SQL cannot express answer {"unsupported": ...} and the
runner skips that combination."""

import json
import os
import sqlite3
import sys
import time

EXT = os.environ["HONKER_EXT"]


class Refused(Exception):
    """An answer with a stable code that the driver decides itself."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Driver:
    def __init__(self):
        self.conn = None
        self.in_tx = self.dead = False
        self.listening = {}  # channel -> the last notification id seen

    def one(self, sql, params=()):
        return self.conn.execute(sql, params).fetchone()[0]

    def run(self, s):
        op = s["op"]
        if op == "open":
            self.conn = sqlite3.connect(s["path"], isolation_level=None, timeout=10)
            self.conn.enable_load_extension(True)
            self.conn.load_extension(EXT)
            self.conn.enable_load_extension(False)
            self.one("SELECT honker_bootstrap()")
            return None
        if op == "close":
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return None
        if op == "begin":
            self.conn.execute("BEGIN IMMEDIATE")
            self.in_tx, self.dead = True, False
            return None
        if op in ("commit", "rollback"):
            dead, self.in_tx, self.dead = self.dead, False, False
            if dead and op == "commit":
                raise Refused("ROLLED_BACK", "SQLite rolled the transaction back")
            if self.conn.in_transaction:
                self.conn.execute(op.upper())
            return None
        # The host's connection owns the transaction: after an error in it,
        # an application reads the autocommit state (docs/sql.md) and stops
        # using a transaction that SQLite ended, as honker's bindings do.
        if self.dead and (op == "exec" or s.get("in_tx")):
            raise Refused("ROLLED_BACK", "SQLite rolled the transaction back")
        try:
            return self.step_in_tx(s)
        except sqlite3.Error as e:
            if self.in_tx and not self.conn.in_transaction:
                self.dead = True
                raise Refused(
                    "ROLLED_BACK", f"SQLite rolled the transaction back after {e}"
                ) from e
            raise

    def poll(self, read, n: int, wait_ms: int) -> list:
        """Up to n items from read(), polling (a SQL client has no watcher)
        for up to wait_ms after each."""
        got = []
        deadline = time.monotonic() + wait_ms / 1000
        while len(got) < n:
            items = read(n - len(got))
            got += items
            if items:
                deadline = time.monotonic() + wait_ms / 1000
            elif time.monotonic() >= deadline:
                break
            else:
                time.sleep(0.01)
        return got

    def events(self, op: str, s: dict):
        if op == "publish":
            options = json.dumps(s.get("options", {}))
            return self.one(
                "SELECT honker_stream_append(?, ?, ?)",
                [s["stream"], json.dumps(s["payload"]), options],
            )
        if op == "consume":
            stream, consumer = s["stream"], s["consumer"]
            place = [
                self.one("SELECT honker_stream_position(?, ?)", [stream, consumer]) or 1
            ]

            def read(n):
                rows = json.loads(
                    self.one(
                        "SELECT honker_stream_read(?, ?, ?)", [stream, place[0] - 1, n]
                    )
                )
                if rows:
                    place[0] = rows[-1]["offset"] + 1
                return rows

            got = self.poll(read, s["n"], s.get("wait_ms", 1000))
            if got:
                self.one(
                    "SELECT honker_stream_commit(?, ?, ?)", [stream, consumer, place[0]]
                )
            return [{"offset": e["offset"], "payload": e["payload"]} for e in got]
        if op == "stream_read":
            events = json.loads(
                self.one("SELECT honker_stream_read(?, 0, 100)", [s["stream"]])
            )
            return [{k: e[k] for k in ("offset", "key", "priority")} for e in events]
        if op == "stream_info":
            i = json.loads(self.one("SELECT honker_stream_info(?)", [s["stream"]]))
            return {
                "length": i["length"],
                "last_offset": i["last_offset"],
                "lag": {c["consumer"]: c["lag"] for c in i["consumers"]},
            }
        if op == "notify":
            return self.one(
                "SELECT honker_notify(?, ?)", [s["channel"], json.dumps(s["payload"])]
            )
        channel = s["channel"]
        if op == "listen":
            # Listening starts after the newest notification in the window.
            last = 0
            while True:
                page = json.loads(
                    self.one("SELECT honker_channel_read(?, ?, 1000)", [channel, last])
                )
                if not page:
                    break
                last = page[-1]["id"]
            self.listening[channel] = last
            return None

        def heard(n):
            rows = json.loads(
                self.one(
                    "SELECT honker_channel_read(?, ?, ?)",
                    [channel, self.listening[channel], n],
                )
            )
            if rows:
                self.listening[channel] = rows[-1]["id"]
            return rows

        return [m["payload"] for m in self.poll(heard, s["n"], s.get("wait_ms", 1000))]

    def group(self, op: str, s: dict):
        sg = [s["stream"], s["group"]]
        if op == "group_create":
            options = {k: s[k] for k in ("max_deliveries", "lease_ms") if k in s}
            return self.one(
                "SELECT honker_group_create(?, ?, ?)", [*sg, json.dumps(options)]
            )
        if op == "group_claim":

            def claim(n):
                c = json.loads(
                    self.one(
                        "SELECT honker_group_claim(?, ?, ?, ?, ?)",
                        [*sg, s["member"], n, s.get("lease_ms")],
                    )
                )
                return c["events"]

            # One claim's worth: poll (a SQL client has no watcher) only
            # while nothing at all was claimable.
            deadline = time.monotonic() + s.get("wait_ms", 0) / 1000
            while True:
                events = claim(s.get("n", 1))
                if events or time.monotonic() >= deadline:
                    break
                time.sleep(0.01)
            return [
                {
                    "offset": e["offset"],
                    "key": e["key"],
                    "deliveries": e["deliveries"],
                    "token": e["lease_token"],
                    "payload": e["payload"],
                }
                for e in events
            ]
        if op == "group_ack":
            self.one(
                "SELECT honker_group_ack(?, ?, ?, ?)", [*sg, s["offset"], s["token"]]
            )
            return None
        if op == "group_retry":
            state = self.one(
                "SELECT honker_group_retry(?, ?, ?, ?, NULL, ?)",
                [*sg, s["offset"], s["token"], s.get("error")],
            )
            return state == "dead"
        if op == "group_fail":
            self.one(
                "SELECT honker_group_fail(?, ?, ?, ?, ?)",
                [*sg, s["offset"], s["token"], s["error"]],
            )
            return None
        if op == "group_release":
            self.one(
                "SELECT honker_group_release(?, ?, ?, ?)",
                [*sg, s["offset"], s["token"]],
            )
            return None
        if op == "group_heartbeat":
            self.one(
                "SELECT honker_group_heartbeat(?, ?, ?, ?, NULL)",
                [*sg, s["offset"], s["token"]],
            )
            return None
        if op == "group_remove_member":
            return self.one(
                "SELECT honker_group_remove_member(?, ?, ?, ?)",
                [*sg, s["member"], 1 if s.get("force") else 0],
            )
        if op == "group_info":
            i = json.loads(self.one("SELECT honker_group_info(?, ?)", sg))
            return {
                "next_offset": i["next_offset"],
                "lag": i["lag"],
                "pending": i["pending"],
                "delivered": i["delivered"],
                "dead": i["dead"],
                "members": {m["member"]: m["holds"] for m in i["members"]},
            }
        return UNSUPPORTED

    def locks(self, op: str, s: dict):
        if op == "lock_acquire":
            if s.get("wait_ms"):
                return UNSUPPORTED  # SQL has no waiting acquire (a driver would poll)
            g = self.one(
                "SELECT honker_lock_take(?, ?, ?)", [s["name"], s["owner"], s["ttl_ms"]]
            )
            return None if g is None else {"token": json.loads(g)["token"]}
        if op == "lock_release":
            return bool(
                self.one("SELECT honker_lock_drop(?, ?)", [s["name"], s["token"]])
            )
        if op == "lock_fence":
            self.one("SELECT honker_lock_fence(?, ?)", [s["name"], s["token"]])
            return None
        if op == "lock_renew":
            self.one(
                "SELECT honker_lock_extend(?, ?, ?)",
                [s["name"], s["token"], s["ttl_ms"]],
            )
            return None
        if op == "lock_info":
            i = self.one("SELECT honker_lock_info(?)", [s["name"]])
            return (
                None if i is None else {k: json.loads(i)[k] for k in ("owner", "token")}
            )
        if op == "rate_limit_params":
            i = self.one("SELECT honker_rate_limit_info(?)", [s["name"]])
            return None if i is None else json.loads(i)
        if op == "rate_limit_set":
            if not s.get("update", True):
                return UNSUPPORTED  # SQL's set always updates (Honker's contract)
            self.one(
                "SELECT honker_rate_limit_set(?, ?, ?, ?)",
                [s["name"], s["limit"], s["per_ms"], s.get("burst", 1)],
            )
            return None
        if op == "rate_limit_try":
            d = json.loads(
                self.one(
                    "SELECT honker_rate_limit_check(?, ?, ?)",
                    [s["name"], s.get("key", ""), s.get("cost", 1)],
                )
            )
            return {
                "allowed": d["allowed"],
                "remaining": d["remaining"],
                "retry_after_ms": d["retry_after"],
            }
        return UNSUPPORTED

    def schedules(self, op: str, s: dict):
        if op == "schedule_add":
            options = {"time_zone": s["time_zone"]} if s.get("time_zone") else {}
            return bool(
                self.one(
                    "SELECT honker_schedule_add(?, ?, ?, ?, ?)",
                    [
                        s["name"],
                        s["queue"],
                        s["schedule"],
                        json.dumps(s.get("payload"), separators=(",", ":")),
                        json.dumps(options),
                    ],
                )
            )
        if op == "schedule_info":
            for i in json.loads(self.one("SELECT honker_schedule_list()")):
                if i["name"] == s["name"]:
                    return {
                        k: i[k] for k in ("time_zone", "day_rule", "fires", "missed")
                    }
            return None
        if op == "schedule_run":
            # SQL has no runner: tick, and sleep until the next boundary.
            deadline = time.monotonic() + s["wait_ms"] / 1000
            while True:
                fires = self.schedules("schedule_info", s)["fires"]
                if fires >= s["fires"] or time.monotonic() > deadline:
                    return {"fires": fires, "reached": fires >= s["fires"]}
                self.one("SELECT honker_schedule_tick()")
                due = self.one("SELECT honker_schedule_next_due()")
                wait = 0.05 if due is None else (due / 1000 - time.time())
                time.sleep(min(max(wait, 0.0), 0.05))
        return UNSUPPORTED

    def step_in_tx(self, s: dict):
        op = s["op"]
        if op == "exec":
            rows = self.conn.execute(s["sql"], s.get("params", [])).fetchall()
            return [list(r) for r in rows] if self.conn.in_transaction else None
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
        q, worker = s.get("queue"), s.get("worker", "sql-worker")
        if op == "configure":
            return UNSUPPORTED  # no SQL function stores a queue's settings
        if op == "pause":
            if s.get("all"):
                return self.none("SELECT honker_queue_pause_all(?)", [s.get("note")])
            return self.none("SELECT honker_queue_pause(?, ?)", [q, s.get("note")])
        if op == "resume":
            if s.get("all"):
                return self.one("SELECT honker_queue_resume_all()", []) == 1
            return self.one("SELECT honker_queue_resume(?)", [q]) == 1
        if op == "limit_concurrency":
            return self.none(
                "SELECT honker_queue_limit_concurrency(?, ?, ?)",
                [q, s.get("max_running"), s.get("max_running_per_key")],
            )
        if op == "set_fairness":
            return self.none(
                "SELECT honker_queue_set_fairness(?, ?, ?, ?, ?)",
                [
                    q,
                    s.get("order"),
                    s.get("key_limit"),
                    s.get("key_per_ms"),
                    s.get("key_burst"),
                ],
            )
        if op == "enqueue":
            options = {k: s[k] for k in ("delay_ms", "priority", "max_attempts", "dedupe_key",
                       "dedupe_by_payload", "unique", "unique_for_ms",
                       "concurrency_key") if k in s}  # fmt: skip
            backoff = {k[len("backoff_"):]: s[k] for k in ("backoff_base_ms", "backoff_max_ms",
                       "backoff_jitter") if k in s}  # fmt: skip
            if backoff:
                options["backoff"] = backoff
            return json.loads(
                self.one(
                    "SELECT honker_queue_enqueue_record(?, ?, ?)",
                    [q, json.dumps(s["payload"]), json.dumps(options)],
                )
            )
        if op == "enqueue_traced":
            options = {k: s[k] for k in ("traceparent", "tracestate") if s.get(k)}
            job_id = self.one(
                "SELECT honker_queue_enqueue(?, ?, ?)",
                [q, json.dumps(s["payload"]), json.dumps(options)],
            )
            return {"id": job_id}
        if op == "claim":
            deadline = time.monotonic() + s.get("wait_ms", 0) / 1000
            while True:
                jobs = json.loads(
                    self.one(
                        "SELECT honker_queue_claim(?, ?, ?, ?)",
                        [q, worker, s.get("n", 1), s.get("lease_ms")],
                    )
                )
                if jobs or time.monotonic() >= deadline:
                    break
                time.sleep(0.01)  # a SQL client without the watcher polls
            return [
                {
                    "id": j["id"],
                    "token": j["lease_token"],
                    "attempts": j["attempts"],
                    "payload": j["payload"],
                }
                for j in jobs
            ]
        held = [q, s.get("id"), s.get("token")]
        if op == "ack":
            if "result" in s:
                return self.none(
                    "SELECT honker_job_ack(?, ?, ?, ?)",
                    [*held, json.dumps(s["result"])],
                )
            return self.none("SELECT honker_job_ack(?, ?, ?)", held)
        if op == "retry":
            return self.one(
                "SELECT honker_job_retry(?, ?, ?, ?, ?)",
                [*held, s.get("delay_ms"), s.get("error")],
            )
        if op == "fail":
            return self.none("SELECT honker_job_fail(?, ?, ?, ?)", [*held, s["error"]])
        if op == "release":
            return self.none("SELECT honker_job_release(?, ?, ?)", held)
        if op == "heartbeat":
            return self.one(
                "SELECT honker_job_heartbeat(?, ?, ?, ?)", [*held, s.get("extend_ms")]
            )
        if op == "requeue_dead":
            return self.one("SELECT honker_dead_requeue(?, ?)", [q, s["id"]]) == 1
        if op == "requeue_all_dead":
            return self.one("SELECT honker_dead_requeue(?)", [q])
        if op == "purge_dead":
            return self.one("SELECT honker_dead_purge(?)", [q])
        if op == "get_result":
            # Honker's own function: results by job id.
            text = self.one("SELECT honker_result_get(?)", [s["id"]])
            return None if text is None else json.loads(text)
        if op == "cancel":
            args = [q, s["id"]] + ([s["reason"]] if "reason" in s else [])
            marks = ", ".join("?" * len(args))
            return self.one(f"SELECT honker_job_cancel({marks})", args) == 1
        if op == "get_job":
            j = json.loads(self.one("SELECT honker_job_get(?, ?)", [q, s["id"]]))
            return {"state": j["state"], "attempts": j["attempts"], "last_error": j["last_error"],
                    "run_at_ms": j["run_at"], "now_ms": round(time.time() * 1000)}  # fmt: skip
        if op == "stats":
            st = json.loads(self.one("SELECT honker_queue_stats(?)", [q]))
            return {
                k: st[k] for k in ("ready", "scheduled", "running", "dead", "paused")
            }
        return UNSUPPORTED

    def none(self, sql, params):
        self.one(sql, params)
        return None


UNSUPPORTED = object()


def main():
    d = Driver()
    for line in sys.stdin:
        step = json.loads(line)
        try:
            result = d.run(step)
            reply = (
                {"unsupported": step["op"]} if result is UNSUPPORTED else {"ok": result}
            )
        except sqlite3.Error as e:
            code, _, message = str(e).partition(": ")
            reply = {"error": code, "message": message}
        except Refused as e:
            reply = {"error": e.code, "message": str(e)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
