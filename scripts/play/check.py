"""Platform play, step 3 of 3 (scripts/platform-runs.sh): SQL through the
extension the wheel ships, in this Python's own sqlite3: the job Node left
is acked with its lease token, and the file holds what the play did."""

import json
import sqlite3
import sys

import honker

path, job_id, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conn = sqlite3.connect(path, isolation_level=None)
honker.load_extension(conn)
assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 3
assert (
    conn.execute("SELECT honker_job_ack('emails', ?, ?)", [job_id, token]).fetchone()[0]
    == 1
)
stats = json.loads(conn.execute("SELECT honker_queue_stats('emails')").fetchone()[0])
assert stats["ready"] == 0 and stats["running"] == 0 and stats["dead"] == 0, stats
print("sql acked the last job:", stats)
