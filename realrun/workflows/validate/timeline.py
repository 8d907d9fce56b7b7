"""validate's measured timeline of one configuration, clocked on every rank.

The rank target is ``realrun.workflows.validate.timeline:timeline_rank``.
"""
from __future__ import annotations

import torch

from realrun.launch import run_world
from realrun.precision import set_precision
from realrun.step_clock import clocked_steps, timeline_fields as fields_on_ranks
from realrun.steps import Trainer
from realrun.workload import Workload
from realrun.workflows.validate.settings import ValidateSettings, bench_payload
from simddp.result import Span

# ---------------------------------------------------------------------------------------------
# 5. measured timeline


def timeline_rank(payload: dict, ctx) -> list[dict]:
    """Rank function: run one configuration; each rank clocks ``payload["steps"]`` steps
    after ``payload["warmup"]`` (realrun/step_clock.py)."""
    torch.set_flush_denormal(True)
    set_precision(payload["precision"])
    trainer = Trainer(payload["config"], Workload(**payload["workload"]), ctx, payload)
    return clocked_steps(trainer, ctx, payload["steps"], payload["warmup"])


def grid_config(s: ValidateSettings, strategy: str, bucket_mb: float | None) -> dict:
    """The configuration as bench ran it (realrun/configs.py: its Strategy, with its units
    if sharded); ValueError if the grid has no such row."""
    for config in s.configs():
        if (config["strategy"], config["bucket_mb"]) == (strategy, bucket_mb):
            return config
    raise ValueError(f"{strategy} at bucket_mb={bucket_mb!r} is not one of this "
                     "validation's configurations")


def measure_timeline(s: ValidateSettings, strategy: str, bucket_mb: float | None
                     ) -> tuple[Span, ...]:
    """Spans of one measured step (the median of ``timeline_steps`` by the slower rank), on
    the rank whose backward ended last, of the configuration of this validation's grid with
    that row name and bucket size."""
    return timeline_fields(s, strategy, bucket_mb).get("spans", ())


def timeline_fields(s: ValidateSettings, strategy: str, bucket_mb: float | None) -> dict:
    """The measured Result's timeline fields of that configuration: ``spans`` (as
    :func:`measure_timeline`), ``rank_spans`` (every rank's, same step) and ``spans_rank``;
    {} on a torchrun rank other than 0."""
    config = grid_config(s, strategy, bucket_mb)
    payload = {**bench_payload(s, []), "config": config, "steps": s.timeline_steps}
    ranks = run_world("realrun.workflows.validate.timeline:timeline_rank", payload,
                      threads_per_rank=s.threads, **s.world.launch_args())
    return {} if ranks is None else fields_on_ranks(ranks)
