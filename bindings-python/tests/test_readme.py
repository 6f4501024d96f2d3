"""The README's Python quickstart runs as written (docs are executed): by
scripts/readme-python.py, which the test command also runs under every
CPython on the machine with the release wheel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "readme-python.py"


def test_the_readme_python_quickstart_runs():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("README quickstart ok on CPython")
