"""No file outside simddp/cost/ computes a collective's time: the law is one package.

The rule, checked on the syntax tree of every .py file under simddp/, calibrate/, realrun/
and bench/ except simddp/cost/ itself (tests compute expected times by hand on
purpose, and are not scanned). A file computes a collective's time when it has:

1. a **bytes-over-busbw division**: ``X / Y`` where Y names busbw (a name or attribute whose
   name contains ``busbw``, or a string constant containing it, as in ``link["busbw_gbps"]``)
   and X holds a bus factor: a call of ``bus_factor`` or ``kind_factor``, or a hand-written
   ring factor, a subtraction ``… − 1`` (the p − 1 of 2(p−1)/p). That is the law's bytes term,
   ``f(p)·n / busbw``; solving the law for α needs it too, so fits call
   ``simddp.cost.bytes_s`` instead;
2. a **direct read of a link's α–β segment**: a method call ``.law(…)`` or ``.kind_law(…)``
   (Link's, before the law moved), or a call of ``segment(…)`` / ``kind_segment(…)`` by any
   name (which α and busbw apply at a size is the law's choice: a curve may answer instead).
   A plain function a file names ``law`` itself is its own, not a link's.

Calling the law (``simddp.cost.collective_s``, ``parts``, ``Link.allreduce_s`` /
``collective_s``, which delegate) is how a file gets a time. Turning a measured time into
busbw (``algbw · f(p)``, as nccl-tests prints it) multiplies and is not a time, so it passes.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("simddp", "calibrate", "realrun", "bench")
LAW = ROOT / "simddp" / "cost"
FACTORS = {"bus_factor", "kind_factor"}
LINK_METHODS = {"law", "kind_law"}           # only as methods: x.law(...)
SEGMENT_READS = {"segment", "kind_segment"}   # by any name


def _names(node: ast.AST) -> list[str]:
    """Every name, attribute and string constant inside ``node``."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.append(n.id)
        elif isinstance(n, ast.Attribute):
            out.append(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(n.value)
    return out


def _called(n: ast.AST) -> str | None:
    if isinstance(n, ast.Call):
        f = n.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return None


def _holds_factor(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if _called(n) in FACTORS:
            return True
        if (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub)
                and isinstance(n.right, ast.Constant) and n.right.value == 1):
            return True
    return False


def violations(source: str) -> list[tuple[int, str]]:
    """(line, why) for each place ``source`` computes a collective's time (module text)."""
    out = []
    for n in ast.walk(ast.parse(source)):
        if (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
                and any("busbw" in name for name in _names(n.right))
                and _holds_factor(n.left)):
            out.append((n.lineno, "divides a bus factor's bytes by busbw"))
        if _called(n) in SEGMENT_READS or (isinstance(n, ast.Call) and isinstance(
                n.func, ast.Attribute) and n.func.attr in LINK_METHODS):
            out.append((n.lineno, f"reads a link's α–β segment ({_called(n)}(…))"))
    return out


def test_the_rule_catches_what_it_says():
    assert violations("t = a + bus_factor(p) * n / (busbw_gbps * GB)")
    assert violations("t = a + 2 * (p - 1) / p * n / link.busbw_gbps")
    assert violations("t = kind_factor(k, p) * n / (row['busbw_gbps'] * 1e9)")
    assert violations("alpha, bw = link.kind_law(kind, n)")
    assert violations("alpha, bw = link.law(n)")
    # a time turned into busbw, a fit's design column and a call of the law all pass
    assert not violations("busbw = n / t_s / GB * kind_factor(k, p)")
    assert not violations("x = kind_factor(kind, p) * sizes / GB")
    assert not violations("t = collective_s(link, kind, n, p) + link.allreduce_s(n, p)")
    assert not violations("law = lambda n: link.allreduce_s(n, 2); t = law(10)")


def test_no_file_outside_the_law_computes_a_collective_time():
    found = []
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if LAW in path.parents:
                continue
            for line, why in violations(path.read_text()):
                found.append(f"{path.relative_to(ROOT)}:{line}: {why}")
    assert not found, ("a collective's time outside simddp/cost/ (call simddp.cost instead):\n"
                       + "\n".join(found))
