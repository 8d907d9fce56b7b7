"""``simddp trace-import`` on real traces: 2 Gloo ranks on CPU, torch DDP and realrun.DDP,
small models, recorded here with torch.profiler (realrun/trace_job.py).

    python -m pytest tests/realrun/test_trace_import_real.py -q      # ~30 s on 2 vCPUs

What the import must get right whatever the host's load: the gradient bytes (the model's),
the tensors, the steps, the gradient all-reduces per step (what the wrapper issued), the
traced configuration, the phases present, and a re-simulation of the traced step. How well
it predicts other bucket sizes is measured by bench/bench_trace_import.py, not asserted
here (timings on a shared 2-vCPU box vary by ±15 %).
"""
from __future__ import annotations

import json
import os

import pytest

from realrun.configs import config_of
from realrun.launch import run_world
from realrun.workload import Workload
from simddp.cli.main import main
from simddp.inputs.io import load_link, load_profile
from simddp.presets.models import ModelSpec
from simddp.planning.strategy import make_strategy
from simddp.ingest.trace import import_traces

STEPS = 3
# 2 blocks of width 64, vocabulary 512: 22 gradient tensors, ~0.3 MiB; 2 x 16 tokens per rank.
TINY = Workload.preset(ModelSpec("transformer", layers=2, d_model=64, d_ff=256, heads=2,
                                 vocab=512, name="tiny"), batch=2, seq=16)


def record(tmp_path, config: dict, schedule: bool) -> tuple[list[str], list[dict]]:
    """Trace STEPS steps of TINY under ``config`` on 2 Gloo ranks; (paths, rank values)."""
    out = str(tmp_path / "trace.rank{rank}.json")
    ranks = run_world("realrun.trace_job:trace_rank", {
        "workload": TINY.to_json(), "config": config, "warmup": 3, "steps": STEPS,
        "schedule": schedule, "out": out}, world_size=2, timeout_s=120)
    return [out.format(rank=r) for r in range(2)], ranks


@pytest.mark.slow
def test_torch_ddp_trace_with_profiler_steps(tmp_path, capsys):
    paths, ranks = record(tmp_path, config_of(make_strategy("ddp", 0.05)), schedule=True)
    imp = import_traces(paths)
    grads = ranks[0]["grad_bytes"]
    assert imp.profile.grad_total_bytes == sum(grads)
    assert sorted(imp.profile.tensor_bytes) == sorted(grads)
    assert imp.granularity == "parameter"
    assert len(imp.joint) == STEPS and imp.joint[0].label.startswith("ProfilerStep#")
    assert imp.timelines[0].implementation == "torch"
    assert all(len(s.syncs) == ranks[0]["collectives"] for j in imp.joint for s in j.ranks)
    assert sum(imp.joint[0].ranks[0].syncs[i].nbytes
               for i in range(ranks[0]["collectives"])) == sum(grads)
    strategy = imp.traced.strategy
    assert strategy.name == "ddp" and strategy.implementation == "torch"
    lo, hi = imp.traced.bucket_mb_range
    assert lo < 0.05 <= hi and imp.traced.rule_reproduces
    phases = imp.derived.phases
    assert phases["forward_s"] > 0 and phases["backward_s"] > 0 and phases["optimizer_s"] > 0
    assert imp.measured_step_s > 0 and abs(imp.reproduction_error) < 0.05

    # The command on the same traces: files simddp reads back, the summary on stdout.
    out = tmp_path / "out"
    assert main(["trace-import", *paths, "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert load_profile(out / "profile.json").grad_total_bytes == sum(grads)
    assert load_link(out / "link.json").world_size == 2
    doc = json.loads((out / "summary.json").read_text())
    assert doc["collectives"]["gradient_allreduces_per_step"] == ranks[0]["collectives"]
    assert "traced configuration: ddp" in stdout and os.path.exists(out / "summary.json")


@pytest.mark.slow
def test_realrun_ddp_trace_without_profiler_steps(tmp_path):
    paths, ranks = record(tmp_path, config_of(make_strategy("bucketed", 0.05)), schedule=False)
    imp = import_traces(paths)
    grads = ranks[0]["grad_bytes"]
    assert imp.profile.grad_total_bytes == sum(grads)
    assert imp.profile.n_tensors == len(grads)
    # steps from the optimizer's ranges: the first starts where the trace does
    assert len(imp.joint) == STEPS and imp.joint[0].label == "step 0"
    assert imp.timelines[0].implementation == "realrun"
    assert all(len(s.syncs) == ranks[0]["collectives"] for j in imp.joint for s in j.ranks)
    assert imp.traced.strategy.name == "bucketed"
    assert abs(imp.reproduction_error) < 0.05
