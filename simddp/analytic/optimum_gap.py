"""Why the closed-form optimal bucket and the simulator's best bucket disagree, when they do.

The closed form (:mod:`simddp.analytic.optimal_bucket`) assumes gradient bytes appear evenly
over the backward, in buckets of any size, with nothing but α, β and the rows' contention to
pay. The simulator knows the real tensors, the order they are ready in and the host costs. When
the two optima differ by more than the sweep's grid can explain, the reasons are among::

    >>> from simddp import Layer, Link, ModelProfile
    >>> from simddp.inputs.resolved import Inputs
    >>> lumpy = ModelProfile("lumpy", (Layer("emb", (64 * 2**20,), 0, 1e-3),
    ...                                Layer("l1", (2**20,), 0, 20e-3)))
    >>> inputs = Inputs(lumpy, Link("l", 1e-4, 10.0), 2)
    >>> reasons(inputs, {"bucket_bytes": 8 * 2**20, "buckets": 8.1})[0]
    'tensors are never split: the largest gradient is 64 MB, the closed form wants 8 MB buckets'
"""
from __future__ import annotations

from simddp.inputs.profile import ModelProfile
from simddp.inputs.resolved import Inputs
from simddp.result import Result
from simddp.planning.strategy import MB, Strategy

# The sweep's default grid steps by 2-2.5x (1-2-5): a closer pair of optima is the same one.
GRID_FACTOR = 2.5
# Exposed times agreeing within 10 % (or 0.05 ms) need no explanation.
REL_TOL, ABS_TOL_MS = 0.10, 0.05
# Readiness counts as uneven when the bytes ready by some point of the backward are off the
# even ("diagonal") share by more than this fraction of all bytes.
UNEVEN = 0.25


def differs(opt: dict, best: Result) -> bool:
    """Do the closed form's optimum ``opt`` and the simulator's best bucketed row disagree?"""
    ratio = best.bucket_mb / opt["bucket_mb"]
    exposed_ms = best.exposed_comm_s * 1e3
    gap_ms = abs(exposed_ms - opt["overhead_ms"])
    return (not 1 / GRID_FACTOR <= ratio <= GRID_FACTOR
            or gap_ms > REL_TOL * max(exposed_ms, opt["overhead_ms"]) + ABS_TOL_MS)


def uneven_readiness(profile: ModelProfile) -> float:
    """Largest gap, as a fraction of all bytes, between the bytes ready by each layer's
    backward end and an even spread over the backward (0: perfectly even)."""
    total_b = profile.grad_total_bytes
    total_s = profile.backward_s
    if total_b <= 0 or total_s <= 0:
        return 0.0
    ready_b = done_s = worst = 0.0
    for layer in reversed(profile.layers):  # backward runs last layer first
        done_s += layer.backward_s
        ready_b += sum(layer.grad_bytes)
        worst = max(worst, abs(ready_b / total_b - done_s / total_s))
    return worst


def reasons(inputs: Inputs, opt: dict) -> list[str]:
    """What the closed form leaves out that matters for these inputs: the profile, the host
    costs and the contention the rows were predicted under."""
    profile, host = inputs.profile, inputs.host
    out = []
    largest = max(profile.tensor_bytes, default=0)
    if largest >= opt["bucket_bytes"]:
        out.append(f"tensors are never split: the largest gradient is {largest / MB:.3g} MB, "
                   f"the closed form wants {opt['bucket_bytes'] / MB:.3g} MB buckets")
    elif profile.n_tensors < 2 * opt["buckets"]:
        out.append(f"the model has {profile.n_tensors} gradient tensors, too few to fill the "
                   f"≈{opt['buckets']:.3g} even buckets the closed form assumes")
    skew = uneven_readiness(profile)
    if skew > UNEVEN:
        out.append(f"gradients are not ready evenly over the backward (up to {skew:.0%} of "
                   "the bytes off an even spread): the closed form assumes they are")
    if host is not None and not host.free:
        out.append("the DDP implementation's host costs (hooks, gradient copies) are not in "
                   "the closed form")
    if inputs.effects is not None:
        out.append("the CPU host's effects on Gloo (blocking α, token bucket, wake) are not in "
                   "the closed form")
    if not out:
        out.append("the closed form's continuous bucket count and first-bucket-free schedule "
                   "are approximations; the simulator is the reference")
    return out


def _closed_form_like(spec: Strategy | None) -> bool:
    """bucketed: realrun's wrapper, one ring, the first bucket as large as the others, as the
    closed form assumes (ddp's small first bucket, hooks and two levels are not in it)."""
    return (spec is not None and spec.granularity == "bucket" and spec.implementation == "realrun"
            and spec.algorithm == "ring" and spec.first_bucket_bytes == spec.bucket_bytes)


def gap_line(inputs: Inputs, opt: dict, results: list[Result]) -> str | None:
    """One line for the sweep when the optima disagree, saying why; None when they agree."""
    rows = [r for r in results if r.bucket_mb is not None and _closed_form_like(r.spec)]
    if not rows or opt.get("regime") == "no-latency":  # no closed-form optimum to differ from
        return None
    best = min(rows, key=lambda r: r.step_s)
    if not differs(opt, best):
        return None
    exposed_ms = best.exposed_comm_s * 1e3
    if 1 / GRID_FACTOR <= best.bucket_mb / opt["bucket_mb"] <= GRID_FACTOR:  # one size
        what = (f"The simulator's best bucketed size, {best.bucket_mb:.3g} MB, is the closed "
                f"form's, but its exposed time differs ({exposed_ms:.2f} against "
                f"{opt['overhead_ms']:.2f} ms)")
    else:
        what = (f"The simulator's best bucketed size, {best.bucket_mb:.3g} MB "
                f"({exposed_ms:.2f} ms exposed), differs from the closed form's")
    return what + " because " + "; ".join(reasons(inputs, opt)) + "."
