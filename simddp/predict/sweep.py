"""A sweep: every strategy at every bucket size, one :class:`Result` each, and the verdict.

Picture the table a user wants before touching ``bucket_cap_mb``: each strategy's step time
at each bucket size, and which size wins by how much::

    >>> from simddp import build_profile, get_link, parse_model
    >>> profile = build_profile(parse_model("transformer-small"))
    >>> results = sweep(profile, get_link("eth-100g"), 2, ["naive", "ddp"], [10, 25, 100])
    >>> [(r.strategy, r.bucket_mb) for r in results]
    [('naive', None), ('ddp', 10.0), ('ddp', 25.0), ('ddp', 100.0)]
    >>> recommend(results).bucket_mb
    25.0

Strategies without buckets (naive, flat, overlap, fsdp, zero2) do not depend on the bucket
size and are simulated once; comm hooks (``comm_hooks=["fp16"]``) add a row per hookable
strategy (ddp, bucketed) and bucket size, named "ddp+fp16". ``no_sync`` (K micro-steps, only the last synced) always comes with its
baseline ``sync_each`` (the same K micro-steps, DDP-synced every time), both per optimizer
step. :func:`sweep_strategies` is the list of configurations, so ``realrun validate`` can
measure exactly what was predicted; :func:`recommend`, :func:`recommend_strategy` and
:func:`sweep_rows` read measured Results too.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simddp.errors import InputError
from simddp.inputs.host import Host
from simddp.predict.layouts import group_by_layout
from simddp.inputs.link import Link
from simddp.predict.predictor import Predictor
from simddp.inputs.profile import ModelProfile
from simddp.predict.scenarios import robust_pick
from simddp.result import Result
from simddp.planning.hooks import CommHook, parse_comm_hook
from simddp.planning.registry import ROW, Name
from simddp.planning.strategy import (ACCUM_BASELINE, BUCKETED, DDP_DEFAULT_BUCKET_MB, HOOKABLE, MB,
                             SHARDED, SWEEPABLE, Strategy, make_strategy, mb_to_bytes,
                             with_precision)
from simddp.inputs.topology import Topology

# 1-2-5 steps over three decades, plus torch's default 25: the optimum of every preset on every
# link preset lies inside, and a 2.5× grid pins it to within ~10% of the step.
DEFAULT_BUCKET_MB = (1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
DEFAULT_ACCUM_STEPS = 4
# Which strategy's bucket size is "the" recommendation: ddp's, since bucket_cap_mb is the knob
# users set on torch DDP; bucketed (no small first bucket), then no_sync, stand in when ddp was
# not swept.
RECOMMEND_FROM = (Name.DDP, Name.BUCKETED, Name.NO_SYNC)


def sweep_strategies(strategies: Sequence[str], bucket_mbs: Sequence[float],
                     accum_steps: int = DEFAULT_ACCUM_STEPS,
                     comm_hooks: Sequence[str | CommHook] = (),
                     shard_unit_mb: float | None = None) -> list[Strategy]:
    """The configurations a sweep covers, in table order; all input checked before any run.

    ``comm_hooks`` add, after each hookable strategy's rows, the same rows with each hook;
    ``shard_unit_mb`` groups layers into FSDP units of at least that many MB (None: one each).
    """
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
        if not any(name in SHARDED for name in strategies):
            raise InputError(f"--shard-unit-mb: no sharded strategy ({', '.join(SHARDED)}) "
                             "in --strategies")
    out: list[Strategy] = []
    for name in (s for s in SWEEPABLE if s in strategies):  # the registry's order, once each
        if name in SHARDED:
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


def sweep(profile: ModelProfile, link: Link, world_size: int, strategies: Sequence[str],
          bucket_mbs: Sequence[float] = DEFAULT_BUCKET_MB,
          accum_steps: int = DEFAULT_ACCUM_STEPS, *, host: Host | None = None,
          on_progress: Callable[[int, int], None] | None = None,
          record: bool = False, stats: dict | None = None,
          ranges: bool = False, comm_hooks: Sequence[str | CommHook] = (),
          shard_unit_mb: float | None = None, topology: Topology | None = None,
          device: str | None = None, precision: str = "fp32",
          cast_gbps: float | None = None) -> list[Result]:
    """Predict every configuration of :func:`sweep_strategies`; ``record`` keeps the spans;
    ``host``: the DDP implementations' host costs (None: free); ``ranges``: also each input
    scenario (simddp/predict/scenarios.py), for ``Result.step_range_s``; ``topology``: a two-level
    cluster (simddp/inputs/topology.py); ``device``: what the compute runs on (a device preset such
    as "a100", or a torch device such as "cuda:0"): on a GPU, contention nobody measured is
    the published GPU one (simddp/inputs/contention.py ``default_contention``), elsewhere none;
    ``precision``: as realrun's ``--precision`` (bf16: fsdp and zero2 under FSDP2's mixed
    precision, their casts timed at ``cast_gbps``, :func:`simddp.planning.sharding.cast_rate`).
    Each engine run is done once per sweep (simddp/predict/predictor.py); ``stats`` gets ``events``
    and the ``work`` done."""
    configs = [with_precision(c, precision, cast_gbps) for c in
               sweep_strategies(strategies, bucket_mbs, accum_steps, comm_hooks, shard_unit_mb)]
    link.for_world(world_size, rescale=True)  # world_size itself must be an integer >= 2
    predictor = Predictor(profile, link, world_size, host, ranges=ranges, record=record,
                          stats=stats, topology=topology, device=device)
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


@dataclass(frozen=True)
class Recommendation:
    """The bucket size to set, the runner-up it beats, and the fastest configuration overall."""

    strategy: str                 # whose bucket size is recommended: "ddp" (or "bucketed")
    bucket_mb: float
    step_s: float
    runner_up_mb: float | None    # None when only one bucket size was swept
    runner_up_step_s: float | None
    edge: str | None              # "smallest"/"largest" when the best is at the swept range's end
    fastest: Result | None        # over the per-step strategies; None if only accumulation
    step_range_s: tuple[float, float] | None = None  # the recommended row's prediction range
    # With ranges: the recommended size's worst-case regret over the scenarios, and, when the
    # lowest point estimate is another size, that size and its worst-case regret.
    worst_regret: float | None = None
    point_best_mb: float | None = None
    point_best_worst_regret: float | None = None
    # The other swept sizes that make the same buckets as bucket_mb (simddp/predict/layouts.py):
    # one configuration, so none of them is the runner-up.
    same_layout_mb: tuple[float, ...] = ()
    spec: Strategy | None = None  # the recommended row's configuration (its Result's spec)

    @property
    def margin_s(self) -> float | None:
        return None if self.runner_up_step_s is None else self.runner_up_step_s - self.step_s


def recommend(results: Sequence[Result], profile: ModelProfile | None = None
              ) -> Recommendation | None:
    """The bucket_cap_mb minimising ddp's step (else bucketed's, else no_sync's); None if none.

    With prediction ranges, the size with the lowest worst-case regret over them (a robust
    choice; ``point_best_mb`` names the lowest point estimate when that is another size).
    Ties (comm fully hidden at several sizes) go to the size closest to torch's default 25 MB,
    the one a user need not change. Sizes that make the same buckets are one configuration
    (``profile``: by the plan's buckets; without, by identical predictions): the runner-up
    is another layout, and ``same_layout_mb`` names the recommended one's other sizes.
    """
    per_step = [r for r in results if not accumulates(r)]
    for name in RECOMMEND_FROM:
        rows = [r for r in results if r.strategy == name and r.bucket_mb is not None]
        if rows:
            break
    else:
        return None
    rows.sort(key=lambda r: (r.step_s, abs(math.log(r.bucket_mb / DDP_DEFAULT_BUCKET_MB))))
    groups = group_by_layout(rows, profile)   # each group's first row is its best by the key
    firsts = [g[0] for g in groups]
    i, regrets = robust_pick([(r.step_s, r.scenarios_s) for r in firsts])
    best = firsts[i]
    same = tuple(sorted(r.bucket_mb for r in groups[i] if r is not best))
    worst = point_best_mb = point_worst = None
    if regrets is not None:
        worst = regrets[i]
        if i != 0:
            point_best_mb, point_worst = firsts[0].bucket_mb, regrets[0]
    runner = next((r for r in firsts if r is not best), None)
    sizes = sorted(r.bucket_mb for r in rows)
    edge = None
    if runner is not None and runner.step_s > best.step_s:  # a strict optimum at an end
        mine = {best.bucket_mb, *same}
        edge = "smallest" if sizes[0] in mine else "largest" if sizes[-1] in mine else None
    # Fastest overall; on a tie the recommended configuration itself (bucketed and ddp coincide
    # whenever the first bucket is no smaller than the cap would make it).
    fastest = min(per_step, key=lambda r: (r.step_s, r is not best,
                                           r.spec is None or r.spec.base != Name.DDP),
                  default=None)
    return Recommendation(name, best.bucket_mb, best.step_s,
                          runner.bucket_mb if runner else None,
                          runner.step_s if runner else None, edge, fastest,
                          best.step_range_s, worst, point_best_mb, point_worst, same, best.spec)


@dataclass(frozen=True)
class StrategyPick:
    """The fastest sharded or hooked configuration, against the fastest plain one (ddp,
    bucketed, overlap, …; None when the sweep had none). ``faster``: whether to switch."""

    best: Result
    versus: Result | None

    @property
    def faster(self) -> bool:
        return self.versus is None or self.best.step_s < self.versus.step_s

    @property
    def gain(self) -> float | None:
        """The share of the plain configuration's step the pick saves (0.12: 12 % less time;
        negative when it is slower)."""
        if self.versus is None or self.versus.step_s <= 0:
            return None
        return 1.0 - self.best.step_s / self.versus.step_s


def recommend_strategy(results: Sequence[Result]) -> StrategyPick | None:
    """Whether sharding (fsdp, zero2) or a comm hook beats plain data parallelism, per step;
    None when the sweep had neither. Ties go to the plain configuration (less to change),
    then to torch DDP's bucket rule, then to the size closest to torch's default 25 MB."""
    per_step = [r for r in results if not accumulates(r)]
    beyond = [r for r in per_step if r.spec is not None and r.spec.beyond_ddp]
    if not beyond:
        return None
    plain = [r for r in per_step if r.spec is None or not r.spec.beyond_ddp]

    def key(r: Result) -> tuple:
        near_25 = 0.0 if r.bucket_mb is None else abs(math.log(r.bucket_mb / DDP_DEFAULT_BUCKET_MB))
        return r.step_s, r.spec is None or r.spec.base != Name.DDP, near_25

    return StrategyPick(min(beyond, key=key), min(plain, key=key, default=None))


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
