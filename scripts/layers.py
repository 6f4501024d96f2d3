#!/usr/bin/env python3
"""layers.py: core's layers, checked. Reads core/src, takes each top-level
module (a file or folder under core/src) as a node and each `crate::X`
reference in its code (comments and doc text left out) as an edge, and
fails when an edge goes up a layer or when modules depend on each other
in a cycle outside one layer's allowed pairs. The layers are the table in
core/README.md ("Layers"), parsed from there, so the document and the check
cannot disagree. The engine below them is a crate of its own
(engine/): its imports of core cannot compile at all.

    python3 scripts/layers.py           # check; prints the graph's layers
    python3 scripts/layers.py --graph   # also prints every edge
    python3 scripts/layers.py --self-test  # the check fails on an upward import
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "core" / "src"
README = ROOT / "core" / "README.md"


def layers_from_readme():
    """The rows of the README's layer table: (layer number, name, modules)."""
    text = README.read_text()
    try:
        table = text.split("<!-- layers -->", 2)[1]
    except IndexError:
        sys.exit("layers.py: core/README.md has no <!-- layers --> table")
    rows = []
    for line in table.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|", line)
        if m:
            mods = re.findall(r"`([a-z_]+)`", m.group(3))
            rows.append((int(m.group(1)), m.group(2), mods))
    return rows


def strip_comments(code):
    # Unit tests (a file's last item, by convention) may use anything.
    code = re.split(r"#\[cfg\((?:all\()?test\b[^\]]*\]\s*mod tests", code)[0]
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    return "\n".join(re.sub(r"//.*", "", line) for line in code.splitlines())


def modules():
    out = {}
    for p in sorted(SRC.iterdir()):
        if p.name == "migrations":
            continue
        if p.is_dir():
            files = sorted(p.rglob("*.rs"))
            name = p.name
        elif p.suffix == ".rs":
            files = [p]
            name = p.stem
        else:
            continue
        out[name] = files
    return out


def root_names(mods):
    """Names lib.rs re-exports from a module of core (`crate::Database` is
    `database`'s)."""
    lib = strip_comments((SRC / "lib.rs").read_text())
    out = {}
    for module, names in re.findall(
        r"pub use ([a-z_]+)::\{?([^;]*?)\}?;", lib, flags=re.S
    ):
        if module in mods:
            for n in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", names):
                if n != "as":
                    out.setdefault(n, module)
    return out


def edges(mods):
    found = {m: set() for m in mods}
    roots = root_names(mods)
    for m, files in mods.items():
        for f in files:
            code = strip_comments(f.read_text())
            for dep in re.findall(r"\bcrate::([A-Za-z_]+)", code):
                dep = roots.get(dep, dep)
                if dep in mods and dep != m:
                    found[m].add(dep)
            # `use crate::{a, b::c}` groups.
            for group in re.findall(r"\bcrate::\{([^}]*)\}", code):
                for dep in re.findall(r"(?:^|,)\s*([A-Za-z_]+)", group):
                    dep = roots.get(dep, dep)
                    if dep in mods and dep != m:
                        found[m].add(dep)
    return found


def sccs(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def check(quiet=False):
    """The problems found (empty when the layers hold)."""
    rows = layers_from_readme()
    mods = modules()
    layer_of = {}
    for number, _, names in rows:
        for n in names:
            layer_of[n] = number
    problems = []
    for m in mods:
        if m not in layer_of:
            problems.append(f"core/src/{m} is in no layer of core/README.md's table")
    for n in layer_of:
        if n not in mods:
            problems.append(
                f"core/README.md's layer table names `{n}`, which core/src lacks"
            )
    graph = edges(mods)
    for m, deps in sorted(graph.items()):
        for d in sorted(deps):
            if m in layer_of and d in layer_of and layer_of[d] > layer_of[m]:
                problems.append(
                    f"{m} (layer {layer_of[m]}) imports {d} (layer {layer_of[d]}): "
                    "a layer uses only its own and the ones below"
                )
    for comp in sccs(graph):
        if len(comp) > 1:
            ls = {layer_of.get(c) for c in comp}
            if len(ls) > 1:
                problems.append(f"an import cycle across layers: {', '.join(comp)}")
    if quiet:
        return problems
    if "--graph" in sys.argv:
        for m, deps in sorted(graph.items()):
            print(f"{m} ({layer_of.get(m)}) -> {', '.join(sorted(deps))}")
    for number, name, names in rows:
        print(f"layer {number} ({name}): {', '.join(names)}")
    cycles = [c for c in sccs(graph) if len(c) > 1]
    print(
        "cycles (each inside one layer): "
        + ("; ".join(", ".join(c) for c in cycles) or "none")
    )
    return problems


def self_test():
    """Copies core/src and the README, adds one import of a primitive to
    database.rs, and expects the check to name it."""
    import shutil
    import tempfile

    global SRC, README
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(SRC, Path(tmp) / "src")
        shutil.copy(README, Path(tmp) / "README.md")
        SRC, README = Path(tmp) / "src", Path(tmp) / "README.md"
        if check(quiet=True):
            sys.exit("layers.py --self-test: the copy fails before the change")
        db = SRC / "database.rs"
        code = db.read_text()
        db.write_text(code.replace("use ", "use crate::queue::Queue;\nuse ", 1))
        found = check(quiet=True)
    if not any("database (layer 2) imports queue (layer 3)" in p for p in found):
        sys.exit(f"layers.py --self-test: an upward import was not caught ({found})")
    print(
        "layers.py --self-test: an import of a primitive in database.rs fails the check"
    )


def main():
    if "--self-test" in sys.argv:
        self_test()
        return
    problems = check()
    if problems:
        for p in problems:
            print(f"layers.py: {p}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
