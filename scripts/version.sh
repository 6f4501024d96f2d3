#!/usr/bin/env bash
# version.sh [MANIFEST]: the version in a Cargo manifest ([workspace.package]
# of the root Cargo.toml by default; [package] for another manifest), the one
# version of every package (scripts/check-versions.sh).
# stdout: the result
set -euo pipefail
exec 3>&1 1>&2
cd "$(dirname "$0")/.."
manifest=${1:-Cargo.toml}
section='workspace.package'
[ "$manifest" = Cargo.toml ] || section='package'
version=$(awk -v s="[$section]" '$0 == s {p=1; next} /^\[/ {p=0} p && /^version *=/ {gsub(/[" ]/, ""); sub(/version=/, ""); print; exit}' "$manifest")
[ -n "$version" ] || { echo "version.sh: no version in [$section] of $manifest" >&2; exit 1; }
echo "$version" >&3
