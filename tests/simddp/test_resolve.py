"""Inputs are resolved once, by one function, and every door gives the same step.

- The Python API and the CLI give the same step for the same job (the README's default).
- Nothing writes contention or host factors into a Link or a Host to be read back: a Link
  has no such field, and no code replaces a Host's measured fields (a scan of the source).
- A sweep on presets never imports the CPU rig's module; a link file with a gloo_host
  section does.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import simddp
from simddp.inputs.link import Link
from simddp.predict.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("simddp", "realrun", "calibrate")
# What a Host measured with its model, and the contention a Link file section holds: read
# once by simddp/predict/resolve.py, never written back into the objects.
FACTOR_FIELDS = {"contention", "contention_spread", "compute_after_comm", "compute_slowdown",
                 "comm_slowdown"}
RIG_FIELDS = {"blocking_alpha_s", "burst_bytes", "idle_wake_s", "blocking_refill_s"}


def _cli_step_ms(*flags: str) -> float:
    out = subprocess.run([sys.executable, "-m", "simddp", "simulate", "--format", "json",
                          *flags], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return json.loads(out)["step_ms"]


def test_the_api_and_the_cli_give_the_same_step_for_the_same_job():
    profile = simddp.build_profile(simddp.parse_model("transformer-small"))
    link = simddp.get_link("eth-100g")
    p = simddp.plan(profile, simddp.make_strategy("ddp", bucket_mb=25))
    by_api = simddp.simulate(profile, link, p, 2).step_ms
    assert by_api == simddp.simulate(p, simddp.resolve(profile, link, 2)).step_ms
    assert by_api == _cli_step_ms("--strategy", "ddp", "--bucket-mb", "25")
    # and where the user chooses the contention, both doors take it the same way
    none = simddp.simulate(profile, link, p, 2, contention="none").step_ms
    assert none < by_api
    assert none == _cli_step_ms("--strategy", "ddp", "--bucket-mb", "25", "--contention", "none")


def test_a_link_is_the_network_only():
    fields = {f.name for f in dataclasses.fields(Link)}
    assert not fields & (FACTOR_FIELDS | RIG_FIELDS)


def _names_a_link_or_host(node: ast.AST) -> bool:
    """Whether an expression names a link or a host (``link``, ``host``, ``self.link_file``,
    ``before.host``): what a factor must not be written into."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return "link" in name.lower() or "host" in name.lower()


def _replaced_fields(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, field) of every ``replace(link_or_host, field=...)`` call that sets a factor,
    and every ``object.__setattr__(link_or_host, "field", ...)`` outside a
    ``__post_init__``."""
    out = []
    post_init_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__post_init__":
            post_init_lines.update(range(node.lineno, node.end_lineno + 1))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name in ("replace", "_replace") and node.args and _names_a_link_or_host(node.args[0]):
            out += [(node.lineno, k.arg) for k in node.keywords if k.arg in FACTOR_FIELDS]
        if (name == "__setattr__" and len(node.args) >= 2 and _names_a_link_or_host(node.args[0])
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in FACTOR_FIELDS and node.lineno not in post_init_lines):
            out.append((node.lineno, node.args[1].value))
    return out


def test_no_code_sets_contention_or_host_factors_after_loading():
    found = [f"{path.relative_to(ROOT)}:{line} sets {field}"
             for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             for line, field in _replaced_fields(ast.parse(path.read_text()))]
    assert found == []


def test_the_scan_finds_a_factor_written_back():
    tree = ast.parse("from dataclasses import replace\nh = replace(host, contention=(1, 2))\n"
                     "object.__setattr__(link, 'comm_slowdown', 2.0)\n"
                     "s = replace(scenario, contention=c)\n")   # not a link or a host
    assert _replaced_fields(tree) == [(2, "contention"), (3, "comm_slowdown")]


_IMPORTS_AFTER = """
import json, sys
from simddp.cli.main import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(json.dumps(sorted(m for m in sys.modules if m.startswith("simddp.rig"))))
"""


def _rig_modules_after(*argv: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _IMPORTS_AFTER, *argv], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_preset_sweep_never_imports_the_cpu_rig(tmp_path):
    assert _rig_modules_after("sweep", "--bucket-mb", "1,10") == []
    assert _rig_modules_after("sweep", "--model", "transformer-xl", "--link", "ib-hdr",
                              "--nodes", "2", "--gpus-per-node", "8") == []


def test_a_link_file_of_gloo_on_a_shared_cpu_brings_the_rig(tmp_path):
    measured = ROOT / "tests" / "data" / "validate-default-2026-11-23"
    rig = _rig_modules_after("sweep", "--model", str(measured / "profile.json"), "--link",
                             str(measured / "link.json"), "--bucket-mb", "1,4")
    assert "simddp.rig.gloo_shared_cpu" in rig
    inputs = resolve(measured / "profile.json", measured / "link.json")
    assert type(inputs.effects).__name__ == "GlooOnSharedCpu"
