"""fsdp, zero2 (torch FSDP2) and comm hooks (torch DDP): which units, which flags, and, on
two Gloo ranks, training that matches single-process SGD.

    python -m pytest tests/realrun/test_beyond_ddp.py -q              # ~1 min on 2 cores
    python -m pytest tests/realrun/test_beyond_ddp.py -q -m "not slow"

Tolerances (docs/REALRUN.md, "fsdp, zero2 and comm hooks"): fsdp and zero2 are exact
(float32 round-off, as realrun.DDP's tests). The hooks are scored against how far training
moved the parameters: fp16 rounds each averaged gradient to 11 significant bits (measured:
6e-4 of the movement after 6 steps, FP16_RTOL 2e-3); PowerSGD of rank 2 is exact in exact
arithmetic where every averaged gradient has rank <= 2 (LowRankNet, one sample per rank), but
each rank's error-feedback buffer holds its own gradient minus the average, which grows step
by step and so does the round-off (measured: 1e-8 at the first compressed step, 8.5e-4 of the
movement after 4 of them; POWERSGD_RTOL 3e-3).
"""
from __future__ import annotations

import pytest
import torch

from realrun.cli import main
from realrun.configs import bench_configs, config_of, label
from realrun.sharded import shard_groups
from realrun.tensors import module_profile
from realrun.workflows.validate import ValidateSettings
from simddp.errors import InputError
from simddp.planning.plans import plan
from simddp.planning.strategy import make_strategy
from tests.realrun._beyond_ddp_targets import LowRankNet, SharedNet

ATOL = 1e-5
FP16_RTOL = 2e-3       # of the largest parameter movement; fp16 keeps 11 significant bits
POWERSGD_RTOL = 3e-3   # the same, for PowerSGD on rank-<=R gradients (round-off only)
TINY = ["--model", "mlp-2x64", "--batch", "1", "--seq", "2"]


# ---- no processes ---------------------------------------------------------------------------

def test_shard_groups_skip_the_tied_unit_and_put_nested_units_first():
    net = SharedNet()
    units = plan(module_profile(net), make_strategy("fsdp")).units
    assert [u.names for u in units] == [("embed",), ("fc1",), ("fc2",), ("block",),
                                        ("block.inner",)]
    # embed's weight is also head's: it goes to the root; block.inner before its parent
    assert shard_groups(net, plan(module_profile(net), make_strategy("fsdp"))) == [
        ["block.inner"], ["fc1"], ["fc2"], ["block"]]
    untied = SharedNet(tied=False)
    assert ["embed"] in shard_groups(untied, plan(module_profile(untied), make_strategy("zero2")))


def test_shard_unit_mb_groups_modules_as_the_simulator_does():
    net = LowRankNet()   # two 16 KiB layers: a 0.02 MB unit takes both
    strategy = make_strategy("fsdp", shard_unit_mb=0.02)
    assert shard_groups(net, plan(module_profile(net), strategy)) == [["l1", "l2"]]


def test_configs_carry_simddp_names_for_hooks_and_sharding():
    configs = bench_configs(["bucketed", "ddp", "fsdp", "zero2"], [4, 1],
                            comm_hooks=["fp16", "powersgd:2"], shard_unit_mb=2)
    assert [label(c) for c in configs] == [
        "compute-only", "bucketed-1MB", "bucketed-4MB", "bucketed+fp16-1MB",
        "bucketed+fp16-4MB", "bucketed+powersgd:2-1MB", "bucketed+powersgd:2-4MB",
        "ddp-1MB", "ddp-4MB", "ddp+fp16-1MB", "ddp+fp16-4MB", "ddp+powersgd:2-1MB",
        "ddp+powersgd:2-4MB", "fsdp", "zero2"]
    # the Strategy itself travels with the row (its units), not a name to rebuild
    assert configs[-1] == {"strategy": "zero2", "bucket_mb": None,
                           "spec": make_strategy("zero2", shard_unit_mb=2).to_dict()}


