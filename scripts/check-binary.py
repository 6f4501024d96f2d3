#!/usr/bin/env python3
"""check-binary.py PLATFORM KIND FILE: checks one shipped native library of
another platform with LLVM's tools (llvm-readelf, llvm-objdump, llvm-nm; the
Debian 12 packages' -14 names, or HONKER_LLVM_SUFFIX), as scripts/release.sh
runs it on every binary of a release (issue 54). Nothing here runs the file.

PLATFORM is napi-rs's name (linux-x64-gnu, linux-arm64-musl, darwin-arm64,
win32-x64-gnu, ...); KIND is what the file is:
  addon      the Node addon (exports napi_register_module_v1)
  extension  the SQL extension (exports sqlite3_honkerext_init)
  python     the Python module honker._native (exports PyInit__native)
  swift      a static library of the XCFramework (defines no sqlite3_*)

Checked: the format and architecture; Linux glibc: no symbol version above
GLIBC_2.17 and only the C library's own shared objects needed; Linux musl:
musl's C library only, by Alpine's name (libc.musl-ARCH.so.1), no glibc;
macOS: the minimum OS (11.0 or lower) and only /usr/lib's libraries;
Windows: x86-64, no MSVC runtime, no libgcc or winpthread DLL, Python's
stable-ABI python3.dll only (never python3X.dll); and the export. Prints one line: what was checked; exits 1 with the reason
when something is wrong.
"""

import os
import re
import subprocess
import sys

SUFFIX = os.environ.get("HONKER_LLVM_SUFFIX", "-14")
EXPORT = {
    "addon": "napi_register_module_v1",
    "extension": "sqlite3_honkerext_init",
    "python": "PyInit__native",
}
ARCH = {"x64": ("x86-64", "x86_64"), "arm64": ("aarch64", "arm64")}
# The C library's own objects (glibc 2.17 splits it in several).
GLIBC_LIBS = {
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}
# Windows: system DLLs every supported Windows (10+) has.
WINDOWS_DLLS = {
    "kernel32.dll",
    "ntdll.dll",
    "msvcrt.dll",
    "userenv.dll",
    "ws2_32.dll",
    "advapi32.dll",
    "bcrypt.dll",
    "bcryptprimitives.dll",
    "shell32.dll",
    "ole32.dll",
}


def tool(name, *args):
    return subprocess.run(
        [f"llvm-{name}{SUFFIX}", *args], check=True, capture_output=True, text=True
    ).stdout


def fail(msg):
    sys.exit(f"check-binary: {msg}")


def exported(path, macho=False):
    if path.endswith(".a"):
        return set()
    out = tool(
        "nm", "--defined-only", "--extern-only", "-D" if not macho else "-g", path
    )
    return {
        line.split()[-1].lstrip("_") if macho else line.split()[-1]
        for line in out.splitlines()
        if line.strip()
    }


def check_elf(platform, kind, path):
    os_, arch, libc = platform.split("-")
    header = tool("readelf", "-h", path)
    machine = re.search(r"Machine:\s+(.*)", header).group(1)
    want = {"x64": "Advanced Micro Devices X86-64", "arm64": "AArch64"}[arch]
    if machine.strip() != want:
        fail(f"{path}: machine {machine!r}, not {want}")
    dyn = tool("readelf", "-d", path)
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.*?)\]", dyn))
    # musl's C library by Alpine's name (scripts/musl-soname.py renames zig's
    # `libc.so`, which auditwheel's musllinux policy refuses).
    musl_arch = "x86_64" if arch == "x64" else "aarch64"
    allowed = GLIBC_LIBS if libc == "gnu" else {f"libc.musl-{musl_arch}.so.1"}
    if libc == "musl" and "libc.so" in needed:
        fail(
            f"{path}: needs libc.so, not libc.musl-{musl_arch}.so.1 (scripts/musl-soname.py)"
        )
    extra = needed - allowed
    if extra:
        fail(
            f"{path}: needs {sorted(extra)} (allowed for {platform}: the C library's own)"
        )
    versions = tool("readelf", "-V", path)
    glibc = [
        tuple(map(int, v.split(".")))
        for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", versions)
    ]
    if libc == "gnu":
        top = max(glibc, default=(2, 0))
        if top > (2, 17):
            fail(f"{path}: needs GLIBC_{'.'.join(map(str, top))}, over 2.17")
        note = f"glibc <= 2.17 (highest {'.'.join(map(str, top))})"
    else:
        if glibc or any(n.startswith("libc.so.6") for n in needed):
            fail(f"{path}: a musl build that needs glibc")
        note = "musl libc, no glibc symbol"
    export = EXPORT.get(kind)
    if export and export not in exported(path):
        fail(f"{path}: does not export {export}")
    return f"ELF {want}, {note}, needs {', '.join(sorted(needed))}" + (
        f", exports {export}" if export else ""
    )


