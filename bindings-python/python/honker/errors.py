"""honker's exceptions: one class per stable error code.

Every error raised by honker is a :class:`HonkerError` with ``.code`` (the
stable code shared by every language and the SQL functions) and
``.message``. Match on the class or the code, never on the message text.
"""

from __future__ import annotations


class HonkerError(Exception):
    """Base class. ``code`` is the stable error code, ``message`` the text."""

    code: str = "INTERNAL"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Busy(HonkerError):
    """Another writer held the file for the whole busy timeout; retrying is safe."""


class LeaseLost(HonkerError):
    """The lease token no longer owns the job: the lease lapsed and the job was
    reclaimed, or the job already finished. Nothing was changed."""


class NotFound(HonkerError, LookupError):
    """No such job (in this queue)."""


class InvalidArgument(HonkerError, ValueError):
    """A bad argument; nothing was written."""


class SchemaTooNew(HonkerError):
    """The file was upgraded by a newer honker; upgrade this one."""


class Closed(HonkerError):
    """The database was closed, or the handle belongs to the process this one
    was forked from (a forked child cannot use it)."""


class Timeout(HonkerError, TimeoutError):
    """A wait ran out of time."""


class RateLimited(HonkerError):
    """A rate limit refused the call."""


class SqliteError(HonkerError):
    """An error from SQLite itself (constraint, I/O, ...)."""


class InternalError(HonkerError):
    """A bug in honker: please report it."""


class Unsafe(HonkerError):
    """Refused because it cannot be done safely here: this process was forked
    from one using honker (use the spawn or forkserver start method, or fork
    before opening). The message names the safe route."""


class RolledBack(HonkerError):
    """SQLite itself ended the transaction (``INSERT OR ROLLBACK``,
    ``RAISE(ROLLBACK)``, a full disk, an interrupt): nothing of it was
    committed, and every later call on it fails the same way."""


_BY_CODE: dict[str, type[HonkerError]] = {
    "BUSY": Busy,
    "LEASE_LOST": LeaseLost,
    "NOT_FOUND": NotFound,
    "INVALID_ARGUMENT": InvalidArgument,
    "SCHEMA_TOO_NEW": SchemaTooNew,
    "CLOSED": Closed,
    "TIMEOUT": Timeout,
    "RATE_LIMITED": RateLimited,
    "SQLITE": SqliteError,
    "INTERNAL": InternalError,
    "UNSAFE": Unsafe,
    "ROLLED_BACK": RolledBack,
}


def class_for_code(code: str) -> type[HonkerError]:
    """The exception class for a stable code (used by the native module)."""
    return _BY_CODE.get(code, HonkerError)


__all__ = [
    "Busy",
    "Closed",
    "HonkerError",
    "InternalError",
    "InvalidArgument",
    "LeaseLost",
    "NotFound",
    "RateLimited",
    "RolledBack",
    "SchemaTooNew",
    "SqliteError",
    "Timeout",
    "Unsafe",
    "class_for_code",
]
