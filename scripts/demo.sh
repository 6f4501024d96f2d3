#!/usr/bin/env bash
# The README's first command: sets up what it needs (system packages, the
# Python binding in a cached venv, the Node addon, the SQLite extension) and
# runs the outbox demo on one SQLite file shared by three processes:
#   a Python web shop writes orders and their confirmation emails in one
#   transaction each (one payment fails: that order and its email never exist),
#   a Node mailer claims and "sends" the emails as they commit,
#   and plain SQL in the sqlite3 shell (with the honker extension) inspects it.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
say() { printf '\n== %s\n' "$*"; }

say "setting up (first run builds everything; later runs take seconds)"
. scripts/deps.sh
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
