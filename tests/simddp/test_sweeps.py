"""The sweep library behind ``python -m simddp sweep``: which configurations it simulates and
which bucket it recommends, on hand-made results."""
from __future__ import annotations

import pytest

from simddp.result import Result
from simddp.planning.strategy import STRATEGIES
from simddp.predict.sweep import sweep_strategies
from simddp.predict.recommend import recommend

def fake(strategy: str, bucket_mb: float | None, step_ms: float, accum_steps: int = 1) -> Result:
    return Result(model="m", link="l", strategy=strategy, bucket_mb=bucket_mb, world_size=2,
                  step_s=step_ms / 1e3, exposed_comm_s=0.0, collectives=1,
                  accum_steps=accum_steps)


def test_bucketless_strategies_are_simulated_once_and_no_sync_brings_sync_each():
    configs = sweep_strategies(STRATEGIES, [100, 1, 10, 10], accum_steps=2)
    names = [(s.name, s.bucket_mb) for s in configs]
    assert names[:3] == [("naive", None), ("flat", None), ("overlap", None)]
    assert [mb for name, mb in names if name == "ddp"] == [1.0, 10.0, 100.0]  # sorted, unique
    assert [name for name, _ in names[-6:]] == ["sync_each", "no_sync"] * 3
    assert {s.accum_steps for s in configs if s.name in ("no_sync", "sync_each")} == {2}


def test_recommend_the_fastest_ddp_bucket_and_the_runner_up():
    rec = recommend([fake("naive", None, 100), fake("bucketed", 10, 70), fake("ddp", 1, 80),
                     fake("ddp", 10, 71), fake("ddp", 100, 75), fake("no_sync", 1, 200, 4)])
    assert (rec.strategy, rec.bucket_mb, rec.runner_up_mb, rec.edge) == ("ddp", 10, 100, None)
    assert rec.margin_s == pytest.approx(4e-3)
    assert (rec.fastest.strategy, rec.fastest.bucket_mb) == ("bucketed", 10)


def test_recommend_ties_go_to_torch_default_and_ends_are_flagged():
    assert recommend([fake("ddp", mb, 70) for mb in (1, 10, 25, 100)]).bucket_mb == 25
    assert recommend([fake("ddp", 1, 70), fake("ddp", 10, 71)]).edge == "smallest"
    assert recommend([fake("ddp", 1, 72), fake("ddp", 10, 71)]).edge == "largest"
    assert recommend([fake("bucketed", 5, 70)]).runner_up_mb is None


def test_recommend_falls_back_to_bucketed_then_no_sync_then_none():
    assert recommend([fake("bucketed", 5, 70), fake("no_sync", 1, 60, 4)]).strategy == "bucketed"
    only_accum = recommend([fake("no_sync", 1, 260, 4), fake("no_sync", 10, 250, 4)])
    assert (only_accum.strategy, only_accum.bucket_mb, only_accum.fastest) == ("no_sync", 10, None)
    assert recommend([fake("naive", None, 100), fake("flat", None, 90)]) is None
