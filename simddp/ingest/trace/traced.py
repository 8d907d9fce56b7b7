"""The configuration the trace ran: which strategy and bucket size, and which gradients went
into each all-reduce, as a plan the engine can re-simulate.

    cfg = traced_config(profile, joint, implementation="torch", bucket_mb=None)
    cfg.strategy.name, cfg.strategy.bucket_mb, cfg.bucket_mb_range   # 'ddp', 0.25, (0.06, 0.25)
    cfg.plan          # the collectives exactly as traced, for the engine

Each gradient all-reduce of the trace is matched to the run of gradients (in ready order)
whose bytes add up to its size; torch DDP fills its buckets in the order gradients became
ready in the previous step, so its buckets are such runs. The bucket rule then pins the cap:
a bucket that closed holds at least the cap, and held less before its last tensor. The
largest round value (1, 2, 2.5, 5 × 10^k MB) inside that range is taken, unless
``bucket_mb`` says. Torch's buckets start with a 1 MiB first bucket (``ddp``) unless the
first one says otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simddp.errors import InputError
from simddp.planning.plans import Collective, Plan
from simddp.planning.plans import plan as make_plan
from simddp.inputs.profile import ModelProfile
from simddp.planning.registry import Name
from simddp.planning.strategy import DDP_DEFAULT_BUCKET_MB, MB, Strategy, make_strategy
from simddp.ingest.trace.collectives import JointStep

_ROUND_MB = sorted({round(m * 10.0 ** e, 6) for e in range(-3, 5) for m in (1, 2, 2.5, 5)})


@dataclass(frozen=True)
class TracedConfig:
    strategy: Strategy
    plan: Plan
    groups: tuple[tuple[int, ...], ...]          # tensor ids per all-reduce, launch order
    bucket_mb_range: tuple[float, float] | None  # (above, at most) the cap the trace allows
    rule_reproduces: bool     # simddp's bucket rule at that cap gives the traced buckets
    notes: tuple[str, ...]


def traced_config(profile: ModelProfile, joint: list[JointStep], implementation: str,
                  bucket_mb: float | None = None) -> TracedConfig:
    """The traced strategy and its plan; ``bucket_mb``: the cap the job used, if known."""
    step = joint[0].ranks[0]
    accum = step.accum_steps       # no_sync(): the last of K micro-steps syncs
    sizes = [c.nbytes for c in step.syncs]
    n = profile.n_tensors
    ready = list(range(n - 1, -1, -1))        # tensor ids in ready order
    runs = _runs([profile.tensor_bytes[t] for t in ready], sizes)
    notes: list[str] = []
    in_backward = [s.in_backward for s in joint[0].samples]
    if runs is None:
        notes.append("the all-reduce sizes are not runs of gradients in ready order; the "
                     "traced configuration is re-simulated with simddp's plan instead")
    groups = None if runs is None else [tuple(ready[i] for i in run) for run in runs]
    name, cap_range, first_mb = _strategy_name(implementation, groups, profile, in_backward)
    cap_mb = bucket_mb
    if cap_range is not None and cap_mb is None:
        cap_mb = _round_in(cap_range)
    elif cap_range is not None and not (cap_range[0] < cap_mb <= cap_range[1]):
        notes.append(f"--bucket-mb {cap_mb:g} does not give the traced buckets (they need a cap "
                     f"in ({cap_range[0]:.4g}, {cap_range[1]:.4g}] MB)")
    # the sizes matter to a bucketed strategy only (the others ignore them); no cap traced
    # or given: torch's default
    cap_mb = cap_mb or DDP_DEFAULT_BUCKET_MB
    if accum > 1:
        if name != Name.DDP:
            notes.append(f"{accum} micro-steps under no_sync(), read as torch DDP's no_sync "
                         "(simddp's accumulation runs torch DDP)")
        name = Name.NO_SYNC
    strategy = make_strategy(name, cap_mb, accum_steps=accum,
                             first_bucket_mb=first_mb or cap_mb)
    rule = make_plan(profile, strategy)
    reproduces = groups is not None and rule.buckets == groups
    if groups is None:
        groups = rule.buckets
    collectives = tuple(Collective(
        label=f"bucket{i}", tensor_ids=ids, nbytes=sum(profile.tensor_bytes[t] for t in ids),
        ready_layer=min(profile.tensor_layer[t] for t in ids) if strategy.overlap else 0,
        launch_index=i, micro_step=accum - 1) for i, ids in enumerate(groups))
    return TracedConfig(strategy, Plan(strategy, collectives, accum), tuple(groups), cap_range,
                        reproduces, tuple(notes))


def _runs(sizes: list[int], targets: list[int]) -> list[list[int]] | None:
    """Consecutive runs of ``sizes`` summing to each target in turn, or None."""
    runs, i = [], 0
    for target in targets:
        run, total = [], 0
        while i < len(sizes) and total < target:
            run.append(i)
            total += sizes[i]
            i += 1
        if total != target:
            return None
        runs.append(run)
    return runs if i == len(sizes) else None


def _strategy_name(implementation: str, groups, profile: ModelProfile, in_backward: list[bool]
                   ) -> tuple[str, tuple[float, float] | None, float | None]:
    """(strategy name, cap range in MB, first bucket MB: None = the cap) the buckets fit."""
    overlap = any(in_backward[:-1]) if len(in_backward) > 1 else any(in_backward)
    name = Name.DDP if implementation == "torch" else Name.BUCKETED
    if groups is None:
        return name, None, None
    if implementation != "torch":
        if len(groups) == 1 and len(groups[0]) > 1 and not overlap:
            return Name.FLAT, None, None
        if all(len(g) == 1 for g in groups):
            return (Name.OVERLAP if overlap else Name.NAIVE), None, None
    size = [sum(profile.tensor_bytes[t] for t in g) / MB for g in groups]
    above = [s - profile.tensor_bytes[g[-1]] / MB for s, g in zip(size, groups)]
    # torch DDP's first bucket closes at 1 MiB (bucket_cap_mb_list=[1, X], or the default
    # cap); with a plain bucket_cap_mb=X in torch 2.x it closes at the cap like the others.
    first_mb = 1.0 if implementation == "torch" and (
        above[0] < 1.0 <= size[0] or (len(groups) == 1 and size[0] < 1.0)) else None
    lo, hi = 0.0, math.inf
    for i in range(len(groups)):
        if i == 0 and first_mb is not None:
            continue                            # its own limit, not the cap
        lo = max(lo, above[i])                  # not closed before its last tensor
        if i < len(groups) - 1:
            hi = min(hi, size[i])               # closed once it reached the cap
    if lo >= hi:
        raise InputError(f"no bucket cap gives the traced buckets ({len(groups)} all-reduces "
                         f"of {', '.join(f'{s:.3g}' for s in size[:6])} MB ...)")
    return name, (lo, hi), first_mb


def _round_in(cap_range: tuple[float, float]) -> float:
    """The largest round MB value in (lo, hi]; torch's default 25 if the range is open."""
    lo, hi = cap_range
    if math.isinf(hi):
        return DDP_DEFAULT_BUCKET_MB if lo < DDP_DEFAULT_BUCKET_MB else next(m for m in _ROUND_MB if m > lo)
    inside = [m for m in _ROUND_MB if lo < m <= hi]
    return inside[-1] if inside else hi
