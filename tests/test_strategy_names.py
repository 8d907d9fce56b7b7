"""No strategy name is spelled out in code outside the registry (simddp/planning/registry.py).

    python -m pytest tests/test_strategy_names.py -q      # reads the source, < 5 s

A list of names, a CLI choice, a colour or an ``if name == "ddp"`` elsewhere is how a new
strategy came to touch fourteen files (issue 50). Code that means one strategy writes
``Name.DDP`` (or reads the registry's rows); docstrings, comments, tests and docs may say
"ddp" freely. A string constant that is neither a docstring nor in the registry, and equals a
strategy's name (or a hooked one's, "ddp+fp16"), fails here, except where another concept is
spelled the same and defined there (:data:`OTHER_CONCEPTS`).
"""
from __future__ import annotations

import ast
from pathlib import Path

from simddp.planning.registry import ROWS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simddp", "realrun", "calibrate")
REGISTRY = "simddp/planning/registry.py"
NAMES = frozenset(row.name for row in ROWS)
# (file, literal): the other concept that file defines under the same word. Each must still be
# found there, so an entry goes when its reason does.
OTHER_CONCEPTS = {
    ("simddp/cost/hierarchical.py", "hierarchical"):
        "ALGORITHMS: the all-reduce algorithm (the strategy is bucketed with it)",
    ("simddp/compare/match.py", "overlap"):
        "a comparison's JSON field: how much compute and communication overlap, per row",
    ("simddp/kinds.py", "fsdp"):
        "IMPLEMENTATIONS: the DDP implementation (torch FSDP2) whose host costs apply",
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (a module's, class's or function's)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                out.add(id(first.value))
    return out


def names_in(source: str) -> list[tuple[int, str]]:
    """(line, literal) for each string constant in ``source`` that names a strategy."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs and node.value.partition("+")[0] in NAMES
            and (node.value in NAMES or "+" in node.value)]


def _found() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == REGISTRY:
                continue
            for line, literal in names_in(path.read_text()):
                found.setdefault((rel, literal), []).append(line)
    return found


def test_the_scan_sees_a_name_in_code_and_not_in_a_docstring():
    source = ('"""naive, as a module docstring says it."""\n'
              'def f(s):\n    """ddp"""\n    return s == "ddp" or s in ("zero2", "ddp+fp16")\n'
              'x = "torch"; y = f"{x}ddp"; z = "fsdp_units"\n')
    assert sorted(names_in(source)) == [(4, "ddp"), (4, "ddp+fp16"), (4, "zero2"), (5, "ddp")]


def test_no_strategy_name_is_a_literal_outside_the_registry():
    stray = {f"{path}:{lines[0]}: {literal!r}" for (path, literal), lines in _found().items()
             if (path, literal) not in OTHER_CONCEPTS}
    assert not stray, ("strategy names spelled out; use simddp.planning.registry.Name or the rows:\n"
                       + "\n".join(sorted(stray)))


def test_every_other_concept_is_still_there():
    found = _found()
    assert [key for key in OTHER_CONCEPTS if key not in found] == []


def test_the_registry_defines_every_name_once():
    names = [row.name for row in ROWS]
    assert len(names) == len(set(names)) and (ROOT / REGISTRY).is_file()
