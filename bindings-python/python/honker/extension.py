"""The SQLite loadable extension, shipped in this package, for connections
of the stdlib ``sqlite3`` module (or any driver): the same ``honker_*`` SQL
functions honker's own connection has (docs/sql.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import InvalidArgument

if TYPE_CHECKING:
    # Not at run time: `import honker` must not map the stdlib's SQLite
    # library into a process that never uses it (`honker doctor` lists the
    # SQLite libraries each process maps).
    import sqlite3


def extension_path() -> str:
    """The path of ``libhonker_ext`` inside the installed package."""
    suffix = {"darwin": "dylib", "win32": "dll"}.get(sys.platform, "so")
    path = Path(__file__).with_name(f"libhonker_ext.{suffix}")
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: reinstall honker")
    return str(path)


def load_extension(conn: sqlite3.Connection) -> None:
    """Loads the extension into ``conn`` (then ``SELECT honker_bootstrap()``
    creates honker's tables). The connection then runs honker on its own
    SQLite library; a ``honker.open`` Database of this process may have the
    same file open (ADR 13: the two libraries lock as two processes would)."""
    if not hasattr(conn, "enable_load_extension"):
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            "this Python's sqlite3 module cannot load extensions (built without "
            "--enable-loadable-sqlite-extensions); use one that can, such as Debian's "
            "/usr/bin/python3, or rebuild this one: with pyenv, "
            "PYTHON_CONFIGURE_OPTS=--enable-loadable-sqlite-extensions pyenv install "
            "--force <version>",
        )
    conn.enable_load_extension(True)
    try:
        conn.load_extension(extension_path())
    finally:
        conn.enable_load_extension(False)
