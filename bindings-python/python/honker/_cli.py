"""The ``honker`` command the package installs (``honker status DB``,
``honker dead list DB``, ``honker backup DB DEST``, … — README, "The
``honker`` command"). It is the operator's command of the Rust crate, run
inside the native module, so installing the package is enough.
``honker worker MODULE:ATTR`` runs a :class:`honker.Worker`, as
``python -m honker worker`` does.
"""

from __future__ import annotations

import signal
import sys

from . import _native


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["worker"]:
        from .__main__ import main as run_worker

        return run_worker(args, prog="honker")
    # Ctrl-C ends `tail --follow` and `listen` at once, as it ends the
    # binary: Python's own handler would wait for the native call to return.
    if argv is None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    return _native.cli_main(["honker", *args])
