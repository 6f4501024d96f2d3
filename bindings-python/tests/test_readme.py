"""The README's Python quickstart runs as written (docs are executed)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_python_quickstart_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README has a Python quickstart"
    monkeypatch.chdir(tmp_path)
    sent = []
    scope = {"send_confirmation": lambda to, template: sent.append((to, template))}
    for code in blocks:
        exec(compile(code, str(README), "exec"), scope)

    async def main():
        worker = asyncio.ensure_future(scope["email_worker"](scope["db"]))
        while not sent:
            await asyncio.sleep(0.001)
        worker.cancel()

    asyncio.run(main())
    assert sent == [("alice@example.com", "order-confirmed")]
    assert scope["db"].query("SELECT user_id FROM orders") == [(42,)]
