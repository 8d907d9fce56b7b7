"""validate's measured timeline of one configuration, clocked on rank 0.

The rank target is ``realrun.validate.timeline:timeline_rank``.
"""
from __future__ import annotations

import torch

from realrun.launch import run_world
from realrun.precision import set_precision
from realrun.step_clock import median_step_spans
from realrun.steps import Trainer
from realrun.workload import Workload
from realrun.validate.settings import ValidateSettings, bench_payload
from simddp.result import Span

# ---------------------------------------------------------------------------------------------
# 5. measured timeline


def timeline_rank(payload: dict, ctx) -> dict:
    """Rank function: run one configuration; rank 0 clocks its spans (realrun/step_clock.py),
    the median-length of ``payload["steps"]`` steps after ``payload["warmup"]`` is kept."""
    torch.set_flush_denormal(True)
    set_precision(payload["precision"])
    trainer = Trainer(payload["config"], Workload(**payload["workload"]), ctx, payload)
    return median_step_spans(trainer, ctx, payload["steps"], payload["warmup"])


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
    """Spans of one measured step (the median of ``timeline_steps``) on rank 0, of the
    configuration of this validation's grid with that row name and bucket size."""
    config = grid_config(s, strategy, bucket_mb)
    payload = {**bench_payload(s, []), "config": config, "steps": s.timeline_steps}
    ranks = run_world("realrun.validate.timeline:timeline_rank", payload,
                      threads_per_rank=s.threads, **s.world.launch_args())
    return () if ranks is None else tuple(Span(*sp) for sp in ranks[0]["spans"])


