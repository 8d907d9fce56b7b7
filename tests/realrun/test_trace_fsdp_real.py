"""``simddp trace-import`` on FSDP2 and no_sync traces recorded here: 2 Gloo ranks on CPU, a
small transformer, torch FSDP2 (fsdp, zero2) and torch DDP over 2 micro-steps
(realrun/trace_job.py).

    python -m pytest tests/realrun/test_trace_fsdp_real.py -q      # ~1 min on 2 vCPUs

What the import must get right whatever the host's load: the units and their gradients (the
model's), the collectives per step (what FSDP2 issued), the traced configuration, the
micro-steps. How well it predicts is measured by bench/bench_trace_import.py --job fsdp and
--job no_sync, not asserted here.
"""
from __future__ import annotations

import pytest

from realrun.configs import config_of
from realrun.launch import run_world
from realrun.workload import Workload
from simddp.ingest.trace import import_traces
from simddp.planning.strategy import make_strategy
from simddp.presets.models import ModelSpec

STEPS = 2
TINY = Workload.preset(ModelSpec("transformer", layers=1, d_model=64, d_ff=256, heads=2,
                                 vocab=512, name="tiny"), batch=2, seq=16)


def record(tmp_path, strategy, accum: int = 1) -> tuple[list[str], dict]:
    out = str(tmp_path / "trace.rank{rank}.json")
    ranks = run_world("realrun.trace_job:trace_rank", {
        "workload": TINY.to_json(), "config": config_of(strategy), "accum_steps": accum,
        "warmup": 3, "steps": STEPS, "out": out}, world_size=2, timeout_s=180)
    return [out.format(rank=r) for r in range(2)], ranks[0]


@pytest.mark.slow
@pytest.mark.parametrize("name, regathers", [("fsdp", True), ("zero2", False)])
def test_fsdp2_traces_import_per_unit(tmp_path, name, regathers):
    paths, rank = record(tmp_path, make_strategy(name))
    imp = import_traces(paths)
    units = len(imp.sharded.units)
    assert imp.traced.strategy.name == name and imp.traced.rule_reproduces
    assert sorted(imp.profile.tensor_bytes) == sorted(rank["grad_bytes"])
    assert imp.sharded.calls_per_step == {"all_gather": units * (2 if regathers else 1),
                                          "reduce_scatter": units}
    assert sum(imp.sharded.calls_per_step.values()) == rank["collectives"]
    assert len(imp.sharded.steps) == STEPS and imp.measured_step_s > 0


@pytest.mark.slow
def test_a_no_sync_trace_imports_its_micro_steps(tmp_path):
    paths, rank = record(tmp_path, make_strategy("ddp", 0.05), accum=2)
    imp = import_traces(paths)
    assert imp.traced.strategy.name == "no_sync" and imp.traced.strategy.accum_steps == 2
    assert all(s.accum_steps == 2 and not s.micro[0].syncs for j in imp.joint for s in j.ranks)
    assert sorted(imp.profile.tensor_bytes) == sorted(rank["grad_bytes"])
    assert abs(imp.reproduction_error) < 0.05
