"""Runs the README's Python quickstart as written, in a temporary directory,
with whatever honker the running interpreter has installed (the test command
runs it under every CPython on the machine, each with the release wheel
installed from its file). Prints the interpreter's version when it worked."""

import asyncio
import faulthandler
import os
import re
import sqlite3
import sys
import tempfile
import threading

# A crash (seen once in CI on CPython 3.10, not reproduced) prints every
# thread's Python stack.
faulthandler.enable()

# Directories the snippets run in, removed when the interpreter exits.
_scratch = []


def scratch() -> str:
    _scratch.append(tempfile.TemporaryDirectory(prefix="honker-readme-"))
    return _scratch[-1].name


readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")
with open(readme, encoding="utf-8") as f:
    blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
assert blocks, "the README has a Python quickstart"

os.chdir(scratch())
sent = []
mailed = []


class Mailer:
    async def send(self, to, template):
        mailed.append((to, template))
        scope["worker"].stop()  # the snippet's worker stops after one email


scope = {
    "send_confirmation": lambda to, template: sent.append((to, template)),
    "mailer": Mailer(),
}
quickstart, *others = blocks
streams = next(b for b in others if "db.stream(" in b)
others.remove(streams)
groups = next(b for b in others if ".group(" in b)
others.remove(groups)
locks = next(b for b in others if ".lock(" in b)
others.remove(locks)
schedules = next(b for b in others if ".scheduler()" in b)
others.remove(schedules)
switching = next(b for b in others if "import_honker(" in b)
others.remove(switching)
paying = next(b for b in others if "payments.charge(" in b)
others.remove(paying)
limiting = next(b for b in others if "set_rate_limit(" in b)
others.remove(limiting)
listening = next(b for b in others if "def show_updates" in b)
others.remove(listening)


def run_quickstart(code: str, path: str, scope: dict) -> None:
    """Runs a quickstart (the order and its email in one transaction, then
    `email_worker`) in `scope`: one email sent and acked, the order there."""
    sent.clear()
    exec(compile(code, path, "exec"), scope)

    async def drive():
        worker = asyncio.ensure_future(scope["email_worker"](scope["db"]))
        while not sent:
            await asyncio.sleep(0.001)
        worker.cancel()

    asyncio.run(drive())
    assert sent == [("alice@example.com", "order-confirmed")], sent
    assert scope["db"].query("SELECT user_id FROM orders") == [(42,)]
    stats = scope["db"].queue("emails").stats()
    assert (stats.ready, stats.running) == (0, 0), stats


run_quickstart(quickstart, readme, scope)


# The cost of an await inside a transaction: the call made first, then a
# short transaction with the order's update and its email job.
class Payments:
    async def charge(self, order_id):
        await asyncio.sleep(0.001)
        return f"r-{order_id}"


paid = {"payments": Payments()}
exec(compile(paying, readme, "exec"), paid)
asyncio.run(paid["pay"](scope["db"], 1))
assert scope["db"].query("SELECT status FROM orders WHERE id = 1") == [("paid",)]
[receipt_job] = scope["db"].queue("emails").claim_batch("readme", 10)
assert receipt_job.payload == {"order": 1, "receipt": "r-1"}, receipt_job.payload
receipt_job.ack()

# The Workers section: its worker runs the next email, then stops.
scope["db"].queue("emails").enqueue({"to": "bob@example.com", "template": "welcome"})
for code in others:
    exec(compile(code, readme, "exec"), scope)
assert mailed == [("bob@example.com", "welcome")], mailed
# The metrics section (one of those): the emails sent above are counted.
assert scope["m"].acked >= 2 and scope["m"].enqueued >= 2, scope["m"]
assert 'honker_jobs_total{queue="emails",event="acked"}' in scope["text"]

# The streams section: the publish commits with the order's update; the
# projection's write and its offset commit together.
db = scope["db"]
db.execute("CREATE TABLE revenue (total INTEGER)")
db.execute("INSERT INTO revenue VALUES (0)")
listener = db.listen("dashboard", wait=1)
exec(compile(streams, readme, "exec"), {"db": db, "order_id": 1})
assert db.query("SELECT status FROM orders WHERE id = 1") == [("paid",)]
assert db.query("SELECT total FROM revenue") == [(1,)]
assert db.stream("orders").position("revenue") == 2
assert next(listener).payload == {"order": 1}

