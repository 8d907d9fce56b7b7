"""realrun.DDP: argument checks and the plan it builds (no processes), then multi-process Gloo
runs that must match single-process training step for step.

    python -m pytest tests/realrun/test_ddp.py -q            # all (about a minute on 2 cores)
    python -m pytest tests/realrun/test_ddp.py -q -m "not slow"

Two spawned worlds (2 and 3 ranks) run every strategy's cases: starting a world costs
seconds (process start, torch import, gloo init), more than the training itself.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
from torch import nn

from simddp.inputs.profile import Layer, ModelProfile
from realrun.ddp import DDP, module_profile, trainable_parameters
from simddp.planning.plans import plan
from simddp.planning.strategy import make_strategy
from tests._ddp_targets import Net
from tests._messages import assert_names

ATOL = 1e-5

# Net's trainable tensors in parameters() order (float32 bytes), see tests/_ddp_targets.py:
# 0 embed/head 128 KiB, 1 fc1.w 512 KiB, 2 fc1.b 2 KiB, 3 fc2.w 512 KiB, 4 fc2.b 1 KiB,
# 5 extra.w 256 KiB, 6 extra.b 1 KiB, 7 unused.w 256 KiB, 8 unused.b 1 KiB.
# Buckets fill in reverse order; a bucket closes once it reaches its limit.
CASES = {
    "naive": ({"strategy": "naive"}, [(t,) for t in range(8, -1, -1)]),
    "flat": ({"strategy": "flat"}, [tuple(range(8, -1, -1))]),
    "overlap": ({"strategy": "overlap"}, [(t,) for t in range(8, -1, -1)]),
    # 0.25 MiB cap: 1 KiB + 256 KiB reaches it, so pairs close.
    "bucketed": ({"strategy": "bucketed", "bucket_mb": 0.25},
                 [(8, 7), (6, 5), (4, 3), (2, 1), (0,)]),
    # torch's 1 MiB first bucket needs 8..3 (1027 KiB); then 0.5 MiB buckets.
    "ddp": ({"strategy": "ddp", "bucket_mb": 0.5}, [(8, 7, 6, 5, 4, 3), (2, 1), (0,)]),
}
ACCUM_BUCKETS = {  # the same model without `unused` (7 tensors)
    "naive": [(t,) for t in range(6, -1, -1)], "flat": [tuple(range(6, -1, -1))],
    "overlap": [(t,) for t in range(6, -1, -1)], "bucketed": [(6, 5), (4, 3), (2, 1), (0,)],
    "ddp": [(6, 5, 4, 3, 2, 1), (0,)],
}


# ---- no processes ---------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, fragment", [
    ({"strategy": "ring"}, "strategy='ring': choose from naive, flat"),
    ({"strategy": "bucketed", "bucket_mb": 0}, "bucket_mb: 0 is not a number > 0"),
    ({"strategy": "ddp", "bucket_mb": float("nan")}, "bucket_mb: nan"),
    ({"strategy": "naive", "bucket_mb": "25"}, "bucket_mb: '25'"),
    ({"strategy": "ddp", "first_bucket_mb": -1}, "first_bucket_mb: -1"),
])
def test_bad_arguments_raise_one_line_value_error(kwargs, fragment):
    with pytest.raises(ValueError) as info:
        DDP(nn.Linear(2, 2), **kwargs)
    assert fragment in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"strategy": make_strategy("ddp+fp16", 4)}, "realrun.DDP replicates without comm hooks"),
    ({"strategy": make_strategy("zero2")}, "realrun.DDP replicates without comm hooks"),
    ({"strategy": make_strategy("ddp", 4), "bucket_mb": 2}, "a Strategy with its own bucket"),
])
def test_a_strategy_it_cannot_run_or_sizes_beside_one_are_refused(kwargs, fragment):
    with pytest.raises(ValueError) as info:
        DDP(nn.Linear(2, 2), **kwargs)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_a_strategy_passes_the_checks_a_name_does():
    # the Strategy realrun's own runs hand it: checked, then the process group is asked for
    with pytest.raises(RuntimeError, match="needs an initialised process group"):
        DDP(nn.Linear(2, 2), strategy=make_strategy("ddp", 4))


def test_without_a_process_group_says_how_to_start_one():
    with pytest.raises(RuntimeError, match="needs an initialised process group"):
        DDP(nn.Linear(2, 2))


def test_no_trainable_parameters_is_a_value_error():
    with pytest.raises(ValueError, match="no trainable parameters"):
        DDP(nn.Linear(2, 2).requires_grad_(False))


def test_profile_has_one_tensor_per_unique_trainable_parameter():
    net = Net()
    names = [name for name, _ in trainable_parameters(net)]
    assert names == ["embed.weight", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                     "extra.weight", "extra.bias", "unused.weight", "unused.bias"]
    profile = module_profile(net)
    assert [layer.name for layer in profile.layers] == ["embed", "fc1", "fc2", "extra", "unused"]
    assert profile.tensor_bytes == (128 * 1024, 512 * 1024, 2048, 512 * 1024, 1024,
                                    256 * 1024, 1024, 256 * 1024, 1024)


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_groups_match_hand_computed_buckets(name):
    kwargs, expected = CASES[name]
    strategy = make_strategy(kwargs["strategy"], kwargs.get("bucket_mb", 25.0))
    assert plan(module_profile(Net()), strategy).buckets == expected


def test_profile_that_does_not_match_the_module_is_rejected():
    other = module_profile(nn.Linear(3, 3))   # names weight, bias: not Net's parameters
    with pytest.raises(ValueError, match="does not name this module's trainable parameters"):
        DDP(Net(), profile=other)
    unnamed = ModelProfile("sizes only", (Layer("l", (36, 12)),))
    with pytest.raises(ValueError, match="trainable parameters are 9 tensors"):
        DDP(Net(), profile=unnamed)


def test_import_realrun_does_not_import_torch():
    code = "import sys, realrun; assert 'torch' not in sys.modules; assert 'DDP' in dir(realrun)"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- multi-process Gloo ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_ranks() -> list[dict]:
    """Every strategy's cases, run in one 2-rank world (a world costs seconds to start)."""
    return _run(sorted(CASES), world_size=2)


