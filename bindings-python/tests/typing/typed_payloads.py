"""Typed payloads, checked by `mypy --strict --warn-unused-ignores` (the test
command): a handle annotated with its payload's type checks what is sent and
types what is read; the options of core's table are typed too (the ORM
helpers' `**options`). Each `# type: ignore[...]` marks an error mypy must
report (an unused one fails the check). It is also run."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any, TypedDict

import honker
import honker.django
import honker.sqlalchemy


class Email(TypedDict):
    to: str


class OrderPlaced(TypedDict):
    order_id: int
    total: float


def refused(
    emails: honker.Queue[Email],
    job: honker.Job[Email],
    orders: honker.Stream[OrderPlaced],
    event: honker.Event[OrderPlaced],
) -> None:
    """What a type checker refuses (never run)."""
    emails.enqueue({"to": 1})  # type: ignore[typeddict-item]
    job.payload["body"]  # type: ignore[typeddict-item]
    orders.publish({"order_id": 1, "total": "9.5"})  # type: ignore[typeddict-item]
    event.payload["order"]  # type: ignore[typeddict-item]
    orders.publish({"order_id": 2, "total": 1.0}, priority="high")  # type: ignore[arg-type]


def refused_orm_options(session: Any) -> None:
    """The ORM helpers' options are the table's, by name and type (never run)."""
    honker.sqlalchemy.publish(session, "orders", {}, key="k", priority=2)
    honker.sqlalchemy.publish(session, "orders", {}, priority="high")  # type: ignore[arg-type]
    honker.sqlalchemy.publish(session, "orders", {}, prio=1)  # type: ignore[call-arg]
    honker.django.publish("orders", {}, idempotency_key=5)  # type: ignore[arg-type]


def main(path: Path) -> None:
    db = honker.open(path)
    emails: honker.Queue[Email] = db.queue("emails")
    emails.enqueue({"to": "alice@example.com"})
    emails.enqueue_many([{"to": "bob@example.com"}])
    for job in emails.claim("mailer", wait=0.1):
        to: str = job.payload["to"]
        job.ack(result={"message_id": f"<{to}>"})
        break
    got = emails.get_result(1)
    assert got is not None and got["message_id"] == "<alice@example.com>"
    [second] = emails.claim_batch("mailer", 1)
    second.ack(result={"message_id": "m2"})
    later = emails.enqueue({"to": "dave@example.com"}, delay=60)
    assert emails.get_job(later.id).payload["to"] == "dave@example.com"

    orders: honker.Stream[OrderPlaced] = db.stream("orders")
    orders.publish({"order_id": 1, "total": 9.5}, priority=3)
    assert [(e.payload["order_id"], e.priority) for e in orders.read()] == [(1, 3)]
    with orders.subscribe("audit", wait=0.1) as sub:
        for event in sub:
            total: float = event.payload["total"]
            assert total == 9.5
            break
    billing = orders.group("billing")
    billing.create()
    with billing.consume("m1", wait=0.1) as member:
        for ge in member:
            assert ge.payload["order_id"] == 1
            ge.ack()
            break

    # An unannotated handle reads Any, as before payloads were typed.
    untyped = db.queue("any")
    untyped.enqueue(["anything", 1])
    for j in untyped.claim("w", wait=0.1):
        whatever: dict[str, int] = j.payload  # Any: no error, whatever it is
        assert whatever == ["anything", 1]  # type: ignore[comparison-overlap]
        j.ack()
        break

    async def asynchronous() -> None:
        await emails.enqueue_async({"to": "carol@example.com"})
        async for job in emails.claim("async-mailer", wait=0.1):
            assert job.payload["to"] == "carol@example.com"
            await job.ack_async(result={"message_id": "m"})
            break

    asyncio.run(asynchronous())
    db.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        main(Path(d) / "typed.db")
    sys.exit(0)
