#!/usr/bin/env python3
"""check-links.py: the packages point at one repository, and at what is in it.

The workspace Cargo.toml's `repository` is the one source. This checks that
the npm packages' `repository` (and `homepage`), the wheel's `[project.urls]`
and every link of the package READMEs (what npm and PyPI show) start with it,
and that each `<repository>/blob/main/PATH#ANCHOR` names a file of this
checkout and, if it has an anchor, one of that file's headings (GitHub's
slugs). A guide renamed or a heading reworded fails here, not on a user's
screen. `--self-test` shows that a missing file, a missing heading and another
host each fail.

`--set-repository URL` moves everything to another repository address (the
workspace's `repository`, then each manifest and README naming the old one),
then checks.
"""

import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The files that name the repository's address, besides Cargo.toml.
NODE_PACKAGES = ("bindings-node/package.json", "bindings-node/npm/*/package.json")
PYPROJECT = "bindings-python/pyproject.toml"
READMES = ("bindings-python/README.md", "bindings-node/README.md")
NAMING = (*NODE_PACKAGES, PYPROJECT, *READMES)


def workspace_repository(root: Path) -> str:
    """The workspace Cargo.toml's `repository`: the one source."""
    return tomllib.loads((root / "Cargo.toml").read_text())["workspace"]["package"][
        "repository"
    ]


LINK = re.compile(r"\]\((https?://[^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set:
    found, fenced = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            found.add(slug(m.group(1)))
    return found


def check_url(url: str, repo: str, root: Path, where: str) -> list:
    if (
        url != repo
        and not url.startswith(repo + "/")
        and not url.startswith(repo + "#")
    ):
        return [f"{where}: {url} is not under the repository {repo}"]
    rest = url[len(repo) :]
    if rest in ("", "/") or rest.startswith("#"):
        return (
            []
            if rest in ("", "/", "#readme")
            else [f"{where}: {url}: only #readme is the root's anchor"]
        )
    m = re.fullmatch(r"/(?:blob|tree)/main/([^#]+)(?:#(.+))?", rest)
    if not m:
        return [f"{where}: {url} is not <repository>/blob/main/PATH[#ANCHOR]"]
    target = root / m.group(1)
    if not target.exists():
        return [f"{where}: {url} names {m.group(1)}, which this checkout lacks"]
    if m.group(2) and (target.is_dir() or m.group(2) not in anchors(target)):
        return [
            f"{where}: {url}: {m.group(1)} has no heading whose anchor is #{m.group(2)}"
        ]
    return []


def check(root: Path) -> list:
    repo = workspace_repository(root)
    errors = []
    for path in (
        path for pattern in NODE_PACKAGES for path in sorted(root.glob(pattern))
    ):
        where = str(path.relative_to(root))
        manifest = json.loads(path.read_text())
        repository = manifest.get("repository") or {}
        if repository.get("url") != f"git+{repo}.git":
            errors.append(
                f"{where}: repository.url is {repository.get('url')!r}, not 'git+{repo}.git'"
            )
        if repository.get("directory") != str(path.parent.relative_to(root)):
            errors.append(
                f"{where}: repository.directory is {repository.get('directory')!r}, not its folder"
            )
        if "homepage" in manifest:
            errors += check_url(manifest["homepage"], repo, root, f"{where} homepage")
    urls = tomllib.loads((root / PYPROJECT).read_text())["project"].get("urls", {})
    if urls.get("Repository") != repo:
        errors.append(
            f"{PYPROJECT}: [project.urls] Repository is {urls.get('Repository')!r}"
        )
    for name, url in urls.items():
        errors += check_url(url, repo, root, f"{PYPROJECT} {name}")
    for readme in READMES:
        links = LINK.findall((root / readme).read_text())
        if not any(url.startswith(f"{repo}/blob/main/README.md") for url in links):
            errors.append(
                f"{readme}: no link to the repository's guide ({repo}/blob/main/README.md)"
            )
        for url in links:
            errors += check_url(url, repo, root, readme)
    return errors


def self_test() -> None:
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp)
        named = [
            str(p.relative_to(ROOT)) for pattern in NAMING for p in ROOT.glob(pattern)
        ]
        # What names the address, and what its links point at.
        for rel in ("Cargo.toml", "README.md", "CHANGELOG.md", "docs", *named):
            src = ROOT / rel
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy)(src, copy / rel)
        assert check(copy) == [], check(copy)
        readme = copy / "bindings-node/README.md"
        good = readme.read_text()
        for broken, expect in (
            (
                good.replace("docs/sql.md", "docs/sql-functions.md"),
                "which this checkout lacks",
            ),
            (
                good.replace("#node-quickstart", "#node-quick-start"),
                "no heading whose anchor",
            ),
            (
                good.replace("https://", "https://elsewhere.invalid/", 1),
                "is not under the repository",
            ),
        ):
            readme.write_text(broken)
            errors = check(copy)
            assert any(expect in e for e in errors), (expect, errors)
        readme.write_text(good)
        set_repository(copy, "https://git.example.org/team/honker/")
        assert check(copy) == [], check(copy)
        node = copy / "bindings-node/npm/linux-x64-gnu/package.json"
        node.write_text(
            node.read_text().replace(
                '"directory": "bindings-node/npm/linux-x64-gnu"', '"directory": "x"'
            )
        )
        assert any("repository.directory" in e for e in check(copy))


def set_repository(root: Path, url: str) -> None:
    cargo = root / "Cargo.toml"
    old = workspace_repository(root)
    url = url.rstrip("/")
    text = cargo.read_text()
    cargo.write_text(text.replace(f'repository = "{old}"', f'repository = "{url}"', 1))
    for pattern in NAMING:
        for path in root.glob(pattern):
            path.write_text(path.read_text().replace(old, url))


def main() -> int:
    if "--set-repository" in sys.argv:
        set_repository(ROOT, sys.argv[sys.argv.index("--set-repository") + 1])
    if "--self-test" in sys.argv:
        self_test()
    errors = check(ROOT)
    for error in errors:
        print(f"check-links: {error}", file=sys.stderr)
    if not errors:
        print(
            "links: the packages' manifests and READMEs point into the repository, at what it holds"
        )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
