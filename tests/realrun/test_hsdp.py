"""hsdp for real (issue 62 item 4): FSDP2 on a 2-D mesh (replicate, shard) on the emulated
2 x 2 cluster (two network namespaces of two ranks, a shaped 1 gbit/s link between them),
training like one process.

    python -m pytest tests/realrun/test_hsdp.py -q        # needs root and iproute2, ~1 min

Each host's two ranks shard every unit between them (the launcher's LOCAL_WORLD_SIZE = 2 is
the node), and the two hosts hold replicas that FSDP2 all-reduces shard by shard across the
shaped link. Exact, as fsdp and zero2 are (float32 round-off: tests/realrun/test_beyond_ddp.py).
"""
from __future__ import annotations

import pytest

from realrun.configs import config_of
from realrun.launch.errors import NetnsUnavailable
from simddp.planning.strategy import make_strategy

ATOL = 1e-5
HSDP = config_of(make_strategy("hsdp"))
CASES = {
    "hsdp": {"config": HSDP, "model": "shared"},                 # tied embedding, frozen parts
    "hsdp-units": {"config": config_of(make_strategy("hsdp", shard_unit_mb=0.05)),
                   "model": "untied"},                            # several layers a unit
}


@pytest.fixture(scope="module")
def two_by_two() -> list[dict]:
    from realrun.launch import netns, run_world
    try:
        netns.check_available()
        return run_world("tests.realrun._hsdp_targets:train_and_compare",
                         {"layout": HSDP, "cases": CASES}, world_size=4, emulate_hosts=2,
                         link_gbit=1.0, threads_per_rank=1, timeout_s=240.0)
    except NetnsUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.slow
def test_hsdp_shards_in_a_host_and_replicates_across(two_by_two):
    for rank in two_by_two:
        layout = rank["layout"]
        # (replicate, shard) = (2 hosts, 2 ranks a host), ranks host-major
        assert layout["mesh_shape"] == [2, 2] and layout["mesh_dims"] == ["replicate", "shard"]
        assert layout["mesh"] == [[0, 1], [2, 3]]
        assert layout["placements"] == ["Replicate", "Shard"]
        assert layout["local_rows"] * 2 == layout["rows"]       # half of fc1 per rank


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_hsdp_trains_like_one_process(two_by_two, name):
    for rank in two_by_two:
        case = rank[name]
        assert case["dtensor"], "the parameters should be FSDP2's DTensors"
        assert max(case["diffs"]) < ATOL, case["diffs"]
        assert case["moved"] > 100 * ATOL       # training did move the weights
        assert case["frozen_moved"] == 0.0
        assert case["tied_same"]
