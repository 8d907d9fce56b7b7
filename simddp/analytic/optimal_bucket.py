"""The α–β closed form of bucketed overlap DDP: exposed overhead T(b) and the b* minimising it.

s gradient bytes appear evenly over the B seconds of backward; one comm lane drains full
buckets of b bytes in order, each all-reduce taking α + β·b (a curve link: the line fitted to
it, simddp/cost/fitted.py). What sticks out past the end of backward is::

    T(b) = max( α + β·b,                         # compute-bound: only the last bucket shows
                b·B/s + (s/b)·α + β·s − B )      # comm-bound: the lane never idles after bucket 1

T is convex: its minimum is b = s·√(α/B) when comm-bound, else the regions' boundary
α/(B/s − β), clamped to [smallest bucket, s] (derivation: docs/ACCOUNT.md, "The closed form:
optimal bucket size for bucketed overlap DDP")::

    >>> b, t = optimum(grad_bytes=4e8, backward_s=0.04, alpha_s=1e-4, beta_s_per_byte=1e-10)[:2]
    >>> round(b / 1e6, 3), round(t * 1e3, 3)     # comm-bound: b* = s·√(α/B) = 20 MB
    (20.0, 4.0)

The engine (``simddp sweep``) is the reference: it knows tensor granularity and uneven
layers. Under contention the same T(b) holds with B̃ = B·k_c/k_m, plus the slowed backward's
own B·(k_c − 1) (docs/ACCOUNT.md, "Under contention").
"""
from __future__ import annotations

import math

from simddp.inputs.contention import Contention
from simddp.errors import InputError
from simddp.cost.fitted import closed_form_law
from simddp.inputs.link import Link
from simddp.inputs.profile import ModelProfile
from simddp.planning.strategy import MB

COMM_BOUND, COMPUTE_BOUND, ONE_BUCKET = "comm-bound", "compute-bound", "one-bucket"
NO_LATENCY = "no-latency"      # α = 0: smaller buckets are never worse, there is no optimum
SMALLEST = "smallest-bucket"   # the optimum wants buckets below the smallest allowed size


def exposed_s(bucket_bytes: float, grad_bytes: float, backward_s: float, alpha_s: float,
              beta_s_per_byte: float) -> float:
    """T(b): seconds of all-reduce left after backward ends, for buckets of ``bucket_bytes``
    (n = s/b a real number, b clamped to (0, s])."""
    s, B = grad_bytes, backward_s
    b = min(bucket_bytes, s)
    if not b > 0:
        raise ValueError(f"bucket_bytes must be > 0, got {bucket_bytes!r}")
    last_bucket_s = alpha_s + beta_s_per_byte * b
    saturated_s = b * B / s + (s / b) * alpha_s + beta_s_per_byte * s - B
    return max(last_bucket_s, saturated_s)


def optimum(grad_bytes: float, backward_s: float, alpha_s: float, beta_s_per_byte: float,
            min_bucket_bytes: float = 1.0, max_bucket_bytes: float | None = None
            ) -> tuple[float, float, str]:
    """(b*, T(b*), regime) minimising :func:`exposed_s` over [min_bucket_bytes, max or s]."""
    s, B, a, beta = grad_bytes, backward_s, alpha_s, beta_s_per_byte
    hi = s if max_bucket_bytes is None else min(s, max_bucket_bytes)
    lo = min(max(min_bucket_bytes, 1e-12), hi)
    if B <= 0:      # nothing to overlap with: fewest calls win
        b, regime = hi, ONE_BUCKET
    else:
        slack_s_per_byte = B / s - beta          # backward seconds per byte left over by comm
        b = s * math.sqrt(a / B)                 # d/db [b·B/s + s·α/b] = 0
        regime = COMM_BOUND
        if slack_s_per_byte > 0 and a / slack_s_per_byte < b:
            b, regime = a / slack_s_per_byte, COMPUTE_BOUND   # the kink where the lane keeps pace
    if b >= hi:
        b, regime = hi, (ONE_BUCKET if hi >= s else regime)
    elif b <= lo:
        b, regime = lo, SMALLEST
    return b, exposed_s(b, s, B, a, beta), regime


def _check(profile: ModelProfile, world_size: int) -> None:
    if not isinstance(world_size, int) or world_size < 2:
        raise InputError(f"--world-size must be an integer >= 2 for a bucket optimum, "
                         f"got {world_size!r}")
    if profile.grad_total_bytes <= 0:
        raise InputError(f"model {profile.name!r} has no gradients to bucket")


