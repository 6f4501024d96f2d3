# Type stubs for the native module (bindings-python/src/*.rs). Checked
# against the module by tests/test_stubs.py: keep them in step.
from os import PathLike
from typing import Any, Callable

__version__: str
ERROR_CODES: list[str]

_Payload = str | bytes
# Payloads going in are Python values: bytes-like, or anything json.dumps
# takes (src/json.rs encodes them).
_Params = Any
_Claimed = tuple[int, _Payload, int, int, int, int, int, int, str]

class ManualClock:
    def __new__(cls, now: float | None = None) -> ManualClock: ...
    def advance(self, seconds: float) -> None: ...
    def now(self) -> float: ...

class Database:
    def __new__(
        cls,
        path: str | PathLike[str],
        *,
        durability: str = "normal",
        busy_timeout: float = 10.0,
        readers: int = 4,
        max_payload_bytes: int = 1048576,
        watch_fallback: float = 0.1,
        auto_maintain_every: float = 300.0,
        clock: ManualClock | None = None,
    ) -> Database: ...
    @property
    def path(self) -> str: ...
    def queue(
        self,
        name: str,
        *,
        lease: float | None = None,
        max_attempts: int | None = None,
        backoff_base: float | None = None,
        backoff_max: float | None = None,
        backoff_jitter: float | None = None,
    ) -> Queue: ...
    def transaction(self) -> Transaction: ...
    def execute(self, sql: str, params: _Params = None) -> int: ...
    def query(self, sql: str, params: _Params = None) -> tuple[list[str], list[tuple]]: ...
    def maintain(self) -> dict[str, int]: ...
    def close(self) -> None: ...

class Transaction:
    def execute(self, sql: str, params: _Params = None) -> int: ...
    def query(self, sql: str, params: _Params = None) -> tuple[list[str], list[tuple]]: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    @property
    def is_open(self) -> bool: ...

class Queue:
    @property
    def name(self) -> str: ...
    @property
    def lease(self) -> float: ...
    def enqueue_many(
        self,
        payloads: list[Any],
        *,
        delay: float | None = None,
        run_at: float | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
        dedupe_key: str | None = None,
        expires: float | None = None,
        tx: Transaction | None = None,
    ) -> list[tuple[int, bool]]: ...
    def claim(
        self,
        worker_id: str,
        n: int,
        *,
        lease: float | None = None,
        wait: float = 0.0,
        tx: Transaction | None = None,
        on_claimable: Callable[[], object] | None = None,
    ) -> list[_Claimed]: ...
    def ack(
        self,
        job_id: int,
        token: str,
        *,
        result: Any | None = None,
        tx: Transaction | None = None,
    ) -> None: ...
    def ack_many(self, leases: list[tuple[int, str]], *, tx: Transaction | None = None) -> int: ...
    def retry(
        self,
        job_id: int,
        token: str,
        *,
        delay: float | None = None,
        error: str | None = None,
        tx: Transaction | None = None,
    ) -> str: ...
    def fail(
        self, job_id: int, token: str, error: str, *, tx: Transaction | None = None
    ) -> None: ...
    def release(self, job_id: int, token: str, *, tx: Transaction | None = None) -> None: ...
    def snooze(
        self, job_id: int, token: str, delay: float, *, tx: Transaction | None = None
    ) -> str: ...
    def heartbeat(
        self,
        job_id: int,
        token: str,
        *,
        extend: float | None = None,
        tx: Transaction | None = None,
    ) -> int: ...
    def cancel(
        self, job_id: int, *, reason: str | None = None, tx: Transaction | None = None
    ) -> bool: ...
    def get_job(self, job_id: int) -> dict[str, Any]: ...
    def get_result(self, job_id: int) -> _Payload | None: ...
    def wait_result(self, job_id: int, timeout: float) -> _Payload | None: ...
    def stats(self) -> dict[str, Any]: ...
    def dead_letters(self, *, after_id: int = 0, limit: int = 100) -> list[dict[str, Any]]: ...
    def requeue_dead(self, job_id: int) -> bool: ...
    def requeue_all_dead(self) -> int: ...
    def purge_dead(self, *, older_than: float | None = None) -> int: ...
