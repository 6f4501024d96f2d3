"""Switching from Honker: import a Honker database file in place.

A file that holds Honker's tables is refused by :func:`honker.open`
(:class:`honker.Unsafe`, naming this function). With every Honker process
stopped, :func:`import_honker` moves Honker's live jobs (ids kept), dead
letters, results, stream events and consumer offsets, schedules and held
locks into honker's tables in one transaction, and drops Honker's tables.
docs/switching-from-honker.md is the guide.
"""

from __future__ import annotations

import json
import os
from typing import Any

from . import _native


def import_honker(
    path: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    time_zone: str | None = None,
    skip_process_check: bool = False,
) -> dict[str, Any]:
    """Imports the Honker file at ``path`` in place and returns the report:
    ``found`` (Honker's objects; empty when there was nothing to import and
    nothing changed), ``jobs`` (``ready``/``scheduled``/``running``),
    ``dead``, ``expired``, ``results``, ``streams``, ``events``,
    ``consumers``, ``schedules``, ``locks``, ``payloads_as_bytes``,
    ``time_zone``, ``not_imported`` (what was left behind and why) and
    ``schedule_notes`` (expressions whose meaning to check).

    ``dry_run`` does everything, reports it and rolls it back.
    ``time_zone`` is the IANA zone imported schedules run in (default: this
    process's local zone, which is what Honker used). On Linux the import
    refuses (:class:`honker.Unsafe`, naming each pid) while another process
    has the file open; ``skip_process_check`` is for platforms where honker
    cannot see other processes (stop them first). Rows honker cannot hold
    raise :class:`honker.InvalidArgument` listing them, and nothing changes.
    """
    text = _native.import_honker(
        os.fspath(path),
        dry_run=dry_run,
        time_zone=time_zone,
        skip_process_check=skip_process_check,
    )
    report: dict[str, Any] = json.loads(text)
    return report
