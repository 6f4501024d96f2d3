"""Runs SQL steps on a stdlib sqlite3 connection with libhonker_ext loaded.

Usage: python3 sqlrun.py DB_PATH EXTENSION_PATH < steps.json

Each step is a SQL string or [sql, params]. The connection is in autocommit
mode (isolation_level=None), so BEGIN/COMMIT/ROLLBACK are steps like any
other. A parameter "$ids" stands for the ids in the JSON array of jobs that
the previous step returned (what honker_claim_batch gives). Prints one JSON array with, per step, {"rows": [...]} or
{"error": message}; a failed step does not stop the run. The core test
suite (core/tests/extension.rs) drives this and checks the file with the
Rust API afterwards.
"""

import json
import sqlite3
import sys


def ids(jobs_json) -> str:
    jobs = json.loads(jobs_json) if isinstance(jobs_json, str) else []
    return json.dumps([job["id"] for job in jobs])


def main() -> None:
    db_path, ext_path = sys.argv[1], sys.argv[2]
    steps = json.load(sys.stdin)
    conn = sqlite3.connect(db_path, isolation_level=None, timeout=10)
    conn.enable_load_extension(True)
    conn.load_extension(ext_path)
    conn.enable_load_extension(False)
    out = []
    previous = None
    for step in steps:
        sql, params = (step, []) if isinstance(step, str) else step
        params = [ids(previous) if p == "$ids" else p for p in params]
        try:
            rows = conn.execute(sql, params).fetchall()
            out.append({"rows": [list(r) for r in rows]})
            previous = rows[0][0] if rows else None
        except sqlite3.Error as e:
            out.append({"error": str(e)})
            previous = None
    conn.close()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
