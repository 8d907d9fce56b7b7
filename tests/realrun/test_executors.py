"""realrun picks an executor by ``Strategy.implementation``, and ranks get the Strategy as
data: no process starts here (the Gloo runs are test_ddp.py and test_beyond_ddp.py)."""
from __future__ import annotations

import pathlib

import pytest

from realrun.configs import bench_configs, config_of, spec_of
from realrun.executors import EXECUTORS, executor_for
from realrun.executors.torch_ddp import torch_ddp_bucket_args
from simddp.inputs.host import IMPLEMENTATIONS
from simddp.planning.strategy import Strategy, make_strategy

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_one_executor_per_implementation():
    assert set(EXECUTORS) == set(IMPLEMENTATIONS)
    assert executor_for(make_strategy("zero2")) is EXECUTORS["fsdp"]
    assert executor_for(make_strategy("bucketed+fp16", 4)) is EXECUTORS["torch"]
    assert executor_for(make_strategy("overlap")) is EXECUTORS["realrun"]


def test_torch_buckets_follow_the_strategy_not_its_name():
    # ddp: torch's 1 MiB first bucket, then the cap; bucketed (+hook): one cap for all
    assert torch_ddp_bucket_args(make_strategy("ddp+fp16", 10)) == {
        "bucket_cap_mb_list": [1.0, 10.0]}
    assert torch_ddp_bucket_args(make_strategy("bucketed+powersgd:2", 10)) == {
        "bucket_cap_mb": 10.0}
    # torch takes int(mb * 2**20): the strategy's own bytes, not the typed MB re-rounded
    strategy = make_strategy("bucketed", 0.01)
    assert int(torch_ddp_bucket_args(strategy)["bucket_cap_mb"] * 2**20) == strategy.bucket_bytes


def test_configs_round_trip_their_strategy():
    for config in bench_configs(["naive", "bucketed", "ddp", "fsdp"], [0.01, 4],
                                comm_hooks=["powersgd:2"], shard_unit_mb=1):
        spec = spec_of(config)
        assert config["spec"] is None if spec is None else spec.name == config["strategy"]
    assert spec_of(config_of(make_strategy("ddp", 4))) == make_strategy("ddp", 4)
    with pytest.raises(ValueError, match="carries no 'spec'"):
        spec_of({"strategy": "ddp", "bucket_mb": 4.0})   # never silently compute-only
    assert isinstance(spec_of(config_of(make_strategy("zero2"))), Strategy)


def test_no_strategy_name_is_parsed_in_realrun_or_calibrate():
    hits = [str(p.relative_to(ROOT)) for package in ("realrun", "calibrate")
            for p in (ROOT / package).rglob("*.py") if "split_name" in p.read_text()]
    assert hits == []
