"""docs/DESIGN.md's module table names every module, and the page names no module that is gone.

Every ``.py`` file under simddp/, calibrate/ and realrun/ (subpackages included; ``__init__.py``
and ``__main__.py`` excepted) has a row of its own in the table, written as the row's first
cell: ``| `simddp/law/curve.py` | what it is |``. And every module path the page names, in a
row or in prose (``realrun/launch/two_level.py``), exists. So a module added, moved or removed
without the page fails here, and the table cannot go stale (issue 50 item 5).
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simddp", "calibrate", "realrun")
EXEMPT = ("__init__.py", "__main__.py")
ROW = re.compile(r"^\|\s*`([\w/]+\.py)`\s*\|\s*(.*?)\s*\|\s*$")
PATH = re.compile(r"(?<![\w/])((?:" + "|".join(PACKAGES) + r")/[\w/]*\.py)\b")


def modules(root: Path) -> set[str]:
    """Every module file the table must name, as a path from the repository root."""
    return {p.relative_to(root).as_posix() for package in PACKAGES
            for p in (root / package).rglob("*.py") if p.name not in EXEMPT}


def rows(doc: str) -> dict[str, str]:
    """Module path -> its description, for each table row whose first cell is a module."""
    return {m.group(1): m.group(2) for line in doc.splitlines() if (m := ROW.match(line))}


def unnamed(root: Path, doc: str) -> list[str]:
    return sorted(modules(root) - set(rows(doc)))


def gone(root: Path, doc: str) -> list[str]:
    """Module paths the page names that are no file."""
    return sorted({m.group(1) for m in PATH.finditer(doc)
                   if not (root / m.group(1)).is_file()})


def test_the_checks_catch_a_missing_row_and_a_gone_module(tmp_path):
    for path in ("simddp/a.py", "simddp/__init__.py", "realrun/launch/b.py", "calibrate/c.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    doc = ("| module | what it is |\n|---|---|\n| `simddp/a.py` | a |\n"
           "| `simddp/old.py` | moved |\n"
           "calibrate/c.py is named in prose only; so is realrun/gone.py.\n")
    assert rows(doc) == {"simddp/a.py": "a", "simddp/old.py": "moved"}
    assert unnamed(tmp_path, doc) == ["calibrate/c.py", "realrun/launch/b.py"]
    assert gone(tmp_path, doc) == ["realrun/gone.py", "simddp/old.py"]


def test_every_module_has_a_row_in_docs_design():
    doc = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    missing = unnamed(ROOT, doc)
    assert not missing, ("docs/DESIGN.md, 'Every module': add a row for each of\n"
                         + "\n".join(missing))


def test_each_row_says_what_its_module_is():
    doc = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    assert [path for path, what in rows(doc).items() if not what] == []


def test_docs_design_names_no_module_that_is_gone():
    doc = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    stale = gone(ROOT, doc)
    assert not stale, "docs/DESIGN.md names modules that do not exist:\n" + "\n".join(stale)
