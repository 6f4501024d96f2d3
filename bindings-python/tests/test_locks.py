"""Locks with fencing tokens and rate limits, from Python: grants and tokens,
the fence rolling back a stale holder's transaction, ``with``/``async with``
holds renewed while the block runs and told when the lock is lost, a
cancelled wait that holds nothing, mutual exclusion under concurrent
requests, GCRA decisions on the test clock, parameters shared through the
file, refunds on rollback, Honker's SQL, and typed errors that change
nothing."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import honker
import pytest
from conftest import stop_when


def held_rows(db: honker.Database) -> list:
    # The row named '' is the token counter, not a holder.
    return db.query(
        "SELECT name, owner, token FROM _honker_lock_holders WHERE name != '' ORDER BY name"
    )


def test_grant_times_are_datetimes_of_the_database_clock(
    db: honker.Database, clock: honker.ManualClock
) -> None:
    # Tokens, release, info, lapse and renewal are tests-interop's
    # lock_fencing and lock_lapse, played by every surface.
    lock = db.lock("reindex")
    a = lock.try_acquire("a", ttl=10)
    assert a is not None
    info = lock.info()
    assert info is not None and info.expires_at.timestamp() == pytest.approx(clock.now() + 10)
    assert lock.renew(a.token, ttl=20).timestamp() == pytest.approx(clock.now() + 20)


def test_a_hold_is_renewed_while_the_block_runs_and_released_after(path: Path) -> None:
    db = honker.open(path)
    lock = db.lock("job")
    with lock.hold("a", ttl=0.3) as held:
        time.sleep(1.0)
        assert lock.try_acquire("b", ttl=1) is None, "renewed, not lapsed"
        assert held.renewals >= 2 and not held.lost
        with db.transaction() as tx:
            held.fence(tx)
    assert lock.info() is None
    # Held by another: a hold that cannot get it in time raises Timeout.
    other = lock.try_acquire("b", ttl=30)
    assert other is not None
    started = time.monotonic()
    with pytest.raises(honker.Timeout):
        with lock.hold("a", ttl=1, wait=0.2):
            pytest.fail("the block must not run")
    assert 0.15 < time.monotonic() - started < 5
    # A waiting hold is woken by the release.
    threading.Timer(0.2, lambda: lock.release(other.token)).start()
    with lock.hold("a", ttl=5, wait=30) as held:
        assert held.token > other.token
    db.close()


def test_a_lost_hold_sets_lost_and_its_fenced_writes_fail(
    db: honker.Database, clock: honker.ManualClock
) -> None:
    lock = db.lock("job")
    with lock.hold("a", ttl=10, every=0.1) as held:
        clock.advance(20)
        b = lock.try_acquire("b", ttl=10)
        assert b is not None
        deadline = time.monotonic() + 5
        while not held.lost and time.monotonic() < deadline:
            time.sleep(0.02)
        assert held.lost
        with pytest.raises(honker.LeaseLost):
            with db.transaction() as tx:
                held.fence(tx)
                tx.execute("INSERT INTO orders (status) VALUES ('stale')")
    info = lock.info()
    assert info is not None and info.token == b.token, "leaving the block released nothing"
    assert db.query("SELECT count(*) FROM orders") == [(0,)]


def test_an_async_block_whose_lock_is_lost_is_cancelled_with_lease_lost(
    db: honker.Database, clock: honker.ManualClock
) -> None:
    lock = db.lock("job")

    async def main() -> float:
        reached = asyncio.Event()

        async def block() -> None:
            async with lock.hold("a", ttl=10, every=0.1):
                reached.set()
                await asyncio.sleep(60)

        task = asyncio.create_task(block())
        await reached.wait()
        clock.advance(20)
        assert await lock.try_acquire_async("b", ttl=10) is not None
        started = time.monotonic()
        with pytest.raises(honker.LeaseLost):
            await task
        return time.monotonic() - started

    assert asyncio.run(main()) < 5
    info = lock.info()
    assert info is not None and info.owner == "b"


def test_async_holds_and_a_cancelled_wait_that_holds_nothing(path: Path) -> None:
    db = honker.open(path)
    lock = db.lock("job")

    async def main() -> None:
        async with lock.hold("a", ttl=5) as held:
            assert (lock.info() or pytest.fail()).token == held.token
        assert lock.info() is None
        g = lock.try_acquire("a", ttl=30)
        assert g is not None
        waiter = asyncio.create_task(lock.acquire_async("b", ttl=30, wait=60))
        hold_waiter = asyncio.create_task(lock.hold("c", ttl=30, wait=60).__aenter__())
        await asyncio.sleep(0.2)
        started = time.monotonic()
        waiter.cancel()
        hold_waiter.cancel()
        for t in (waiter, hold_waiter):
            with pytest.raises(asyncio.CancelledError):
                await t
        assert time.monotonic() - started < 2
        lock.release(g.token)
        await asyncio.sleep(0.3)  # a grant taken as the wait was cancelled is given back
        assert lock.info() is None
        got = await lock.acquire_async("d", ttl=5, wait=1)
        assert got is not None and got.token > g.token

    asyncio.run(main())
    db.close()


def test_concurrent_requests_take_turns_under_one_lock(path: Path) -> None:
    """Eight request threads each run a read-modify-write of one counter
    under the lock, fenced: no update is lost."""
    db = honker.open(path)
    db.execute("CREATE TABLE counter (n INTEGER)")
    db.execute("INSERT INTO counter VALUES (0)")
    lock = db.lock("counter")
    errors: list[BaseException] = []

    def request(i: int) -> None:
        try:
            for _ in range(15):
                with lock.hold(f"req-{i}", ttl=5, wait=30) as held:
                    (n,) = db.query("SELECT n FROM counter")[0]
                    time.sleep(0.001)
                    with db.transaction() as tx:
                        held.fence(tx)
                        tx.execute("UPDATE counter SET n = ?", [n + 1])
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=request, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert db.query("SELECT n FROM counter") == [(120,)]
    db.close()


def test_handlers_of_one_worker_that_name_one_owner_exclude_each_other(path: Path) -> None:
    """Issue 53's trial: a Worker with concurrency 4 whose handlers hold
    the nightly lock under the worker's own name. Each hold is its own
    holder with its own token, so no two handlers are ever inside at once,
    and the first to leave never releases the lock under another."""
    db = honker.open(path)
    db.queue("nightly").enqueue_many(list(range(12)))
    lock = db.lock("nightly")
    w = honker.Worker(db, concurrency=4, worker_id="worker-1")
    inside, overlaps, tokens, done = [0], [0], [], []
    guard = threading.Lock()

    @w.task("nightly")
    def run(job: honker.Job) -> None:
        with lock.hold("worker-1", ttl=30, wait=30) as held:
            with guard:
                inside[0] += 1
                overlaps[0] += inside[0] > 1
                tokens.append(held.token)
            time.sleep(0.01)
            with db.transaction() as tx:
                held.fence(tx)
            with guard:
                inside[0] -= 1
        done.append(job.id)

    stop_when(w, lambda: len(done) == 12)
    w.run(signals=False)
    assert overlaps[0] == 0, f"{overlaps[0]} handlers got in while another held the lock"
    assert len(set(tokens)) == 12, "every hold has its own token"
    assert lock.info() is None
    # The same owner name is refused while held, by try_acquire as well.
    g = lock.try_acquire("worker-1", ttl=5)
    assert g is not None and lock.try_acquire("worker-1", ttl=5) is None
    db.close()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="Linux's /proc")
def test_short_holds_on_request_threads_and_tasks_start_no_thread(path: Path) -> None:
    """Requests on eight threads and fifty asyncio tasks (more than honker's
    32 pool workers) each hold a lock for a moment, over and over: none of
    them starts a renewal thread (a hold is an entry in the database's timer
    until its first renewal is due), nothing waits for a free worker, and a
    long hold beside them is renewed on the one thread it gets. In a child
    process, so that a hang fails the test instead of stopping the suite."""
    script = textwrap.dedent(
        """
        import asyncio, sys, threading, time
        from pathlib import Path
        import honker

        def renewal_threads():
            count = 0  # core names them honker-keepalive (Linux keeps 15 bytes)
            for task in Path("/proc/self/task").iterdir():
                try:
                    count += (task / "comm").read_text().startswith("honker-keepaliv")
                except OSError:
                    pass  # ended meanwhile
            return count

        db = honker.open(sys.argv[1])
        most, sampling = 0, threading.Event()

        def sample():
            global most
            while not sampling.is_set():
                most = max(most, renewal_threads())
                time.sleep(0.001)

        def request(i):
            lock = db.lock(f"short-{i}")
            for _ in range(200):
                with lock.hold(f"req-{i}", ttl=30):
                    pass

        async def tasks():
            async def one(i):
                for _ in range(20):
                    async with db.lock(f"task-{i}").hold("t", ttl=30):
                        await asyncio.sleep(0)

            await asyncio.gather(*(one(i) for i in range(50)))

        sampler = threading.Thread(target=sample)
        sampler.start()
        with db.lock("long").hold("a", ttl=0.3) as long:
            threads = [threading.Thread(target=request, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            asyncio.run(tasks())
            for t in threads:
                t.join()
            time.sleep(0.5)
            renewals, lost = long.renewals, long.lost
        sampling.set()
        sampler.join()
        held = db.query("SELECT count(*) FROM _honker_lock_holders WHERE name != ''")[0][0]
        print(most, renewals, lost, held)
        db.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    most, renewals, lost, held = done.stdout.split()
    assert most == "1", f"{most} renewal threads at once"
    assert int(renewals) >= 3 and lost == "False"
    assert held == "0", "every hold released"


def test_bad_lock_input_is_a_typed_error_and_changes_nothing(db: honker.Database) -> None:
    lock = db.lock("x")
    for ttl in (0, -1, 31 * 86400):
        with pytest.raises(honker.InvalidArgument):
            lock.try_acquire("a", ttl=ttl)
    with pytest.raises(honker.InvalidArgument):
        lock.try_acquire("", ttl=1)
    with pytest.raises(honker.InvalidArgument):
        db.lock("")
    with pytest.raises(honker.InvalidArgument):
        with lock.hold("a", ttl=1, every=1):
            pytest.fail("the block must not run")
    with pytest.raises(honker.InvalidArgument):
        lock.release(0)
    with pytest.raises(honker.InvalidArgument):
        lock.fence(None, 1)  # type: ignore[arg-type]
    assert held_rows(db) == []


def test_rate_limits_answer_in_full_on_the_test_clock(
    db: honker.Database, clock: honker.ManualClock
) -> None:
    rl = db.rate_limiter("api", limit=10, per=1, burst=6)
    got = [rl.try_acquire("k") for _ in range(6)]
    assert all(got) and [d.remaining for d in got] == [5, 4, 3, 2, 1, 0]
    seventh = rl.try_acquire("k")
    assert seventh == honker.RateDecision(
        allowed=False, limit=10, remaining=0, retry_after=0.1, reset_after=0.6
    )
    assert rl.try_acquire("other").allowed, "keys are independent"
    clock.advance(0.1)
    assert rl.try_acquire("k").allowed
    # Cost and peek.
    peek = rl.try_acquire("new", cost=0)
    assert peek.allowed and peek.remaining == 6
    assert rl.try_acquire("new", cost=4).remaining == 2
    with pytest.raises(honker.InvalidArgument):
        rl.try_acquire("new", cost=7)
    with pytest.raises(honker.InvalidArgument):
        rl.try_acquire("new", cost=-1)
    assert rl.try_acquire("new", cost=0).remaining == 2
    assert rl.params() == honker.RateLimit(limit=10, per=1.0, burst=6)


def test_opening_a_rate_limiter_takes_both_parameters_or_a_stored_one(path: Path) -> None:
    # Sharing, conflicts, updates and refunds are tests-interop's
    # rate_limit_params and rate_limit_refund.
    a = honker.open(path)
    with pytest.raises(honker.NotFound):
        a.rate_limiter("nope")
    with pytest.raises(honker.InvalidArgument):
        a.rate_limiter("half", limit=5)
    a.close()


def test_bad_rate_limits_are_typed_errors_and_change_nothing(db: honker.Database) -> None:
    for kw in (
        {"limit": 0, "per": 1},
        {"limit": 1, "per": 0},
        {"limit": 1, "per": -1},
        {"limit": 1, "per": 1, "burst": 0},
        {"limit": 2**40, "per": 1},
    ):
        with pytest.raises(honker.InvalidArgument):
            db.rate_limiter("x", **kw)  # type: ignore[arg-type]
    with pytest.raises(honker.InvalidArgument):
        db.rate_limiter("x", limit=1, per=1).try_acquire(5)  # type: ignore[arg-type]
    assert db.query("SELECT count(*) FROM _honker_rate_limit_keys") == [(0,)]


def test_acquire_sleeps_retry_after_sync_and_async(path: Path) -> None:
    db = honker.open(path)
    rl = db.rate_limiter("w", limit=10, per=1)
    assert rl.try_acquire().allowed
    started = time.monotonic()
    assert rl.acquire(wait=5).allowed
    assert 0.08 < time.monotonic() - started < 2
    assert not rl.acquire(wait=0.01).allowed

    async def main() -> float:
        # Spend the budget inside the loop first, so that the wait measured
        # below is the limiter's whole interval and not what is left of it
        # after asyncio.run started (tens of ms on a loaded machine).
        assert (await rl.acquire_async(wait=5)).allowed
        t = time.monotonic()
        d = await rl.acquire_async(wait=5)
        assert d.allowed
        return time.monotonic() - t

    assert 0.08 < asyncio.run(main()) < 2

    async def cancelled_and_early() -> None:
        slow = db.rate_limiter("slow", limit=1, per=3)
        assert (await slow.acquire_async(wait=0)).allowed
        started = time.monotonic()
        refused = await slow.acquire_async(wait=1)  # its time (3 s) lies beyond the wait
        assert not refused.allowed and refused.retry_after > 1
        assert time.monotonic() - started < 0.5
        waiter = asyncio.create_task(slow.acquire_async(wait=10))
        await asyncio.sleep(0.2)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        with pytest.raises(honker.InvalidArgument):
            await slow.acquire_async(7, wait=1)  # type: ignore[arg-type]

    asyncio.run(cancelled_and_early())
    db.close()


def test_acquire_async_on_a_loop_without_a_descriptor_waits_on_timers(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows' proactor loop has no add_reader: the acquire then sleeps on
    the loop's timers between tries (only time frees calls), by core's
    rules, and holds no thread while it waits."""
    db = honker.open(path)
    rl = db.rate_limiter("w", limit=10, per=1)
    monkeypatch.setattr(honker._loopwait, "waits", lambda db: None)

    class NoBlockingAcquire:
        """The native limiter, but its blocking acquire (a thread held for
        the whole wait) fails the test."""

        def __init__(self, native: object) -> None:
            self._n = native

        def __getattr__(self, name: str) -> object:
            if name == "acquire":
                raise AssertionError("acquire_async held a thread for its wait")
            return getattr(self._n, name)

    rl._native = NoBlockingAcquire(rl._native)  # type: ignore[assignment]

    async def main() -> tuple[float, bool, float]:
        assert (await rl.acquire_async(wait=5)).allowed  # the budget spent inside the loop
        t = time.monotonic()
        assert (await rl.acquire_async(wait=5)).allowed
        waited = time.monotonic() - t
        t = time.monotonic()
        refused = not (await rl.acquire_async(wait=0.01)).allowed
        return waited, refused, time.monotonic() - t

    waited, refused, at_once = asyncio.run(main())
    assert 0.08 < waited < 2
    assert refused and at_once < 0.5
    db.close()


def test_honkers_rate_limit_sql_keeps_its_contract(db: honker.Database) -> None:
    got = []
    for _ in range(5):
        with db.transaction() as tx:
            got.append(tx.query("SELECT honker_rate_limit_try('h', 3, 60)")[0][0])
    assert got == [1, 1, 1, 0, 0]


def test_a_rate_limited_queue_starts_what_its_limit_allows(
    db: honker.Database, clock: honker.ManualClock
) -> None:
    q = db.queue("mail")
    for i in range(20):
        q.enqueue({"n": i})
    q.set_rate_limit(limit=10, per=1, burst=3)
    assert db.queue("mail").rate_limit() == honker.RateLimit(limit=10, per=1.0, burst=3)
    assert len(q.claim_batch("w", n=10)) == 3
    assert q.claim_batch("w", n=10) == []
    clock.advance(0.1)
    assert len(q.claim_batch("w", n=10)) == 1
    assert db.query("SELECT count(*) FROM _honker_jobs WHERE attempts = 0") == [(16,)]
    with pytest.raises(honker.InvalidArgument):
        q.set_rate_limit(limit=0, per=1)
    q.set_rate_limit(limit=None)
    assert q.rate_limit() is None
    assert len(q.claim_batch("w", n=100)) == 16
