#!/usr/bin/env bash
# no-rust-path.sh DIR...: a PATH of the given directories and the system's
# (/usr/local/bin:/usr/bin:/bin) on which neither cargo nor rustc can be
# found, for the steps that show an install needs no Rust (the wheel, the npm
# tarballs). Fails if one of them is there after all.
# stdout: the result (the PATH)
set -euo pipefail
exec 3>&1 1>&2
dirs=("$@" /usr/local/bin /usr/bin /bin)
path=$(IFS=:; echo "${dirs[*]}")
if PATH="$path" command -v cargo >/dev/null || PATH="$path" command -v rustc >/dev/null; then
    echo "no-rust-path: cargo or rustc is on the no-Rust PATH ($path)" >&2
    exit 1
fi
echo "$path" >&3
