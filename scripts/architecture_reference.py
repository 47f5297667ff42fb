"""Write the module list of docs/architecture.md from the modules' own docstrings.

    .venv/bin/python scripts/architecture_reference.py           # rewrite the list in place
    .venv/bin/python scripts/architecture_reference.py --check   # exit 1 if the list is stale

Every module and package under gamut_local/ is listed with the first paragraph of its
docstring (read with `ast`, nothing is imported), packages before their modules, so the page
names every module there is and says of each what the module says of itself. Only the part
of the page between the two marker lines is written; tests/test_docs.py fails when it differs
from what this writes.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gamut_local"
PAGE = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- module list: written by scripts/architecture_reference.py, do not edit by hand -->"
END = "<!-- end of module list -->"


def summary(path: Path) -> str:
    """The first paragraph of a module's docstring, on one line; a module without one is an error."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    if not doc:
        raise SystemExit(f"{path.relative_to(ROOT)}: no module docstring (the module list is made of them)")
    return " ".join(doc.strip().split("\n\n")[0].split())


def entries(folder: Path = PACKAGE, depth: int = 0) -> list[str]:
    """Markdown list lines for a package: its modules, then its subpackages, each by name."""
    lines = []
    modules = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
    packages = sorted(p for p in folder.iterdir() if (p / "__init__.py").is_file())
    for path in modules:
        lines.append(f"{'  ' * depth}- `{path.relative_to(PACKAGE).as_posix()}`: {summary(path)}")
    for pkg in packages:
        lines.append(f"{'  ' * depth}- `{pkg.relative_to(PACKAGE).as_posix()}/`: {summary(pkg / '__init__.py')}")
        lines += entries(pkg, depth + 1)
    return lines


def render(page: str) -> str:
    """The page with the text between its markers replaced by the module list."""
    if BEGIN not in page or END not in page:
        raise SystemExit(f"{PAGE.relative_to(ROOT)}: the marker lines are missing:\n{BEGIN}\n{END}")
    head, rest = page.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return f"{head}{BEGIN}\n\n" + "\n".join(entries()) + f"\n\n{END}{tail}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/architecture.md is stale")
    args = parser.parse_args()
    page = PAGE.read_text(encoding="utf-8")
    want = render(page)
    if args.check:
        if want != page:
            sys.exit("docs/architecture.md's module list is stale: run python scripts/architecture_reference.py")
        return
    PAGE.write_text(want, encoding="utf-8")


if __name__ == "__main__":
    main()
