"""realrun.DDP's hierarchical strategy: the two-level all-reduce trains like one process.

    python -m pytest tests/realrun/test_hierarchical.py -q    # one 4-rank world, ~30 s here

4 Gloo ranks on loopback as 2 nodes x 2 (and as 1 x 4 and 4 x 1, where one level does
nothing): tests/_ddp_targets.py's Net (tied embedding/head, frozen layer, a branch only rank 0
takes, a layer never used, no_sync accumulation) and a net of odd-sized gradients (every
bucket padded to a multiple of G) must match single-process SGD within float32 round-off.
"""
from __future__ import annotations

import pytest
from torch import nn

from realrun.ddp import DDP
from realrun.executors.realrun_ddp import gpus_per_node
from simddp.errors import InputError
from simddp.planning.plans import plan
from simddp.planning.strategy import make_strategy
from realrun.tensors import module_profile
from tests._ddp_targets import Net

ATOL = 1e-5
# Net's buckets at 0.25 MiB, as bucketed's (tests/realrun/test_ddp.py): same plan, two levels.
BUCKETS = [(8, 7), (6, 5), (4, 3), (2, 1), (0,)]
ACCUM_BUCKETS = [(6, 5), (4, 3), (2, 1), (0,)]
CASES = {f"{4 // g}x{g}": {"strategy": "hierarchical", "bucket_mb": 0.25, "gpus_per_node": g}
         for g in (2, 4, 1)}
# Which global ranks each rank shares a level with (None: that level has one rank).
GROUPS = {"2x2": [{"intra": [0, 1], "inter": [0, 2]}, {"intra": [0, 1], "inter": [1, 3]},
                  {"intra": [2, 3], "inter": [0, 2]}, {"intra": [2, 3], "inter": [1, 3]}],
          "1x4": [{"intra": [0, 1, 2, 3], "inter": None}] * 4,
          "4x1": [{"intra": None, "inter": [0, 1, 2, 3]}] * 4}


# ---- no processes ---------------------------------------------------------------------------

def test_hierarchical_plans_as_bucketed_does():
    net = module_profile(Net())
    assert plan(net, make_strategy("hierarchical", 0.25)).buckets == BUCKETS
    assert plan(net, make_strategy("bucketed", 0.25)).buckets == BUCKETS


def test_gpus_per_node_comes_from_the_flag_then_the_launcher():
    assert gpus_per_node({"REALRUN_GPUS_PER_NODE": "2", "LOCAL_WORLD_SIZE": "8"}) == 2
    assert gpus_per_node({"LOCAL_WORLD_SIZE": "8"}) == 8
    with pytest.raises(InputError, match="LOCAL_WORLD_SIZE='x'"):
        gpus_per_node({"LOCAL_WORLD_SIZE": "x"})


def test_the_name_is_accepted_and_checked_before_any_process_group():
    with pytest.raises(RuntimeError, match="needs an initialised process group"):
        DDP(nn.Linear(2, 2), strategy="hierarchical", bucket_mb=1, gpus_per_node=2)


@pytest.mark.parametrize("argv, fragment", [
    (["--strategies", "bucketed", "--gpus-per-node", "2"], "only hierarchical uses it"),
    (["--strategies", "hierarchical", "--world-size", "4", "--gpus-per-node", "3"],
     "must divide --world-size 4"),
    (["--strategies", "hierarchical", "--gpus-per-node", "0"], "integer >= 1, got 0"),
])
def test_bench_refuses_a_bad_gpus_per_node_in_one_line(tmp_path, capsys, argv, fragment):
    from realrun.cli import main
    try:
        code = main(["bench", "--model", "mlp-2x64", "--bucket-mb", "1", *argv,
                     "--out", str(tmp_path / "out")])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and fragment in err, err


# ---- one 4-rank Gloo world --------------------------------------------------------------------

@pytest.fixture(scope="module")
def four_ranks() -> list[dict]:
    from realrun.launch import run_world
    return run_world("tests.realrun._hierarchical_targets:train_and_compare",
                     {"cases": CASES, "accumulate": ["2x2"], "odd": [2, 4],
                      "subgroup": "2x2"}, world_size=4, threads_per_rank=1, timeout_s=120.0)


def _check_train(train: dict) -> None:
    assert train["initial_diff"] == 0.0, "broadcast from rank 0 did not equalise the models"
    assert max(train["diffs"]) < ATOL, train["diffs"]
    assert [tuple(b) for b in train["buckets"]] == BUCKETS
    assert train["collectives"] == [len(BUCKETS)] * len(train["diffs"])
    assert train["repeat_finish_launches"] == 0
    assert train["frozen_grad_none"] and train["unused_grad_zero"] and train["extra_grad_set"]
    for launches in train["launches"]:   # plan order on every rank
        assert [tuple(ids) for _, ids in launches] == BUCKETS


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_four_ranks_in_two_levels_match_one_process(four_ranks, name):
    for rank, result in enumerate(four_ranks):
        case = result["cases"][name]
        _check_train(case["train"])
        assert case["groups"] == GROUPS[name][rank]


@pytest.mark.slow
def test_no_sync_accumulation_in_two_levels(four_ranks):
    for result in four_ranks:
        for k, accum in result["cases"]["2x2"]["accum"].items():
            assert max(accum["diffs"]) < ATOL, (k, accum["diffs"])
            assert accum["silent_micro_launches"] == 0 and accum["flag_restored"]
            for launches in accum["synced_launches"]:
                assert [tuple(ids) for _, ids in launches] == ACCUM_BUCKETS
                assert {p for p, _ in launches} == {"backward"}


@pytest.mark.slow
@pytest.mark.parametrize("g", ["2", "4"])
def test_buckets_of_odd_sizes_are_padded_to_a_multiple_of_g(four_ranks, g):
    for result in four_ranks:
        odd = result["odd"][g]
        assert max(odd["diffs"]) < ATOL, odd["diffs"]
        # one bucket per gradient, in reverse: bias 3, weight 15, bias 5, weight 35 elements
        assert odd["buckets"] == [[3], [2], [1], [0]]
        assert odd["padded"] == [-(-n // int(g)) * int(g) for n in (3, 15, 5, 35)]


@pytest.mark.slow
def test_a_process_group_gets_node_groups_of_its_own(four_ranks):
    for rank, result in enumerate(four_ranks):
        _check_train(result["subgroup"]["train"])
        assert result["subgroup"]["groups"] == GROUPS["2x2"][rank]
