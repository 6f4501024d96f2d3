"""The outbox through Python: the seed's example as written, rollback on
error, and a transaction's rules. Mirrors core/tests/transaction.rs."""

from __future__ import annotations

import asyncio

import honker
import pytest

SENT: list = []


class TransientMailError(Exception):
    pass


def send_confirmation(to, template):
    SENT.append((to, template))


# The seed's example, as written.
def add_order_and_email(user_id: int, address: str) -> None:
    db = honker.open("app.db")
    emails = db.queue("emails")  # handle created outside the transaction
    with db.transaction() as tx:
        tx.execute(
            "INSERT INTO orders (user_id, status) VALUES (?, ?)",
            [user_id, "paid"],
        )
        emails.enqueue(
            {"to": address, "template": "order-confirmed"},
            tx=tx,
        )


async def email_worker(db):
    emails = db.queue("emails")
    async for job in emails.claim("mailer-1"):
        try:
            send_confirmation(job.payload["to"], job.payload["template"])
            job.ack()
        except TransientMailError:
            # leave the job unacked: the lease lapses and it is retried
            raise


def test_the_seeds_outbox_example_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    setup = honker.open("app.db")
    setup.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, status TEXT)")
    add_order_and_email(42, "alice@example.com")
    SENT.clear()

    async def main():
        worker = asyncio.ensure_future(email_worker(setup))
        while not SENT:
            await asyncio.sleep(0.001)
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker

    asyncio.run(main())
    assert SENT == [("alice@example.com", "order-confirmed")]
    assert setup.query("SELECT user_id, status FROM orders") == [(42, "paid")]
    assert setup.queue("emails").stats().ready == 0


def test_an_exception_rolls_back_the_order_and_its_job(db):
    emails = db.queue("emails")
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.execute("INSERT INTO orders (user_id, status) VALUES (?, ?)", [1, "paid"])
            emails.enqueue({"to": "x"}, tx=tx)
            raise RuntimeError("payment failed")
    assert db.query("SELECT count(*) FROM orders") == [(0,)]
    assert emails.stats().ready == 0


def test_the_job_is_visible_exactly_when_the_row_is(db, path):
    other = honker.open(path)
    emails = db.queue("emails")
    tx = db.transaction()
    tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'paid')")
    emails.enqueue({"order": 1}, tx=tx)
    assert tx.query("SELECT count(*) FROM orders") == [(1,)]  # its own writes
    # Another connection reads the committed state only (a claim there
    # would wait for the write lock this transaction holds).
    assert other.queue("emails").stats().ready == 0
    assert other.query("SELECT count(*) FROM orders") == [(0,)]
    tx.commit()
    [job] = other.queue("emails").claim_batch("w")
    assert job.payload == {"order": 1}
    other.close()


def test_ack_inside_the_transaction_that_records_the_effect(db):
    q = db.queue("q")
    q.enqueue({"n": 1})
    [job] = q.claim_batch("w")
    with pytest.raises(ValueError):
        with db.transaction() as tx:
            tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'sent')")
            job.ack(tx=tx)
            raise ValueError("crash before commit")
    assert q.stats().running == 1  # the ack rolled back with the effect
    with db.transaction() as tx:
        tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'sent')")
        job.ack(tx=tx)
    assert q.stats().running == 0


def test_a_write_without_the_open_transaction_on_the_same_thread_fails_fast(db):
    q = db.queue("q")
    with db.transaction():
        with pytest.raises(honker.InvalidArgument):
            q.enqueue("x")  # would wait for itself: refused at once


def test_a_finished_transaction_cannot_be_reused(db):
    tx = db.transaction()
    tx.commit()
    assert tx.is_open is False
    with pytest.raises(honker.InvalidArgument):
        tx.execute("INSERT INTO orders (user_id) VALUES (1)")
    with pytest.raises(honker.InvalidArgument):
        tx.commit()
    tx.rollback()  # a no-op


def test_named_and_positional_parameters(db):
    db.execute("INSERT INTO orders (user_id, status) VALUES (?, ?)", (1, "paid"))
    db.execute("INSERT INTO orders (user_id, status) VALUES (:u, :s)", {"u": 2, "s": None})
    assert db.query("SELECT user_id, status FROM orders ORDER BY id") == [(1, "paid"), (2, None)]
    cols, rows = db.query_columns("SELECT user_id AS u FROM orders WHERE id = ?", [1])
    assert (cols, rows) == (["u"], [(1,)])


