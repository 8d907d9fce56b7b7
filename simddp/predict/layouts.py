"""Bucket sizes that make the same buckets are one configuration, not two.

With 4 MiB gradient tensors, ``bucket_cap_mb`` 1 and 4 both put each tensor in a bucket of
its own (a tensor is never split, and a bucket closes once it reaches the cap): the same 8
collectives, the same plan. A prediction cannot tell them apart, and a measured difference
between them is noise, which a verdict would report as regret
(docs/FINDINGS.md#measurement-noise). The recommendation, the comparison and validate's
verdict group sizes by their plan's buckets (:func:`layout_key`) and treat each group as one
configuration::

    >>> from simddp import Layer, ModelProfile, make_strategy, Result
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (4 << 20,), 1e-3, 2e-3) for i in range(4)))
    >>> def r(mb):
    ...     return Result("toy", "l", "ddp", mb, 2, 0.01, 0.0, 4, spec=make_strategy("ddp", mb))
    >>> [[x.bucket_mb for x in g] for g in group_by_layout([r(1), r(4), r(8)], toy)]
    [[1, 4], [8]]

Without the profile (``simddp compare`` on two files), a predicted result's layout is
recognised by its prediction: the same strategy with the same number of collectives and
the same step time to the last bit in every input scenario. The simulator is deterministic,
so one plan gives one float; sizes it predicts identically it cannot rank either way.
"""
from __future__ import annotations

from collections.abc import Sequence

from simddp.planning.plans import plan
from simddp.inputs.profile import ModelProfile
from simddp.result import Result


def layout_key(result: Result, profile: ModelProfile | None = None) -> tuple:
    """What identifies ``result``'s configuration up to its bucket size: the strategy, its
    accumulation and its plan's buckets (tensor ids per collective, in launch order).
    Without ``profile``, a prediction's numbers stand in for the buckets, and a measured
    result without one is only itself (its bucket size)."""
    head = (result.strategy, result.accum_steps)
    if result.bucket_mb is None:
        return head
    if profile is not None and result.spec is not None:
        return head + ("buckets", tuple(plan(profile, result.spec).buckets))
    if result.source == "predicted":
        scenarios = tuple(sorted((result.scenarios_s or {}).items()))
        return head + ("prediction", result.collectives, result.step_s, scenarios)
    return head + ("bucket_mb", result.bucket_mb)


def group_by_layout(results: Sequence[Result], profile: ModelProfile | None = None,
                    keys: Sequence[tuple] | None = None) -> list[list[Result]]:
    """``results`` in groups of one layout each, in order of first appearance; ``keys``: one
    :func:`layout_key` per result when the caller has them (e.g. from the predictions)."""
    keys = list(keys) if keys is not None else [layout_key(r, profile) for r in results]
    groups: dict[tuple, list[Result]] = {}
    for key, r in zip(keys, results):
        groups.setdefault(key, []).append(r)
    return list(groups.values())


def sizes_text(bucket_mbs: Sequence[float]) -> str:
    """'1 and 4 MB', '1, 2 and 4 MB'.

    >>> sizes_text([4.0, 1.0]), sizes_text([1, 2, 4])
    ('1 and 4 MB', '1, 2 and 4 MB')
    """
    mbs = [f"{mb:g}" for mb in sorted(bucket_mbs)]
    return (", ".join(mbs[:-1]) + " and " + mbs[-1] if len(mbs) > 1 else mbs[0]) + " MB"
