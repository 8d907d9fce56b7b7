"""A sweep: every strategy at every bucket size, one :class:`Result` each, and the verdict.

Each strategy's step time at each bucket size::

    >>> from simddp import build_profile, get_link, parse_model
    >>> profile = build_profile(parse_model("transformer-small"))
    >>> results = sweep(profile, get_link("eth-100g"), 2, ["naive", "ddp"], [10, 25, 100])
    >>> [(r.strategy, r.bucket_mb) for r in results]
    [('naive', None), ('ddp', 10.0), ('ddp', 25.0), ('ddp', 100.0)]

Strategies without buckets are simulated once; comm hooks add a row per hookable strategy
and size ("ddp+fp16"); ``no_sync`` always comes with its baseline ``sync_each``, both per
optimizer step. :func:`sweep_strategies` is the list, so ``realrun validate`` measures
exactly what was predicted.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from simddp.errors import InputError
from simddp.inputs.host import Host
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.inputs.profile import ModelProfile
from simddp.inputs.resolved import Inputs
from simddp.predict.predictor import Predictor
from simddp.predict.resolve import resolve
from simddp.predict.scenarios import scenario_set
from simddp.result import Result
from simddp.planning.grad_dtype import with_grad_dtype
from simddp.planning.hooks import CommHook, parse_comm_hook
from simddp.planning.registry import ROW, Name
from simddp.planning.strategy import (ACCUM_BASELINE, BUCKETED, HOOKABLE, MB,
                             HYBRID, SHARDED, SWEEPABLE, Strategy, make_strategy, mb_to_bytes,
                             with_precision)
from simddp.inputs.topology import Topology

# 1-2-5 steps over three decades, plus torch's default 25: every preset's optimum lies inside.
DEFAULT_BUCKET_MB = (1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
DEFAULT_ACCUM_STEPS = 4


def sweep_strategies(strategies: Sequence[str], bucket_mbs: Sequence[float],
                     accum_steps: int = DEFAULT_ACCUM_STEPS,
                     comm_hooks: Sequence[str | CommHook] = (),
                     shard_unit_mb: float | None = None) -> list[Strategy]:
    """The configurations a sweep covers, in table order; all input checked before any run.
    ``comm_hooks`` add each hookable strategy's rows again with each hook."""
    if isinstance(accum_steps, bool) or not isinstance(accum_steps, int) or accum_steps < 1:
        raise InputError(f"--accum-steps must be an integer >= 1, got {accum_steps!r}")
    for name in strategies:
        if name not in SWEEPABLE:
            raise InputError(f"unknown strategy {name!r}; choose from {', '.join(SWEEPABLE)}")
    mbs = sorted({float(mb) for mb in bucket_mbs}) if bucket_mbs else []
    for mb in mbs:
        if not (math.isfinite(mb) and mb > 0 and math.isfinite(mb * MB)):
            raise InputError(f"--bucket-mb: {mb!r} is not a finite number > 0 (MB, e.g. 25)")
    if any(name in BUCKETED for name in strategies) and not mbs:
        raise InputError("--bucket-mb: no bucket sizes given (e.g. 1,10,100)")
    hooks = [h if isinstance(h, CommHook) else parse_comm_hook(h) for h in comm_hooks]
    if hooks and not any(name in HOOKABLE for name in strategies):
        raise InputError(f"--comm-hook {hooks[0].name}: works with {' and '.join(HOOKABLE)} "
                         f"(torch DDP buckets); none of them is in --strategies")
    if shard_unit_mb is not None:
        mb_to_bytes(shard_unit_mb, "--shard-unit-mb")
        if not any(name in SHARDED + HYBRID for name in strategies):
            raise InputError(f"--shard-unit-mb: no sharded strategy ({', '.join(SHARDED)}) "
                             "in --strategies")
    out: list[Strategy] = []
    for name in (s for s in SWEEPABLE if s in strategies):  # the registry's order, once each
        if name in SHARDED + HYBRID:
            out.append(make_strategy(name, accum_steps=1, shard_unit_mb=shard_unit_mb))
        elif name not in BUCKETED:
            out.append(make_strategy(name))
        elif ROW[name].sync_last_only:   # no_sync, each size after its baseline
            for mb in mbs:
                out.append(make_strategy(ACCUM_BASELINE, mb, accum_steps))
                out.append(make_strategy(name, mb, accum_steps))
        else:
            out.extend(make_strategy(name, mb) for mb in mbs)
            for hook in (hooks if name in HOOKABLE else ()):
                out.extend(make_strategy(name, mb, comm_hook=hook) for mb in mbs)
    return out


