"""Which bucket_cap_mb to set, and whether a strategy beyond plain DDP is worth it.

:func:`recommend` picks the bucket size of the knob users set, robust over the prediction
ranges, with the runner-up it beats; :func:`recommend_strategy` says whether sharding, a comm
hook or the hierarchical all-reduce beats the best plain configuration::

    >>> from simddp import build_profile, get_link, parse_model, sweep
    >>> profile = build_profile(parse_model("transformer-small"))
    >>> results = sweep(profile, get_link("eth-100g"), 2, ["naive", "ddp"], [10, 25, 100])
    >>> rec = recommend(results); rec.bucket_mb, rec.runner_up_mb
    (25.0, 10.0)

Both read measured Results too.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from simddp.inputs.profile import ModelProfile
from simddp.planning.registry import Name
from simddp.planning.strategy import DDP_DEFAULT_BUCKET_MB, Strategy
from simddp.predict.layouts import group_by_layout
from simddp.predict.scenarios import robust_pick
from simddp.predict.sweep import accumulates
from simddp.result import Result

# Whose bucket size is "the" recommendation: ddp's, the knob users set on torch DDP; the
# others stand in when ddp was not swept.
RECOMMEND_FROM = (Name.DDP, Name.BUCKETED, Name.NO_SYNC)


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

    With prediction ranges, the lowest worst-case regret. Ties go to the size closest to
    torch's default 25 MB, which a user need not change. Sizes that make the same buckets
    (by ``profile``'s plans, else by identical predictions) are one configuration.
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


# Predicted steps closer than this are one answer: no prediction tells them apart
# (docs/FINDINGS.md#measurement-noise).
NEAR_PCT = 1.0


@dataclass(frozen=True)
class Stakes:
    """What the bucket size decides: the swept sizes within NEAR_PCT of the recommended one,
    the worst swept size, and another strategy's row faster by more than NEAR_PCT."""

    near_mb: tuple[float, ...]          # ascending, the recommended size included
    near_pct: float                     # the largest excess among them, % of the step
    worst_mb: float | None              # None: no swept size outside the near ones
    worst_pct: float
    faster: Result | None = None
    swept_mb: tuple[float, ...] = ()    # every swept size of the recommended strategy

    @property
    def near_is_a_run(self) -> bool:
        """Whether the near sizes are consecutive among the swept ones (a range, no gap)."""
        i = [self.swept_mb.index(mb) for mb in self.near_mb if mb in self.swept_mb]
        return len(i) == len(self.near_mb) and (not i or i[-1] - i[0] == len(i) - 1)


def stakes(rec: Recommendation, results: Sequence[Result]) -> Stakes:
    """The :class:`Stakes` of ``rec`` over the swept ``results``.

        >>> rows = [Result("m", "l", "ddp", mb, 2, s, 0.0, 1) for mb, s in
        ...         ((1, 0.105), (10, 0.100), (100, 0.1004), (1000, 0.120))]
        >>> st = stakes(recommend(rows), rows)
        >>> st.near_mb, round(st.near_pct, 1), st.worst_mb, round(st.worst_pct, 1)
        ((10.0, 100.0), 0.4, 1000.0, 20.0)
    """
    mine = sorted((r for r in results if r.strategy == rec.strategy and r.bucket_mb is not None
                   and accumulates(r) == (rec.spec is not None and rec.spec.accumulates)),
                  key=lambda r: r.bucket_mb)
    excess = {r.bucket_mb: 100 * (r.step_s / rec.step_s - 1) for r in mine}
    near = tuple(float(mb) for mb, pct in excess.items() if pct < NEAR_PCT)
    far = {mb: pct for mb, pct in excess.items() if pct >= NEAR_PCT}
    worst = max(far, key=far.get, default=None)
    per_step = [r for r in results if not accumulates(r) and r.strategy != rec.strategy]
    best_other = min(per_step, key=lambda r: r.step_s, default=None)
    faster = (best_other if best_other is not None and rec.spec is not None
              and not rec.spec.accumulates
              and 100 * (1 - best_other.step_s / rec.step_s) >= NEAR_PCT else None)
    return Stakes(near, max((excess[mb] for mb in near), default=0.0),
                  None if worst is None else float(worst),
                  far.get(worst, 0.0), faster, tuple(float(mb) for mb in excess))


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
    """Whether sharding or a comm hook beats plain data parallelism, per step; None when the
    sweep had neither. Ties go to the plain configuration, then torch DDP's bucket rule, then
    the size closest to 25 MB."""
    per_step = [r for r in results if not accumulates(r)]
    beyond = [r for r in per_step if r.spec is not None and r.spec.beyond_ddp]
    if not beyond:
        return None
    plain = [r for r in per_step if r.spec is None or not r.spec.beyond_ddp]

    def key(r: Result) -> tuple:
        near_25 = 0.0 if r.bucket_mb is None else abs(math.log(r.bucket_mb / DDP_DEFAULT_BUCKET_MB))
        return r.step_s, r.spec is None or r.spec.base != Name.DDP, near_25

    return StrategyPick(min(beyond, key=key), min(plain, key=key, default=None))
