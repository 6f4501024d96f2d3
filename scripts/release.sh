#!/usr/bin/env bash
# release.sh: the release tier (DESIGN §15). Everything .ci/run runs on a
# submission, plus what a release needs and a change rarely breaks: the
# Python sdist built from source in a clean venv (with its errors for a too
# old Rust and a missing libclang), and the crash and error points at every
# pwrite64 call instead of 300 of them. Packages for the other platforms
# (issue 54) are to be built and checked here. scripts/cold-check.sh runs
# it from a fresh clone with empty caches. Prints test.sh's step timings.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/test.sh --release
