"""FSDP2 and gradient-accumulation traces recorded here (tests/data/traces/, record.py): what
their import must get right whatever the host's load that minute (units, collectives,
gradients, micro-steps, the plan), and that the files it writes predict other unit sizes,
zero2, ddp and other bucket sizes. No torch; no timing.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from simddp.inputs.io import load_link_file, load_profile
from simddp.inputs.resolved import Inputs
from simddp.ingest.trace import import_traces
from simddp.ingest.trace.bounds import ALPHA_MAX_S, CPU_ALPHA_MAX_S, busbw_max_gbps
from simddp.ingest.trace.rank_timeline import Node
from simddp.ingest.trace.steps import passes
from simddp.planning.plans import plan
from simddp.presets import get_link
from simddp.planning.strategy import make_strategy
from simddp.sim.engine import simulate
from tests.simddp.hand_traces import cli

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
FSDP = [str(DATA / f"fsdp2-tiny.rank{r}.json.gz") for r in range(2)]
NO_SYNC = [str(DATA / f"no_sync-tiny.rank{r}.json.gz") for r in range(2)]
# record.py's model: 1 block of width 64, vocabulary 512: each module with parameters a unit
GRAD_BYTES = 2 * 512 * 64 * 4 + 4 * 64 * 64 * 4 + 3 * 64 * 256 * 4 + 3 * 64 * 4
UNITS = 12


@pytest.fixture(scope="module")
def fsdp():
    return import_traces(FSDP)


def test_an_fsdp2_trace_imports_per_unit(fsdp):
    sh = fsdp.sharded
    assert fsdp.traced.strategy.name == "fsdp" and fsdp.traced.rule_reproduces
    assert len(sh.units) == UNITS and len(fsdp.profile.layers) == UNITS
    # forward: one all-gather a unit; backward: each re-gathered and reduce-scattered
    assert sh.calls_per_step == {"all_gather": 2 * UNITS, "reduce_scatter": UNITS}
    assert fsdp.profile.grad_total_bytes == GRAD_BYTES == sum(sh.unit_bytes)
    assert len(fsdp.traced.plan.collectives) == 3 * UNITS
    costs = fsdp.host.implementations["fsdp"]
    assert costs.blocking_collectives and costs.gather_s > 0 and costs.scatter_s > 0
    assert set(fsdp.link.kind_fits) == {"all_gather", "reduce_scatter"}
    for fit in [*fsdp.link.kind_fits.values(), fsdp.link]:
        assert 0 <= fit.alpha_s <= CPU_ALPHA_MAX_S and fit.busbw_gbps <= busbw_max_gbps()
    # the optimizer ran on 1/2 shards; the profile holds the whole model's
    assert fsdp.profile.optimizer_s > 0
    # recorded on a loaded host: an α above NCCL's bound, and the summary says why
    alphas = [fsdp.link.alpha_s] + [f.alpha_s for f in fsdp.link.kind_fits.values()]
    assert max(alphas) > ALPHA_MAX_S
    assert any("docs/FINDINGS.md#blocking-alpha" in n for n in fsdp.notes)


def test_a_link_given_fills_what_small_units_cannot_tell(tmp_path, capsys):
    out = tmp_path / "out"
    code, _, err = cli(capsys, "trace-import", *FSDP, "--out", str(out), "--link", "ib-hdr")
    assert code == 0, err
    kinds = json.loads((out / "summary.json").read_text())["link"]["kinds"]
    for law in kinds.values():   # units of at most 128 KiB: the bandwidth term is not seen
        assert law["cannot_fit"] is not None and law["fallback"] == "--link ib-hdr"
        assert law["busbw_gbps"] == pytest.approx(get_link("ib-hdr").busbw_gbps, rel=0.5)


def test_the_trace_predicts_other_units_zero2_and_ddp(fsdp):
    inputs = Inputs(fsdp.profile, fsdp.link, fsdp.world_size, fsdp.contention, fsdp.host)
    traced = simulate(plan(fsdp.profile, make_strategy("fsdp")), inputs)
    assert traced.step_s == pytest.approx(fsdp.without_profiler.step_s)
    grouped = plan(fsdp.profile, make_strategy("fsdp", shard_unit_mb=0.1))
    assert len(grouped.units) < UNITS
    steps = {name: simulate(p, inputs).step_s for name, p in (
        ("grouped", grouped), ("zero2", plan(fsdp.profile, make_strategy("zero2"))),
        ("ddp", plan(fsdp.profile, make_strategy("ddp", 25.0))))}
    assert all(s > 0 for s in steps.values())
    # zero2 issues no re-gathers: on a host whose collectives block, it is quicker
    assert steps["zero2"] < traced.step_s


def test_the_command_writes_files_a_sweep_of_fsdp_zero2_and_ddp_reads(tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "trace-import", *FSDP, "--out", str(out))
    assert code == 0, err
    doc = json.loads((out / "summary.json").read_text())
    assert doc["sharded"] and doc["traced"]["strategy"] == "fsdp"
    assert doc["collectives"]["per_step"] == {"all_gather": 24, "reduce_scatter": 12}
    assert set(doc["link"]["kinds"]) == {"all_gather", "reduce_scatter"}
    assert load_profile(out / "profile.json").grad_total_bytes == GRAD_BYTES
    assert set(load_link_file(out / "link.json").link.kind_fits) == {"all_gather",
                                                                     "reduce_scatter"}
    code, stdout, err = cli(capsys, "sweep", "--model", str(out / "profile.json"), "--link",
                            str(out / "link.json"), "--world-size", "2", "--strategies",
                            "fsdp,zero2,ddp", "--bucket-mb", "25", "--shard-unit-mb", "0.1",
                            "--format", "json")
    assert code == 0, err
    rows = {r["strategy"] for r in json.loads(stdout)["rows"]}
    assert {"fsdp", "zero2", "ddp"} <= rows


@pytest.mark.parametrize("flag", [["--alpha-us", "100"], ["--bucket-mb", "1"]])
def test_flags_an_fsdp2_trace_has_no_use_for_are_one_line_exit_2(tmp_path, capsys, flag):
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "trace-import", *FSDP, "--out", str(out), *flag)
    assert code == 2 and err.count("\n") == 1 and flag[0] in err and not out.exists()


def test_a_no_sync_trace_is_read_as_its_micro_steps():
    imp = import_traces(NO_SYNC)
    assert all(s.accum_steps == 2 for j in imp.joint for s in j.ranks)
    assert all(not m.syncs for j in imp.joint for s in j.ranks for m in s.micro)
    strategy = imp.traced.strategy
    assert strategy.name == "no_sync" and strategy.accum_steps == 2
    assert imp.traced.plan.micro_steps == 2
    assert {c.micro_step for c in imp.traced.plan.collectives} == {1}
    # the gradients once, not once per micro-step
    assert imp.profile.grad_total_bytes == GRAD_BYTES
    assert abs(imp.reproduction_error) < 0.05
    # other bucket sizes, and the same job synced every micro-step
    inputs = Inputs(imp.profile, imp.link, imp.world_size, imp.contention, imp.host)
    for s in (make_strategy("no_sync", 0.1, accum_steps=2),
              make_strategy("sync_each", 0.1, accum_steps=2)):
        assert simulate(plan(imp.profile, s), inputs).step_s > 0


def _node(name: str, start: float, grad: int | None = None) -> Node:
    return Node(name, start, start + 1e-4, grad_bytes=grad, grad_shape=None if grad is None
                else (grad // 4,))


def test_identical_layers_with_no_forward_between_are_one_pass():
    layers = [_node("AddmmBackward0", i * 3e-4) for i in range(4)]
    nodes = []
    for i, n in enumerate(layers):   # four identical layers: their shapes repeat 4 times
        nodes += [n, _node("AccumulateGrad", n.start_s + 1.5e-4, 4096)]
    assert len(passes(nodes)) == 1
    second = [replace(n, start_s=n.start_s + 0.05, end_s=n.end_s + 0.05) for n in nodes]
    assert [len(p) for p in passes(nodes + second)] == [8, 8]   # a forward's gap between
