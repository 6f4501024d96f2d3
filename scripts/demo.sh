#!/usr/bin/env bash
# The README's first command: sets up what it needs (system packages, the
# Python binding in a cached venv, the Node addon, the SQLite extension) and
# runs the outbox demo on one SQLite file shared by three processes:
#   a Python web shop writes orders and their confirmation emails in one
#   transaction each (one payment fails: that order and its email never exist),
#   a Node mailer claims and "sends" the emails as they commit,
#   and plain SQL in the sqlite3 shell (with the honker extension) inspects it.
# Then the outbox article's drill: a mailer dies after sending and before its
# ack; `honker jobs list` shows the job still running, it comes back after its
# lease, the metrics count the reclaim, and the idempotency key the mailer
# passes keeps the email single.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
say() { printf '\n== %s\n' "$*"; }

say "setting up (first run builds everything; later runs take seconds)"
. scripts/deps.sh
honker_target
honker_python_venv
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
# The SQL extension, unless HONKER_EXT names one built already (scripts/test.sh
# passes the release build it tests).
if [ -z "${HONKER_EXT:-}" ] || [ ! -f "$HONKER_EXT.so" ]; then
    cargo build --release --locked -q --manifest-path extension/Cargo.toml --target-dir target
    export HONKER_EXT="$root/target/release/libhonker_ext"
fi
PATH="$HONKER_VENV/bin:$PATH" "$HONKER_VENV/bin/pip" install -q --disable-pip-version-check \
    --no-build-isolation ./bindings-python
# The Node addon, built from source into target/node/ unless it is there
# already (the demo links bindings-node, as a checkout does).
node bindings-node/scripts/install.js
(cd demo && npm install --no-audit --no-fund --loglevel=error >/dev/null)

dir="$(mktemp -d)"
db="$dir/shop.db"
trap 'rm -rf "$dir"' EXIT

say "running: Python shop + Node mailer on $db"
node demo/mailer.mjs "$db" &
mailer=$!
sleep 0.5
"$HONKER_VENV/bin/python" demo/shop.py "$db"
# Let the mailer drain the queue, then stop it (it stops cleanly on SIGTERM).
for _ in $(seq 1 100); do
    left="$(sqlite3 "$db" "SELECT count(*) FROM _honker_jobs WHERE queue = 'emails'")"
    [ "$left" = 0 ] && break
    sleep 0.1
done
kill -TERM "$mailer"
wait "$mailer"

say "inspecting with plain SQL (sqlite3 shell + the honker extension)"
{ echo ".load $HONKER_EXT"; cat demo/inspect.sql; } | sqlite3 "$db"

say "the drill: a mailer dies after its send and before its ack"
"$HONKER_VENV/bin/python" -c "
import sys, honker
db = honker.open(sys.argv[1])
db.queue('emails').enqueue({'to': 'dave@example.com', 'template': 'order-confirmed'})
db.close()" "$db"
# In the background and waited for with the wait's stderr silenced: bash
# reports a job's SIGKILL ("Killed") on its own stderr, which a reader takes
# for an error; the mailer's own stderr still shows.
node demo/drill.mjs "$db" die &
doomed=$!
status=0
wait "$doomed" 2>/dev/null || status=$?
[ "$status" = 137 ] || { echo "demo: the doomed mailer exited $status, not by SIGKILL" >&2; exit 1; }
# The `honker` command the Python package installed (read-only).
"$HONKER_VENV/bin/honker" jobs list "$db" --queue emails --state running
sleep 2.1  # past the 2 s lease
node demo/drill.mjs "$db"
"$HONKER_VENV/bin/honker" metrics "$db" | grep '^honker_jobs_total{queue="emails"'
echo "[drill]     emails the mail service delivered to dave: $(sqlite3 "$db" \
    "SELECT count(*) FROM mail_service WHERE recipient = 'dave@example.com'")"
