"""Every command run in the Swift chroot, and every debootstrap (whose
second stage runs there), starts under `/usr/bin/env -i`: nothing of the
caller's environment reaches in. A host TMPDIR (scripts/test.sh exports its
run's temp dir) does not exist inside, and ca-certificates' post-install
failed on it, on new machines only (issue 51). Called by
scripts/check-scripts.sh; exits 1 naming each call that breaks the rule.

Shell: `chroot ROOT CMD…` as a command (at a line's start, after ; & | ( or
sudo), its continuation lines joined, must have CMD = `/usr/bin/env -i`; a
debootstrap call must have `/usr/bin/env -i` on its line. Python: a list or
tuple literal with the element "chroot" must have "/usr/bin/env", "-i" two
elements later (after the root)."""

import ast
import re
import sys
from pathlib import Path

ROOTS = ["scripts", "bench", "demo", "tests-interop", "tests-faults", ".ci"]
SKIP = {"check-scripts.sh"}  # its stand-ins are named chroot and debootstrap

CHROOT = re.compile(
    r'(?:^\s*|[;&|(]\s*|"\$\{sudo\[@\]\}"\s+|\bsudo\s+)chroot\s+(\S+)\s+(\S+)(?:\s+(\S+))?'
)
DEBOOTSTRAP = re.compile(r'(?:^\s*|[;&|(]\s*|\s)"?\$?\{?debootstrap\}?"?\s+--')


def is_shell(path: Path, text: str) -> bool:
    return path.suffix == ".sh" or text.startswith(
        ("#!/usr/bin/env bash", "#!/bin/sh", "#!/bin/bash")
    )


def check_python(path: Path, text: str) -> list[str]:
    bad = []
    for node in ast.walk(ast.parse(text, str(path))):
        if not isinstance(node, (ast.List, ast.Tuple)):
            continue
        words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
        for i, w in enumerate(words):
            if w == "chroot" and words[i + 2 : i + 4] != ["/usr/bin/env", "-i"]:
                bad.append(
                    f"{path}:{node.lineno}: chroot ROOT not followed by /usr/bin/env -i"
                )
    return bad


def check_shell(path: Path, text: str) -> list[str]:
    bad = []
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        code = line.strip()
        if code.startswith("#"):
            continue
        for m in CHROOT.finditer(code):
            if (m.group(2), m.group(3)) != ("/usr/bin/env", "-i"):
                bad.append(
                    f"{path}: `{code[:90]}`: chroot ROOT not followed by /usr/bin/env -i"
                )
        if DEBOOTSTRAP.search(code) and "/usr/bin/env -i" not in code:
            bad.append(
                f"{path}: `{code[:90]}`: debootstrap not run under /usr/bin/env -i"
            )
    return bad


def main() -> int:
    bad: list[str] = []
    checked = 0
    for root in ROOTS:
        for path in sorted(Path(root).rglob("*")):
            if not path.is_file() or "node_modules" in path.parts or path.name in SKIP:
                continue
            text = path.read_text(errors="replace")
            if "chroot" not in text and "debootstrap" not in text:
                continue
            if path.suffix == ".py":
                bad += check_python(path, text)
                checked += 1
            elif is_shell(path, text):
                bad += check_shell(path, text)
                checked += 1
    for b in bad:
        print(f"check-scripts: {b}", file=sys.stderr)
    if checked == 0:
        print(
            "check-scripts: found no file that runs chroot (wrong directory?)",
            file=sys.stderr,
        )
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