def test_sqlite_ending_the_transaction_makes_it_dead(db):
    db.execute("INSERT INTO orders (id, status) VALUES (1, 'before')")
    q = db.queue("emails")
    with pytest.raises(honker.RolledBack):
        with db.transaction() as tx:
            tx.execute("INSERT INTO orders (id, status) VALUES (2, 'paid')")
            q.enqueue({"order": 2}, tx=tx)
            with pytest.raises(honker.RolledBack) as e:
                tx.execute("INSERT OR ROLLBACK INTO orders (id, status) VALUES (1, 'dup')")
            assert e.value.code == "ROLLED_BACK"
            # Nothing runs in autocommit on its behalf.
            with pytest.raises(honker.RolledBack):
                tx.execute("INSERT INTO orders (id, status) VALUES (3, 'late')")
            with pytest.raises(honker.RolledBack):
                q.enqueue({"order": 3}, tx=tx)
        # Leaving the block commits, which fails the same way.
    assert db.query("SELECT id FROM orders") == [(1,)]
    assert q.stats().ready == 0
    # rollback() of a dead transaction is fine, and the writer is free.
    tx = db.transaction()
    with pytest.raises(honker.RolledBack):
        tx.execute("INSERT OR ROLLBACK INTO orders (id, status) VALUES (1, 'dup')")
    tx.rollback()
    q.enqueue("next")
    assert q.stats().ready == 1


def test_transaction_control_through_execute_is_refused(db):
    with db.transaction() as tx:
        tx.execute("INSERT INTO orders (id, status) VALUES (1, 'paid')")
        for sql in ("COMMIT", "ROLLBACK", "BEGIN", "END", "RELEASE nope"):
            with pytest.raises(honker.InvalidArgument):
                tx.execute(sql)
        tx.execute("SAVEPOINT mine")
        tx.execute("ROLLBACK TO mine")
        tx.execute("RELEASE mine")
    assert db.query("SELECT id FROM orders") == [(1,)]


def test_a_spilled_rollback_then_another_processs_commits(path):
    # Issue 13 §1 as reported: the first transaction after open spills a few
    # MB and rolls back; a worker process commits; honker writes again. The
    # file stays whole and every commit is there.
    import subprocess
    import sys

    setup = honker.open(path)
    setup.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, v BLOB)")
    setup.close()
    db = honker.open(path)
    q = db.queue("q")
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            for i in range(2500):
                tx.execute("INSERT INTO rows (id, v) VALUES (?, randomblob(1000))", [i])
            raise RuntimeError("payment declined")
    worker = subprocess.run(
        [
            sys.executable,
            "-c",
            "import honker, sys; w = honker.open(sys.argv[1]); "
            "w.queue('q').enqueue_many(list(range(30))); w.close()",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert worker.returncode == 0, worker.stderr
    q.enqueue("after the rollback")
    assert q.stats().ready == 31
    assert db.query("PRAGMA integrity_check") == [("ok",)]
    db.close()
    check = honker.open(path)
    assert check.queue("q").stats().ready == 31
    assert check.query("SELECT count(*) FROM rows") == [(0,)]
    check.close()


def test_a_claim_inside_a_transaction_cannot_wait(db):
    q = db.queue("q")
    q.enqueue("x")
    with db.transaction() as tx:
        with pytest.raises(honker.InvalidArgument):
            q.claim_batch("w", tx=tx, wait=0.5)
        assert len(q.claim_batch("w", tx=tx)) == 1


def test_a_transaction_dropped_open_rolls_back_with_a_resource_warning(db):
    """Issue 53 §9: dropped without commit() it rolled back silently."""
    import gc
    import warnings

    db.execute("CREATE TABLE t (x INTEGER)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tx = db.transaction()
        tx.execute("INSERT INTO t VALUES (1)")
        del tx
        gc.collect()
    assert any(
        w.category is ResourceWarning and "dropped without commit()" in str(w.message)
        for w in caught
    ), [str(w.message) for w in caught]
    assert db.query("SELECT count(*) FROM t") == [(0,)]
    db.execute("INSERT INTO t VALUES (2)")  # the writer was handed on
