"""The package layers point one way, and no module imports itself round a cycle.

    simddp  <  realrun.launch  <  calibrate, realrun's core  <  realrun.workflows  <  realrun.cli

- simddp: never torch, realrun or calibrate, so the simulator installs light;
- realrun.launch (and the lazy ``realrun`` package itself): processes, worlds, emulated hosts,
  torchrun glue, and the collective-timing pieces calibrate shares (TwoLevel, contention);
- calibrate and realrun's core (ddp, steps, bench, profiling, ...): neither imports the other,
  and of realrun calibrate takes only realrun.launch;
- realrun.workflows (validate, selfcheck's steps): the only realrun modules that import calibrate;
- realrun.cli: ``python -m realrun`` and its commands (realrun/commands/), which parse flags and
  call the layers below.

A module may import its own layer and the layers before it, nothing else. Each layer's modules
are imported in a fresh interpreter with every layer it may not import blocked. The import
graph reads every import statement, those inside functions too: an import hidden in a function
is how a layer breach, or a cycle, hides from import time.
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
# lowest first; layers in one tuple sit side by side and may not import each other
ORDER = (("simddp",), ("realrun.launch",), ("calibrate", "realrun core"),
         ("realrun.workflows",), ("realrun.cli",))
LEVEL = {layer: i for i, side_by_side in enumerate(ORDER) for layer in side_by_side}
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


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def layer_of(name: str) -> str:
    """The layer a project module belongs to (see the module docstring)."""
    top = name.split(".")[0]
    if top != "realrun":
        return top
    if name == "realrun" or _under(name, "realrun.launch"):
        return "realrun.launch"  # the package's names are imported lazily, on first use
    if _under(name, "realrun.workflows"):
        return "realrun.workflows"
    if _under(name, "realrun.commands") or name in ("realrun.cli", "realrun.__main__"):
        return "realrun.cli"
    return "realrun core"


def may_import(importer: str, imported: str) -> bool:
    """Its own layer, or a layer before it."""
    return _layer_may(layer_of(importer), layer_of(imported))


def _layer_may(importer: str, imported: str) -> bool:
    return importer == imported or LEVEL[imported] < LEVEL[importer]


def test_the_layer_rule():
    assert layer_of("realrun.launch.two_level") == "realrun.launch"
    assert layer_of("realrun.ddp") == "realrun core"
    assert layer_of("realrun.workflows.validate.probes") == "realrun.workflows"
    assert layer_of("realrun.commands.bench") == "realrun.cli"
    assert may_import("calibrate.ranks.levels", "realrun.launch.two_level")
    assert not may_import("calibrate.ranks.levels", "realrun.flat_bucket")
    assert not may_import("realrun.ddp", "calibrate.settings")
    assert may_import("realrun.workflows.validate.inputs", "calibrate.settings")
    assert not may_import("realrun.launch.run", "realrun.steps")
    assert not may_import("simddp.sim.engine", "realrun.launch")


@pytest.mark.parametrize("layer", list(LEVEL))
def test_each_layer_imports_without_the_layers_it_may_not_import(layer):
    mods = modules()
    names = sorted(n for n in mods if layer_of(n) == layer and not n.endswith("__main__"))
    assert names, layer  # running a __main__ is the command itself, not an import
    blocked = sorted(n for n in mods if not _layer_may(layer, layer_of(n)))
    blocked += ["torch"] if layer == "simddp" else []
    done = subprocess.run([sys.executable, "-c", _IMPORT_ALL, json.dumps(blocked),
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


def test_every_import_points_down_the_layers():
    graph = import_graph()
    assert sorted(f"{a} -> {b}" for a in graph for b in graph[a] if not may_import(a, b)) == []


def test_calibrate_imports_only_realrun_launch():
    graph = import_graph()
    taken = {b for a in graph if layer_of(a) == "calibrate" for b in graph[a]
             if b.split(".")[0] == "realrun"}
    assert taken  # calibrate does start worlds: the check below looks at real imports
    assert sorted(b for b in taken if not _under(b, "realrun.launch")) == []


def test_only_realrun_workflows_import_calibrate():
    graph = import_graph()
    importers = {a for a in graph if a.split(".")[0] == "realrun"
                 for b in graph[a] if b.split(".")[0] == "calibrate"}
    assert importers  # validate and selfcheck do calibrate
    assert sorted(a for a in importers if layer_of(a) != "realrun.workflows") == []


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
                        "calibrate.files", "calibrate.report", "calibrate.nccl_table",
                        "calibrate.plots")


def test_calibrate_arithmetic_imports_no_launcher():
    graph = import_graph()
    assert {m: sorted(t for t in graph[m] if t.startswith("realrun"))
            for m in CALIBRATE_ARITHMETIC} == {m: [] for m in CALIBRATE_ARITHMETIC}


# Inside simddp, its folders (and its few top-level modules) by floor, lowest first: a module
# may import its own floor and the floors before it. ``ls simddp`` reads as this list.
SIMDDP_FLOORS = (
    ("errors", "kinds"),   # the one error type; the vocabularies (phases, kinds, lanes)
    ("cost",),             # the collective law: seconds of one collective
    ("inputs",),           # profile, link, host costs, topology, contention; their files
    ("presets",),          # models, devices and links users name
    ("planning",),         # strategies, the bucket rule, hooks, sharding: the plan
    ("result",),           # spans and results, predicted and measured
    ("sim",),              # the SimPy engine and the tables it walks
    ("rig",),              # Gloo on a shared CPU host: what that host adds
    ("analytic",),         # closed forms: the recurrence, the optimal bucket, memory, traffic
    ("predict",),          # inputs resolved, scenarios, the predictor, sweeps, recommendation
    ("ingest",),           # nccl-tests logs and torch.profiler traces
    ("report",),           # tables, plots, traces, output folders
    ("compare",),          # predicted against measured
    ("cli",),              # python -m simddp
)
SIMDDP_FLOOR = {name: i for i, names in enumerate(SIMDDP_FLOORS) for name in names}


def simddp_floor(module: str) -> int | None:
    """The floor of a simddp module (None: the package itself or __main__, which sit on top)."""
    parts = module.split(".")
    if parts[0] != "simddp" or len(parts) == 1 or parts[1] == "__main__":
        return None
    return SIMDDP_FLOOR[parts[1]]


def test_every_simddp_folder_has_a_floor():
    here = ROOT / "simddp"
    names = {p.stem for p in here.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists())
             or (p.suffix == ".py" and p.stem not in ("__init__", "__main__"))}
    assert names == set(SIMDDP_FLOOR)


def test_simddp_imports_point_down_its_floors():
    graph = import_graph()
    up = []
    for a, targets in graph.items():
        fa = simddp_floor(a)
        for b in targets:
            fb = simddp_floor(b)
            if fa is not None and fb is not None and fb > fa:
                up.append(f"{a} -> {b}")
    assert sorted(up) == []


def test_ls_simddp_shows_folders_and_at_most_six_modules():
    modules = [p.name for p in (ROOT / "simddp").glob("*.py")]
    assert len(modules) <= 6, modules
