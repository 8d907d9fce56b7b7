"""The package layers point one way, and no module imports itself round a cycle.

    simddp  <-  realrun (launch, ddp, steps, bench, profiler, ...)  <-  calibrate
            <-  realrun.validate, realrun.commands, realrun.cli

simddp never imports torch, realrun or calibrate, so the simulator installs light; realrun's
core never imports calibrate or realrun's validation and commands; calibrate never imports
those either. Each layer's modules are imported in a fresh interpreter with the layers above
it blocked. The cycle check reads every import statement, those inside functions too: an
import hidden in a function is how a cycle hides from import time.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simddp", "realrun", "calibrate")
TOP = ("realrun.validate", "realrun.commands", "realrun.cli", "realrun.__main__")
LAYERS = {
    "simddp": ("torch", "realrun", "calibrate"),
    "realrun": ("calibrate",) + TOP,
    "calibrate": TOP,
}
_IMPORT_ALL = r"""
import importlib, importlib.abc, json, sys
blocked, names = json.loads(sys.argv[1]), json.loads(sys.argv[2])
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if any(name == b or name.startswith(b + ".") for b in blocked):
            raise ImportError(f"{name} is above this layer")
sys.meta_path.insert(0, Block())
for name in names:
    importlib.import_module(name)
"""


def modules() -> dict[str, Path]:
    """Every project module by dotted name (a package by its own name)."""
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def in_layer(name: str, layer: str) -> bool:
    if name.endswith("__main__"):
        return False  # running it is the command itself
    if layer == "realrun":
        return name.split(".")[0] == "realrun" and not any(
            name == t or name.startswith(t + ".") for t in TOP)
    return name.split(".")[0] == layer


@pytest.mark.parametrize("layer", list(LAYERS))
def test_each_layer_imports_without_the_layers_above(layer):
    names = sorted(n for n in modules() if in_layer(n, layer))
    assert names, layer
    done = subprocess.run([sys.executable, "-c", _IMPORT_ALL, json.dumps(LAYERS[layer]),
                           json.dumps(names)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1]


def import_graph() -> dict[str, set[str]]:
    """Module -> project modules it names in an import statement, anywhere in its code."""
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in mods and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# calibrate's arithmetic (fits, combining ranks, analysis, files, report, plots) reads numbers
# the ranks measured; what it needs to know about the launch (ranks sharing a CPU) the ranks
# report. Only the modules that start or run ranks import realrun.
CALIBRATE_ARITHMETIC = ("calibrate.analysis", "calibrate.fit", "calibrate.combine",
                        "calibrate.files", "calibrate.report", "calibrate.report_table",
                        "calibrate.plots")


def test_calibrate_arithmetic_imports_no_launcher():
    graph = import_graph()
    assert {m: sorted(t for t in graph[m] if t.startswith("realrun"))
            for m in CALIBRATE_ARITHMETIC} == {m: [] for m in CALIBRATE_ARITHMETIC}
