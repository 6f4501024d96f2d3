"""The demo's web shop (Python): each order and its confirmation email are
written in ONE SQLite transaction (the outbox). One payment fails, so its
transaction rolls back: that order, and its email, never exist."""

import sys
import time

import honker

ORDERS = [
    ("alice@example.com", 42, 1999),
    ("bob@example.com", 7, 4500),
    ("mallory@example.com", 13, 0),  # the payment fails
    ("carol@example.com", 99, 1250),
]


class PaymentDeclined(Exception):
    pass


def main(path: str) -> None:
    db = honker.open(path)
    db.execute(
        "CREATE TABLE IF NOT EXISTS orders ("
        " id INTEGER PRIMARY KEY, email TEXT NOT NULL, user_id INTEGER, cents INTEGER)"
    )
    emails = db.queue("emails")  # a handle: writes nothing
    for email, user_id, cents in ORDERS:
        try:
            with db.transaction() as tx:
                tx.execute(
                    "INSERT INTO orders (email, user_id, cents) VALUES (?, ?, ?)",
                    [email, user_id, cents],
                )
                order_id = tx.query("SELECT last_insert_rowid()")[0][0]
                job = emails.enqueue(
                    {"to": email, "order": order_id, "template": "order-confirmed"},
                    tx=tx,
                )
                if cents == 0:
                    raise PaymentDeclined(email)
            print(
                f"[shop]      order {order_id} for {email}: committed with email job {job.id}"
            )
        except PaymentDeclined:
            print(
                f"[shop]      order for {email}: payment declined -> rolled back, no email exists"
            )
        time.sleep(0.2)
    db.close()


if __name__ == "__main__":
    main(sys.argv[1])
