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
    """The database was closed, or was opened by the process this one forked from."""


class Timeout(HonkerError, TimeoutError):
    """A wait ran out of time."""


class RateLimited(HonkerError):
    """A rate limit refused the call."""


class SqliteError(HonkerError):
    """An error from SQLite itself (constraint, I/O, ...)."""


class InternalError(HonkerError):
    """A bug in honker: please report it."""


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
    "SchemaTooNew",
    "SqliteError",
    "Timeout",
    "class_for_code",
]
