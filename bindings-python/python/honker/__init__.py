"""honker: durable job queues inside your application's own SQLite file.

The point is the transactional outbox: enqueue a job in the same SQLite
transaction as the row that caused it, so both commit or neither does::

    import honker

    db = honker.open("app.db")
    emails = db.queue("emails")
    with db.transaction() as tx:
        tx.execute("INSERT INTO orders (user_id, status) VALUES (?, ?)", [42, "paid"])
        emails.enqueue({"to": "alice@example.com"}, tx=tx)

    for job in emails.claim("mailer-1"):      # or: async for
        send(job.payload)
        job.ack()

or let a :class:`Worker` run handlers (concurrency, lease renewal, timeouts,
retries, graceful shutdown): ``python -m honker worker myapp:worker``.

Semantics are at-least-once: make handlers idempotent.
"""

from ._native import ManualClock, __version__
from .database import Database, Transaction, open
from .errors import (
    Busy,
    Closed,
    HonkerError,
    InternalError,
    InvalidArgument,
    LeaseLost,
    NotFound,
    RateLimited,
    RolledBack,
    SchemaTooNew,
    SqliteError,
    Timeout,
    Trimmed,
    Unsafe,
)
from .extension import extension_path, load_extension
from .group import (
    Group,
    GroupClaim,
    GroupConsumer,
    GroupDeadLetter,
    GroupEvent,
    GroupInfo,
    GroupMember,
    GroupOptions,
)
from .importer import import_honker
from .lock import Held, Lock, LockGrant, LockInfo, RateDecision, RateLimit, RateLimiter
from .metrics import LatencyHistogram, QueueMetrics
from .queue import Claimer, Enqueued, Job, JobInfo, KeepAlive, Queue, QueueStats
from .scheduler import Fire, Schedule, ScheduleInfo, Scheduler, SyncReport
from .stream import (
    ConsumerInfo,
    Event,
    Listener,
    Notification,
    Stream,
    StreamInfo,
    StreamRetention,
    Subscription,
)
from .worker import Permanent, Retry, Snooze, Worker, WorkerEvent

__all__ = [
    "Busy",
    "Claimer",
    "Closed",
    "ConsumerInfo",
    "Database",
    "Enqueued",
    "Event",
    "Fire",
    "Group",
    "GroupClaim",
    "GroupConsumer",
    "GroupDeadLetter",
    "GroupEvent",
    "GroupInfo",
    "GroupMember",
    "GroupOptions",
    "Held",
    "HonkerError",
    "InternalError",
    "InvalidArgument",
    "Job",
    "JobInfo",
    "KeepAlive",
    "LatencyHistogram",
    "LeaseLost",
    "Listener",
    "Lock",
    "LockGrant",
    "LockInfo",
    "ManualClock",
    "NotFound",
    "Notification",
    "Permanent",
    "Queue",
    "QueueMetrics",
    "QueueStats",
    "RateDecision",
    "RateLimit",
    "RateLimited",
    "RateLimiter",
    "Retry",
    "RolledBack",
    "Schedule",
    "ScheduleInfo",
    "Scheduler",
    "SchemaTooNew",
    "Snooze",
    "SqliteError",
    "Stream",
    "StreamInfo",
    "StreamRetention",
    "Subscription",
    "SyncReport",
    "Timeout",
    "Transaction",
    "Trimmed",
    "Unsafe",
    "Worker",
    "WorkerEvent",
    "__version__",
    "extension_path",
    "import_honker",
    "load_extension",
    "open",
]