@pytest.fixture(scope="module")
def three_ranks() -> list[dict]:
    """flat and bucketed at 3 ranks, plus DDP on a process group of ranks 1 and 2."""
    return _run(["flat", "bucketed"], world_size=3, subgroup=[1, 2])


def _run(names: list[str], world_size: int, subgroup: list[int] | None = None) -> list[dict]:
    from realrun.launch import run_world
    cases = {name: CASES[name][0] for name in names}
    return run_world("tests._ddp_targets:train_and_compare",
                     {"cases": cases, "subgroup": subgroup}, world_size=world_size,
                     threads_per_rank=1, timeout_s=120.0)


def _check_training(train: dict, expected: list[tuple[int, ...]], overlap: bool) -> None:
    assert train["initial_diff"] == 0.0, "broadcast from rank 0 did not equalise the models"
    assert max(train["diffs"]) < ATOL, train["diffs"]
    assert [tuple(b) for b in train["buckets"]] == expected
    assert [tuple(b) for b in train["plan"]] == expected
    assert train["collectives"] == [len(expected)] * len(train["diffs"])
    assert train["repeat_finish_launches"] == 0
    assert train["frozen_grad_none"] and train["unused_grad_zero"] and train["extra_grad_set"]
    for launches in train["launches"]:  # launch order is the plan's, on every rank
        assert [tuple(ids) for _, ids in launches] == expected
        if not overlap:
            assert {p for p, _ in launches} == {"finish"}


def _check_accumulation(accum: dict, expected: list[tuple[int, ...]], overlap: bool) -> None:
    for k, result in accum.items():
        assert result["flag_restored"] is True
        assert max(result["diffs"]) < ATOL, (k, result["diffs"])
        assert result["silent_micro_launches"] == 0, k
        for launches in result["synced_launches"]:
            assert [tuple(ids) for _, ids in launches] == expected
            # Every gradient is used, so overlap plans launch everything during backward.
            assert {p for p, _ in launches} == {"backward" if overlap else "finish"}
        if overlap:
            # a usage error that names the call that fixes it
            assert_names(result["double_backward_error"], "finish_gradient_synchronization")
        else:
            assert result["double_backward_error"] == ""


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_two_ranks_match_single_process_training(two_ranks, name):
    _, expected = CASES[name]
    overlap = make_strategy(CASES[name][0]["strategy"]).overlap
    for rank_results in two_ranks:
        _check_training(rank_results[name]["train"], expected, overlap)
        _check_accumulation(rank_results[name]["accum"], ACCUM_BUCKETS[name], overlap)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["flat", "bucketed"])
def test_three_ranks_and_a_process_group_of_two(three_ranks, name):
    _, expected = CASES[name]
    overlap = make_strategy(CASES[name][0]["strategy"]).overlap
    for rank, rank_results in enumerate(three_ranks):
        result = rank_results[name]
        _check_training(result["train"], expected, overlap)
        _check_accumulation(result["accum"], ACCUM_BUCKETS[name], overlap)
        if rank in (1, 2):  # DDP on ranks 1 and 2 only: broadcast comes from global rank 1
            _check_training(result["subgroup"], expected, overlap)
        else:
            assert "subgroup" not in result