def contended_backward_s(backward_s: float, contention: Contention | None) -> tuple[float, float]:
    """(B̃, the seconds the slowed backward adds): the module text's contended closed form."""
    if contention is None or not contention.active:
        return backward_s, 0.0
    return (backward_s * contention.compute / contention.comm,
            backward_s * (contention.compute - 1.0))


def overhead_s(profile: ModelProfile, link: Link, world_size: int, bucket_bytes: float,
               contention: Contention | None = None) -> float:
    """The closed form T(b) for ``profile`` (s = gradient bytes, B = backward seconds)."""
    _check(profile, world_size)
    b = min(bucket_bytes, profile.grad_total_bytes)
    _, _, alpha_s, beta = next(p for p in closed_form_law(link, world_size).segments
                               if b <= p[1])
    lane_backward_s, slowed_s = contended_backward_s(profile.backward_s, contention)
    return exposed_s(b, profile.grad_total_bytes, lane_backward_s, alpha_s, beta) + slowed_s


def optimal_bucket_bytes(profile: ModelProfile, link: Link, world_size: int,
                         contention: Contention | None = None) -> tuple[int, float]:
    """(bucket bytes, predicted exposed seconds) at the closed-form optimum for ``profile``."""
    b, t_s, _ = _optimum_for(profile, link, world_size, contention)
    return b, t_s


def _optimum_for(profile: ModelProfile, link: Link, world_size: int,
                 contention: Contention | None = None) -> tuple[int, float, str]:
    _check(profile, world_size)
    s, B = profile.grad_total_bytes, contended_backward_s(profile.backward_s, contention)[0]
    best = None
    # T is convex within each segment of a piecewise link: optimise each, keep the best.
    for lo, hi, alpha_s, beta in closed_form_law(link, world_size).segments:
        if lo >= s:
            break
        b, t_s, regime = optimum(s, B, alpha_s, beta,
                                 min_bucket_bytes=max(1.0, math.floor(lo) + 1),
                                 max_bucket_bytes=hi)
        if regime == SMALLEST and lo > 0:
            regime = "link-segment-edge"   # pinned to where the fit switches α and busbw
        if best is None or t_s < best[1]:
            best = (b, t_s, regime)
    b, _, regime = best
    b_int = max(1, min(s, round(b)))
    return b_int, overhead_s(profile, link, world_size, b_int, contention), regime


def closed_form_optimum(profile: ModelProfile, link: Link, world_size: int,
                        contention: Contention | None = None) -> dict:
    """The optimum as a sweep prints it: bucket in MiB, ms, regime; ``contention``: the one
    the simulated rows run under, so the two answer the same question.

    >>> from simddp.inputs.profile import Layer
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0, 1e-3) for i in range(100)))
    >>> closed_form_optimum(toy, Link("l", 1e-4, 10.0), 2)["regime"]
    'compute-bound'
    """
    b, t_s, regime = _optimum_for(profile, link, world_size, contention)
    line = closed_form_law(link, world_size)
    if all(alpha_s == 0 for _, _, alpha_s, _ in line.segments):
        regime = NO_LATENCY  # b* would be the 1-byte floor: a floor, not an answer
    note = "α–β closed form, gradients ready evenly over backward, no tensor granularity"
    out = {"bucket_mb": b / MB, "bucket_bytes": b, "overhead_ms": t_s * 1e3,
           "regime": regime, "buckets": profile.grad_total_bytes / b, "note": note}
    if contention is not None and contention.active:
        out["note"] += (f"; under the rows' contention (compute x{contention.compute:.2f}, "
                        f"collectives x{contention.comm:.2f})")
        out["contention"] = [contention.compute, contention.comm]
    if line.note:   # a curve link: which line it used (an α–β link's own needs no word)
        out.update(alpha_beta=line.note, alpha_us=line.alpha_s * 1e6,
                   busbw_gbps=line.busbw_gbps)
    return out


def format_optimum(opt: dict) -> str:
    """One line for a sweep table's footer."""
    law = f"α–β; {opt['alpha_beta']}" if opt.get("alpha_beta") else "α–β"
    if opt.get("contention"):
        law += ", contention x{:.2f} compute, x{:.2f} comm as the rows".format(*opt["contention"])
    if opt["regime"] == NO_LATENCY:
        return (f"closed-form optimum (bucketed, {law}): none — the link's α is 0, so per-call "
                "cost is nil and smaller buckets are never slower; the simulated rows decide")
    return (f"closed-form optimum (bucketed, {law}): {opt['bucket_mb']:.3g} MB buckets "
            f"(≈{opt['buckets']:.3g} of them), {opt['overhead_ms']:.3f} ms exposed, "
            f"{opt['regime']}")