def sweep(profile: ModelProfile, link: Link | LinkFile, world_size: int,
          strategies: Sequence[str], bucket_mbs: Sequence[float] = DEFAULT_BUCKET_MB,
          accum_steps: int = DEFAULT_ACCUM_STEPS, *, host: Host | None = None,
          on_progress: Callable[[int, int], None] | None = None,
          record: bool = False, stats: dict | None = None,
          ranges: bool = False, comm_hooks: Sequence[str | CommHook] = (),
          shard_unit_mb: float | None = None, topology: Topology | None = None,
          device: str | None = None, precision: str = "fp32",
          cast_gbps: float | None = None, contention=None,
          grad_dtype: str | None = None) -> list[Result]:
    """Predict every configuration of :func:`sweep_strategies` on inputs resolved as every
    command resolves them (:func:`simddp.predict.resolve.resolve`), then
    :func:`sweep_inputs`. ``device``: what the compute runs on, where not the profile's own;
    ``precision`` and ``grad_dtype``: as the commands' flags."""
    configs = configurations(strategies, bucket_mbs, accum_steps, comm_hooks, shard_unit_mb,
                             precision, cast_gbps, grad_dtype)
    as_link_file(link).link.for_world(world_size, rescale=True)  # an integer >= 2
    if device is not None:
        profile = replace(profile, device=device)
    point = resolve(profile, link, world_size, host=host, topology=topology,
                    contention=contention)
    return sweep_inputs(point, configs, ranges=ranges, record=record, stats=stats,
                        on_progress=on_progress)


def configurations(strategies: Sequence[str], bucket_mbs: Sequence[float],
                   accum_steps: int = DEFAULT_ACCUM_STEPS, comm_hooks: Sequence = (),
                   shard_unit_mb: float | None = None, precision: str = "fp32",
                   cast_gbps: float | None = None, grad_dtype: str | None = None
                   ) -> list[Strategy]:
    """:func:`sweep_strategies` as a run at ``precision`` runs them, reducing gradients in
    ``grad_dtype`` (None or fp32: as torch DDP under autocast)."""
    return [with_grad_dtype(with_precision(c, precision, cast_gbps), grad_dtype) for c in
            sweep_strategies(strategies, bucket_mbs, accum_steps, comm_hooks, shard_unit_mb)]


def sweep_inputs(point: Inputs, configs: Sequence[Strategy], *, ranges: bool = False,
                 record: bool = False, stats: dict | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> list[Result]:
    """One Result per configuration on resolved inputs; ``ranges``: also each input scenario;
    ``record`` keeps the spans; ``stats`` gets ``events`` and the ``work`` done."""
    predictor = Predictor(scenario_set(point, ranges), record=record, stats=stats)
    results = []
    for i, strategy in enumerate(configs):
        results.append(predictor.predict(strategy))
        if on_progress is not None:
            on_progress(i + 1, len(configs))
    if stats is not None:
        stats["work"] = dict(predictor.work)
    return results


def accumulates(result: Result) -> bool:
    """Whether a row is per optimizer step of K micro-steps (no_sync, sync_each), not per step."""
    return result.spec is not None and result.spec.accumulates


def baseline_name(result: Result) -> str:
    """What a row's speedup is measured against: naive per step; sync_each per optimizer step."""
    return ACCUM_BASELINE if accumulates(result) else Name.NAIVE


def naive_of(results: Sequence[Result]) -> Result | None:
    """The naive row, what per-step speedups are measured against; None if not swept."""
    return next((r for r in results if r.spec is not None and r.spec.is_baseline
                 and not r.spec.accumulates), None)


def speedups(results: Sequence[Result], naive: Result | None = None) -> list[float | None]:
    """Each result's speedup vs its baseline (naive, or sync_each at the same bucket size)."""
    naive = naive or naive_of(results)
    sync_each = {r.bucket_mb: r for r in results if accumulates(r) and r.spec.is_baseline}
    out = []
    for r in results:
        base = sync_each.get(r.bucket_mb) if accumulates(r) else naive
        out.append(base.step_s / r.step_s if base is not None and r.step_s > 0 else None)
    return out


def sweep_rows(results: Sequence[Result], naive: Result | None = None) -> list[dict]:
    """One plain dict per result, ms on the outside: what --format json and sweep.csv carry."""
    rows = []
    for r, x in zip(results, speedups(results, naive)):
        row = {"strategy": r.strategy,
               "bucket_mb": None if r.bucket_mb is None else round(r.bucket_mb, 6),
               "accum_steps": r.accum_steps, "collectives": r.collectives,
               "step_ms": r.step_s * 1e3, "exposed_comm_ms": r.exposed_comm_s * 1e3,
               "compute_ms": r.compute_s * 1e3,
               "speedup": x, "speedup_vs": baseline_name(r), "source": r.source}
        if r.step_range_s is not None:
            row["step_ms_range"] = [v * 1e3 for v in r.step_range_s]
        if r.step_p5_s is not None or r.step_p95_s is not None:
            row["step_p5_ms"] = None if r.step_p5_s is None else r.step_p5_s * 1e3
            row["step_p95_ms"] = None if r.step_p95_s is None else r.step_p95_s * 1e3
        rows.append(row)
    return rows