@pytest.mark.parametrize("argv, message", [
    (["--comm-hook", "bf16", "--strategies", "ddp"],
     "--comm-hook bf16: torch's bf16_compress_hook needs NCCL (--backend nccl)"),
    (["--comm-hook", "powersgd:2", "--strategies", "ddp", "--warmup", "2"],
     "--warmup 2: powersgd compresses from step 2 on"),
    (["--comm-hook", "fp16", "--strategies", "naive,fsdp"],
     "--comm-hook fp16: works with bucketed and ddp"),
    (["--comm-hook", "powersgd:0", "--strategies", "ddp"], "powersgd rank must be an integer"),
    (["--comm-hook", "gzip", "--strategies", "ddp"], "--comm-hook: unknown 'gzip'"),
    (["--shard-unit-mb", "1", "--strategies", "ddp"], "--shard-unit-mb: no sharded strategy"),
    (["--shard-unit-mb", "-1", "--strategies", "fsdp"], "--shard-unit-mb: -1.0 is not a number"),
    (["--strategies", "fsdp,ring"], "'ring'; choose from naive, flat, overlap, bucketed, ddp, fsdp, zero2"),
])
@pytest.mark.parametrize("command", ["bench", "validate"])
def test_bad_beyond_ddp_flags_exit_2_with_one_line(command, argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    try:
        code = main([command, *TINY, *argv, "--out", str(out)])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert message in err, err
    assert not out.exists()


def test_validate_settings_check_hooks_and_units():
    with pytest.raises(InputError, match="bf16_compress_hook needs NCCL"):
        ValidateSettings(strategies=("ddp",), comm_hooks=("bf16",))
    with pytest.raises(InputError, match="--shard-unit-mb: no sharded strategy"):
        ValidateSettings(strategies=("ddp",), shard_unit_mb=1.0)
    s = ValidateSettings(strategies=("ddp", "fsdp"), bucket_mbs=(4,), comm_hooks=("fp16",),
                         shard_unit_mb=1.0)
    assert [label(c) for c in s.configs()] == ["compute-only", "ddp-4MB", "ddp+fp16-4MB", "fsdp"]


# ---- multi-process Gloo ---------------------------------------------------------------------

def config(name: str, bucket_mb: float | None = None, **kwargs) -> dict:
    """What bench hands a rank: the row's name and bucket size, and the Strategy itself."""
    mb = () if bucket_mb is None else (bucket_mb,)
    return config_of(make_strategy(name, *mb, **kwargs), bucket_mb)


CASES = {
    "fsdp": {"config": config("fsdp"), "model": "shared"},
    "zero2": {"config": config("zero2"), "model": "shared"},
    "fsdp-untied": {"config": config("fsdp"), "model": "untied"},
    "fsdp-units": {"config": config("fsdp", shard_unit_mb=0.05), "model": "untied"},
    "ddp+fp16": {"config": config("ddp+fp16", 0.05), "model": "shared"},
    "bucketed+fp16": {"config": config("bucketed+fp16", 0.05), "model": "shared"},
    "ddp+powersgd:2": {"config": config("ddp+powersgd:2", 0.01), "model": "lowrank",
                       "per_rank": 1},
    "bucketed+powersgd:2": {"config": config("bucketed+powersgd:2", 25.0), "model": "lowrank",
                            "per_rank": 1},
    # several buckets in flight: torch's hook alone hangs on Gloo (realrun/comm_hooks.py)
    "powersgd-buckets": {"config": config("bucketed+powersgd:1", 0.02), "model": "untied"},
}


@pytest.fixture(scope="module")
def two_ranks() -> list[dict]:
    from realrun.launch import run_world
    return run_world("tests.realrun._beyond_ddp_targets:train_and_compare", {"cases": CASES},
                     world_size=2, threads_per_rank=1, timeout_s=120.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fsdp", "zero2", "fsdp-untied", "fsdp-units"])
def test_fsdp2_trains_like_one_process(two_ranks, name):
    for rank in two_ranks:
        case = rank[name]
        assert case["dtensor"], "the parameters should be FSDP2's DTensors"
        assert max(case["diffs"]) < ATOL, case["diffs"]
        assert case["moved"] > 100 * ATOL        # training did move the weights
        assert case["frozen_moved"] == 0.0
        assert case["tied_same"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ddp+powersgd:2", "bucketed+powersgd:2"])
def test_powersgd_is_exact_on_gradients_of_rank_at_most_its_rank(two_ranks, name):
    for rank in two_ranks:
        case = rank[name]
        assert max(case["diffs"][:2]) < ATOL     # steps 0, 1: plain all-reduces
        assert max(case["diffs"]) < POWERSGD_RTOL * case["moved"], (case["diffs"], case["moved"])
        assert case["moved"] > 100 * ATOL


@pytest.mark.slow
def test_powersgd_with_several_buckets_runs_on_gloo_and_trains(two_ranks):
    """Full-rank gradients, rank 1: lossy, so only that it finishes, matches on both ranks
    and stays nearer to exact SGD than the distance training moved (measured in the docs)."""
    a, b = (rank["powersgd-buckets"] for rank in two_ranks)
    assert a["diffs"] == b["diffs"]
    assert max(a["diffs"]) < a["moved"], (a["diffs"], a["moved"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ddp+fp16", "bucketed+fp16"])
def test_fp16_hook_trains_within_its_rounding(two_ranks, name):
    for rank in two_ranks:
        case = rank[name]
        assert max(case["diffs"]) < FP16_RTOL * case["moved"], (case["diffs"], case["moved"])
        assert case["frozen_moved"] == 0.0 and case["tied_same"]


def test_bf16_check_names_the_backend():
    from realrun.comm_hooks import check_backend
    from simddp.planning.hooks import parse_comm_hook
    check_backend([parse_comm_hook("bf16")], "nccl")   # fine on NCCL
    with pytest.raises(InputError, match="On gloo, use fp16"):
        check_backend([parse_comm_hook("bf16")], "gloo")
    assert torch.distributed.is_available()


def test_fsdp2_host_costs_are_solved_from_fsdp_and_zero2_steps():
    # Two 1 MB layers, p = 2, copies at 1 GB/s: an all-gather or reduce-scatter copies 1.5 MB
    # (n/p and n) = 1.5 ms. fsdp: 4 all-gathers + 2 reduce-scatters (9 ms of copies), zero2:
    # 2 + 2 (6 ms). With gather 1 ms and scatter 2 ms per call the rest is 8 and 6 ms; a
    # 2 ms optimizer on the shard saves 1 ms of the 10 ms compute-only step.
    from realrun.fsdp_host_costs import SHARDED, fsdp_costs
    from simddp import Layer, ModelProfile
    toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10 ** 6,)) for i in range(2)))
    plans = {s: plan(toy, make_strategy(s)) for s in SHARDED}
    # host = step - compute-only - wire: fsdp 38 - 10 - 12 = 16 ms, zero2 29 - 10 - 8 = 11 ms,
    # +1 ms each for the optimizer's share -> 17 and 12 ms, less 9 and 6 ms of copies
    from realrun.fsdp_host_costs import host_over_rounds
    steps = {"compute-only": [0.010] * 2, "fsdp": [0.038] * 2, "zero2": [0.029] * 2,
             "wire:fsdp": [0.012] * 2, "wire:zero2": [0.008] * 2}
    host_s, medians = host_over_rounds(steps, chunk=1)
    assert host_s == pytest.approx({"fsdp": 0.016, "zero2": 0.011})
    costs, info = fsdp_costs(host_s, plans, 1.0, 2, optimizer_s=0.002, blocking=True)
    assert (costs.gather_s, costs.scatter_s) == pytest.approx((1e-3, 2e-3))
    assert costs.copy_gbps == 1.0 and costs.blocking_collectives
    assert info["calls"]["fsdp"] == {"all_gather": 4, "reduce_scatter": 2}
    # noise making fsdp's rest (4 ms) smaller than zero2's (6 ms): the better fit with one
    # cost 0 — scatter only: s = (2·4 + 2·6) / (2² + 2²) = 2.5 ms (g only fits worse)
    costs, _ = fsdp_costs({"fsdp": 0.012, "zero2": 0.011}, plans, 1.0, 2, optimizer_s=0.002)
    assert (costs.gather_s, costs.scatter_s) == pytest.approx((0.0, 2.5e-3))
    assert not costs.blocking_collectives
    # steps faster than their copies: never a negative cost
    costs, _ = fsdp_costs({"fsdp": 0.004, "zero2": 0.002}, plans, 1.0, 2)
    assert (costs.gather_s, costs.scatter_s) == (0.0, 0.0)


def test_anchored_probes_keep_the_fsdp2_host_costs():
    from realrun.workflows.validate.probes import inputs_from_probes
    from simddp.inputs.host import Host, HostCosts
    from simddp.inputs.link import Link
    from simddp.inputs.link_file import LinkFile
    fsdp = HostCosts(copy_gbps=2.0, gather_s=1e-3, scatter_s=2e-3, blocking_collectives=True)
    earlier = Host("profile", {"realrun": HostCosts(copy_gbps=1.0), "fsdp": fsdp})
    _, host, _ = inputs_from_probes(LinkFile(Link("cal", 1e-4, 1.0, world_size=2)), earlier,
                                    {"probe:copy": 0.008, "probe:scale": 0.002},
                                    [10 ** 6] * 4, 2)
    assert host.costs("fsdp") == fsdp and host.costs("realrun").copy_gbps == 1.0


@pytest.mark.slow
def test_profile_measures_fsdp2_host_costs_on_gloo(tmp_path):
    """realrun profile --fsdp: the "fsdp" implementation's costs in the profile's host_costs
    section, blocking on Gloo, read back by simddp."""
    from simddp.inputs.io import load_host
    out = tmp_path / "profile.json"
    assert main(["profile", *TINY, "--repeats", "3", "--fsdp", "--out", str(out)]) == 0
    costs = load_host(out).costs("fsdp")
    assert costs.blocking_collectives and costs.copy_gbps > 0
    assert costs.gather_s >= 0 and costs.scatter_s >= 0


@pytest.mark.slow
def test_validate_runs_fsdp_zero2_and_a_hook_end_to_end(tiny_validate):
    """realrun validate with fsdp, zero2 and --comm-hook fp16 beside the DDP family (the
    shared tiny run, tests/realrun/conftest.py): every row predicted and measured under
    simddp's names; the timeline of an FSDP2 strategy has compute spans only."""
    from realrun.workflows.validate.timeline import measure_timeline
    rows = {(r["strategy"], r["bucket_mb"]): r for r in tiny_validate.doc["rows"]}
    assert set(rows) >= {("compute-only", None), ("ddp", 1.0), ("ddp+fp16", 1.0),
                         ("ddp+fp16", 0.01), ("fsdp", None), ("zero2", None)}
    assert all(r["measured_ms"] > 0 and r["predicted_ms"] > 0 for r in rows.values())
    s = ValidateSettings(model="mlp-2x64", batch=1, seq=2, strategies=("fsdp",),
                         shard_unit_mb=0.01, timeline_steps=2, warmup=1)
    spans = measure_timeline(s, "fsdp", None)
    assert {sp.lane for sp in spans} == {"compute"}
    assert [sp.label for sp in spans] == ["forward", "backward", "optimizer"]