# A listener on a thread of its own, closed from another: the loop ends.
shown = []
exec(
    compile(listening, readme, "exec"),
    {"db": db, "threading": threading, "print": lambda *a: shown.append(a)},
)
assert all(a[0] == "dashboard:" for a in shown), shown

# A queue's rate limit, and a rate limiter's refusal mapped onto Snooze:
# the first call is allowed and pushed, a call over the quota snoozes.
pushed = []
limits = {"db": db, "honker": scope["honker"], "push_to_crm": pushed.append}
exec(compile(limiting, readme, "exec"), limits)
assert db.queue("emails").rate_limit().limit == 10
db.rate_limiter("crm-api", limit=100, per=60)


class FakeJob:
    payload = {"customer": 42}


# 100 a minute with the default burst of 1: one now, the next 0.6 s later.
limits["sync_customer"](FakeJob())
try:
    limits["sync_customer"](FakeJob())
    raise AssertionError("a second call at once was allowed")
except scope["honker"].Snooze as e:
    assert 0 < e.delay <= 0.6, e.delay
assert len(pushed) == 1
db.queue("emails").set_rate_limit(limit=None)

# The consumer groups section: one member invoices the order, and the
# invoice and the ack commit together.
db.execute("CREATE TABLE invoices (order_id INTEGER)")
exec(compile(groups, readme, "exec"), {"db": db, "orders": db.stream("orders")})
assert db.query("SELECT order_id FROM invoices") == [(1,)]
billing = db.stream("orders").group("billing").info()
assert (billing.next_offset, billing.pending) == (2, 0), billing

# The locks section: the fenced write commits; the lock is released after.
db.execute("CREATE TABLE search_state (version INTEGER)")
db.execute("INSERT INTO search_state VALUES (0)")
exec(compile(locks, readme, "exec"), {"db": db})
assert db.query("SELECT version FROM search_state") == [(1,)]
assert db.lock("reindex").info() is None
assert db.rate_limiter("mail").params().burst == 5

# The scheduler section: two schedules registered, the loop running on a
# thread until the stop event is set.
stop = threading.Event()
exec(
    compile(schedules, readme, "exec"), {"db": db, "threading": threading, "stop": stop}
)
assert [i.name for i in db.scheduler().list()] == ["heartbeat", "nightly-report"]
assert db.scheduler().get("nightly-report").time_zone == "Europe/Berlin"
stop.set()
db.close()

# The switching section, in a directory of its own whose app.db holds a
# Honker job (Honker's table as Honker 0.2.4 creates it): refused on open,
# then imported with the job's id kept.
os.chdir(scratch())
honker_file = sqlite3.connect("app.db")
honker_file.executescript(
    "PRAGMA journal_mode = WAL;"
    "CREATE TABLE _honker_live (id INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL,"
    " payload TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',"
    " priority INTEGER NOT NULL DEFAULT 0, run_at INTEGER NOT NULL DEFAULT (unixepoch()),"
    " worker_id TEXT, claim_expires_at INTEGER, attempts INTEGER NOT NULL DEFAULT 0,"
    " max_attempts INTEGER NOT NULL DEFAULT 3,"
    " created_at INTEGER NOT NULL DEFAULT (unixepoch()), expires_at INTEGER);"
    "INSERT INTO _honker_live (id, queue, payload) VALUES (7, 'emails', '{\"to\": \"c@x\"}');"
)
honker_file.close()
honker = scope["honker"]
try:
    honker.open("app.db")
    raise AssertionError("a Honker file opened")
except honker.Unsafe:
    pass
switched = {}
exec(compile(switching, readme, "exec"), switched)
assert switched["report"]["jobs"]["ready"] == 1, switched["report"]
[job] = switched["db"].queue("emails").claim_batch("readme", 10)
assert (job.id, job.payload) == (7, {"to": "c@x"})
switched["db"].close()

# The Python package's own README (PyPI's page): its example, as written, in
# a directory of its own.
os.chdir(scratch())
package_readme = os.path.join(os.path.dirname(readme), "bindings-python", "README.md")
with open(package_readme, encoding="utf-8") as f:
    [package_example] = re.findall(r"```python\n(.*?)```", f.read(), re.S)
package = {"send_confirmation": scope["send_confirmation"]}
run_quickstart(package_example, package_readme, package)
package["db"].close()
print("README quickstart ok on CPython", sys.version.split()[0])
