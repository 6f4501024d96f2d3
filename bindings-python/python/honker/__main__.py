"""``python -m honker worker MODULE:ATTR``: runs a :class:`honker.Worker`.
(``python -m honker`` with any other command is the ``honker`` command:
``python -m honker status DB``.)

``ATTR`` names a ``Worker`` (or a function returning one) in ``MODULE``,
which is imported as the app imports it (its handlers register on import).
SIGTERM and SIGINT stop it gracefully: no new jobs; running handlers get the
worker's grace period (``--grace`` overrides it), then what still runs is
released for another process; a second signal releases at once.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from ._time import seconds
from .worker import Worker


def _load(target: str) -> Worker:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"honker worker: expected MODULE:ATTR, got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does for the app's own modules
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, Worker) and callable(obj):
        obj = obj()
    if not isinstance(obj, Worker):
        raise SystemExit(f"honker worker: {target} is {type(obj).__name__}, not a honker.Worker")
    return obj


def main(argv: list[str] | None = None, prog: str = "python -m honker") -> int:
    parser = argparse.ArgumentParser(prog=prog)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="run a honker.Worker until SIGTERM/SIGINT")
    w.add_argument("target", metavar="MODULE:ATTR", help="where the Worker is, e.g. myapp:worker")
    w.add_argument("--grace", type=float, help="seconds running jobs get at shutdown")
    w.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    worker = _load(args.target)
    if args.grace is not None:
        worker.grace = seconds("grace", args.grace) or 0.0
    logging.getLogger("honker.worker").info(
        "worker %s: queues %s, concurrency %d",
        worker.worker_id,
        ", ".join(worker.queues),
        worker.concurrency,
    )
    worker.run(signals=True)
    return 0


if __name__ == "__main__":
    from ._cli import main as honker_command

    sys.exit(honker_command())