def check_macho(platform, kind, path):
    arch = platform.split("-")[1]
    heads = tool("objdump", "--macho", "--private-headers", path)
    cpu = re.findall(r"CpuType: (\S+)", tool("readobj", "--file-headers", path))
    cputype = {"x64": "X86-64", "arm64": "Arm64"}[arch]
    if not cpu or any(c != cputype for c in cpu):
        fail(f"{path}: CPU {cpu}, not {cputype}")
    minos = re.findall(r"minos (\d+)\.(\d+)", heads) + re.findall(
        r"cmd LC_VERSION_MIN_MACOSX.*?version (\d+)\.(\d+)", heads, re.S
    )
    if not minos:
        fail(f"{path}: no minimum OS version")
    top = max((int(a), int(b)) for a, b in minos)
    # macOS packages: 11.0; the XCFramework's slices say theirs (HONKER_MINOS).
    limit = os.environ.get(
        "HONKER_MINOS", "11.0" if platform.startswith("darwin") else ""
    )
    if limit and top > tuple(map(int, limit.split("."))):
        fail(f"{path}: minimum OS {top[0]}.{top[1]}, over {limit}")
    dylibs = set(re.findall(r"cmd LC_LOAD_DYLIB\n\s+cmdsize \d+\n\s+name (\S+)", heads))
    odd = {
        d
        for d in dylibs
        if not d.startswith("/usr/lib/") and not d.startswith("/System/")
    }
    if odd:
        fail(f"{path}: links {sorted(odd)} (only the system's libraries)")
    if kind == "swift":
        defined = tool("nm", "--defined-only", "-g", path)
        own = [line for line in defined.splitlines() if re.search(r"\b_sqlite3_", line)]
        if own:
            fail(
                f"{path}: defines SQLite symbols ({own[0].split()[-1]}…): it must use the system's"
            )
    export = EXPORT.get(kind)
    if export and export not in exported(path, macho=True):
        fail(f"{path}: does not export {export}")
    return (
        f"Mach-O {cputype}, minimum OS {top[0]}.{top[1]}, links {', '.join(sorted(dylibs)) or 'nothing'}"
        + (f", exports {export}" if export else "")
    )


def check_pe(platform, kind, path):
    out = tool("objdump", "-p", path)
    if "Magic" not in out or "(PE32+)" not in out:
        fail(f"{path}: not PE32+")
    head = tool("readobj", "--file-headers", path)
    if "IMAGE_FILE_MACHINE_AMD64" not in head:
        fail(f"{path}: not x86-64")
    dlls = {d.lower() for d in re.findall(r"DLL Name: (\S+)", out)}
    allowed = set(WINDOWS_DLLS)
    if kind == "python":
        allowed.add("python3.dll")
    odd = {d for d in dlls if d not in allowed and not d.startswith("api-ms-win-")}
    if odd:
        fail(
            f"{path}: imports {sorted(odd)} (an MSVC runtime, mingw's DLLs or a versioned python3X.dll?)"
        )
    export = EXPORT.get(kind)
    if export and not re.search(rf"\s{export}$", out, re.M):
        fail(f"{path}: does not export {export}")
    return f"PE32+ x86-64, imports {', '.join(sorted(dlls))}" + (
        f", exports {export}" if export else ""
    )


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in (*EXPORT, "swift"):
        sys.exit(__doc__)
    platform, kind, path = sys.argv[1:]
    with open(path, "rb") as f:
        magic = f.read(8)
    if magic[:4] == b"\x7fELF":
        print(check_elf(platform, kind, path))
    elif magic[:2] == b"MZ":
        print(check_pe(platform, kind, path))
    elif magic[:4] in (b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe") or magic.startswith(
        b"!<arch>"
    ):
        print(check_macho(platform, kind, path))
    else:
        fail(f"{path}: not ELF, Mach-O or PE")


if __name__ == "__main__":
    main()
