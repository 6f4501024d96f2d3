"""Platform play, step 1 of 3 (scripts/platform-runs.sh): Python enqueues
four jobs on FILE, each in the transaction of its business row; one
transaction rolls back and leaves neither."""

import sys

import honker

db = honker.open(sys.argv[1])
db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT)")
emails = db.queue("emails")
for n in range(4):
    try:
        with db.transaction() as tx:
            tx.execute(
                "INSERT INTO orders (email) VALUES (?)", [f"user{n}@example.com"]
            )
            emails.enqueue({"n": n, "to": f"user{n}@example.com"}, tx=tx)
            if n == 2:
                raise RuntimeError("payment declined")
    except RuntimeError:
        pass
db.close()
print("produced 3 of 4")
