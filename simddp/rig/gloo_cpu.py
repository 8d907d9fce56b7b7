"""What one kind of host does to a collective beyond the law: optional effects, one hook.

The law (:mod:`simddp.cost.single`) is the network and the collective library. A link file
written by ``python -m calibrate`` on this project's CPU boxes may also carry what those hosts
do on top, each field optional and absent from every preset:

- ``burst_bytes`` (+ ``blocking_refill_s``): Linux tbf's token bucket on an emulated link
  (:class:`TokenBucket`);
- ``idle_wake_s``: Gloo's threads waking after compute (:func:`idle_wake_s`);
- a model's contention split into α and bytes parts (:func:`split_contention`).

The engine applies them at one place, :func:`box_effects`, for a plan on one link; with none
of those fields (presets, nccl-tests curves) the collectives run at the law's seconds.
"""
from __future__ import annotations

from dataclasses import dataclass

from simddp.inputs.contention import Contention, split_comm
from simddp.inputs.host import HostCosts
from simddp.sim.comm import alpha_part_s, issued_blocking, stream_parts_s
from simddp.cost.single import pick_curves
from simddp.inputs.link import Link
from simddp.planning.plans import Plan
from simddp.inputs.profile import ModelProfile


@dataclass(frozen=True)
class BoxEffects:
    """What the engine applies on top of the law's seconds: the contention it runs under,
    each collective's slowdown under it (None: one factor for all), the link's token bucket
    (None: a wire) and the wake a micro-step's first collective after compute pays."""

    contention: Contention
    slowdowns: list[float] | None = None
    bucket: "TokenBucket | None" = None
    wake_s: float = 0.0


def box_effects(profile: ModelProfile, link: Link, plan: Plan, world_size: int,
                costs: HostCosts, comm_s: list[float], contention: Contention,
                two_level: bool = False) -> BoxEffects:
    """The one hook: what ``link``'s host fields do to this plan's collectives (``comm_s``:
    their seconds by the law). Two levels take the wake only (the split and the bucket
    were measured on one link)."""
    if two_level:
        return BoxEffects(contention, wake_s=idle_wake_s(link))
    contention, slowdowns, bucket = comm_effects(profile, link, plan, world_size, costs,
                                                 comm_s, contention)
    return BoxEffects(contention, slowdowns, bucket, idle_wake_s(link))


def split_contention(contention: Contention, profile: ModelProfile, link: Link,
                     world_size: int) -> Contention:
    """``contention`` with the model's comm factor split into α and bytes parts by the
    link's measured factor and the model's stream (:func:`simddp.inputs.contention.split_comm`);
    unchanged where that cannot be told."""
    if contention.source != "model":
        return contention
    bytes_factor = link.comm_slowdown if link.contention.measured else None
    return split_comm(contention, bytes_factor, *stream_parts_s(profile, link, world_size))


def comm_slowdowns(contention: Contention, comm_s: list[float], alpha_s: list[float]
                   ) -> list[float] | None:
    """Each collective's slowdown while compute runs: its α part at ``contention.comm`` and
    the rest at ``contention.comm_bytes``, weighted by seconds; None when not split (every
    collective at ``contention.comm``)::

        >>> split = Contention(1.5, 3.0, source="model", comm_bytes=1.0)
        >>> comm_slowdowns(split, [0.002, 0.004], [0.001, 0.001])     # 1 + 1 ms, 1 + 3 ms
        [2.0, 1.5]
    """
    if contention.comm_bytes is None:
        return None
    c_alpha, c_bytes = contention.comm, contention.comm_bytes
    return [(c_alpha * min(a, t) + c_bytes * (t - min(a, t))) / t if t > 0 else c_alpha
            for t, a in zip(comm_s, alpha_s)]


class TokenBucket:
    """A shaped link's token bucket, in seconds of the link's rate: a collective's bytes go
    unshaped (at memory speed) as far as the tokens last, the rest at busbw.

    Why: Linux tbf, which realrun's emulated hosts shape with, lets ``burst`` bytes pass at
    once after an idle stretch (1 ms of traffic: 250 kB at 2 Gbit/s). On the emulated 2 Gbit/s
    link, 32 waited-for all-reduces of 4, 64 and 256 KiB each cost 2.70, 2.52 and 2.76 ms a
    call, where the wire alone needs 1.05 ms for 256 KiB; the transformer's naive step was
    predicted +6…+33 % over six grids, about the ~36 ms of its bytes a full bucket serves
    (docs/FINDINGS.md#token-bucket).

    Tokens refill while the link idles: between collectives, and during the α of one that was
    waited for (the hand-off sends nothing; by the part of α the bucket keeps,
    :func:`refill_share`). A queued collective's α is not counted as idle:
    the next one is already waiting: Gloo's two workers run one's α while the previous one's
    bytes are on the wire (a queue of 512 KiB all-reduces at 2 Gbit/s completes every 2.23 ms,
    the wire's 2.19, with one worker 2.8-3.6; docs/FINDINGS.md#small-collective-queues).
    The bucket is full when the step starts (the forward sends nothing)::

        >>> b = TokenBucket(burst_s=0.001, refill_s=[0.0005, 0.0005], bytes_s=[0.002, 0.0002])
        >>> round(b.unshaped_s(0, 0.0), 6)        # 1 ms of the 2 ms of bytes: the bucket
        0.001
        >>> b.done(0.0015); round(b.unshaped_s(1, 0.0015), 6)   # refilled 0.5 ms by then
        0.0002
    """

    def __init__(self, burst_s: float, refill_s: list[float], bytes_s: list[float],
                 in_fit: list[bool] | None = None) -> None:
        self.burst_s, self.refill_s, self.bytes_s = burst_s, refill_s, bytes_s
        self.in_fit = in_fit or [False] * len(bytes_s)
        self.tokens_s, self.at_s = burst_s, 0.0

    def unshaped_s(self, i: int, now_s: float) -> float:
        """Seconds of collective ``i``'s bytes the bucket serves, starting at ``now_s``
        (none where its law was fitted with the bucket inside: its bytes still drain it)."""
        tokens_s = min(self.burst_s, self.tokens_s + now_s - self.at_s + self.refill_s[i])
        used_s = min(tokens_s, self.bytes_s[i])
        self.tokens_s = tokens_s - used_s
        return 0.0 if self.in_fit[i] else used_s

    def done(self, now_s: float) -> None:
        """The collective ended at ``now_s``: the link idles from here."""
        self.at_s = now_s


def idle_wake_s(link: Link) -> float:
    """What the first collective a micro-step issues after compute waits before it runs
    (``Link.idle_wake_s``; 0 where not measured). The engine charges it once per micro-step,
    to its first collective when compute ran before it in that micro-step.

    Why: Gloo's threads, and the peer's, sleep between a step's collectives. On this repo's
    2-vCPU VM the first all-reduce after 20 ms of compute took +0.4…+2.5 ms (median) over
    the call right after it, 64 KiB to 32 MiB, and +1.7…+3.2 ms after 50 ms; after 2 ms,
    −0.1…+0.3 ms up to 9 MB (experiments/wake_after_compute.py). In realrun bench's
    timelines a step's first collective ran +3…+8 ms over its law on loopback, the later
    ones −0.1…+0.5 ms (median), and the naive and flat rows were predicted 4-23 % fast.
    calibrate measures it after 20 ms: 0.6-2.0 ms, about a third of what the timelines
    show, so it moves the rows a part of the way (docs/FINDINGS.md#wake-after-idle). An
    FSDP step's first all-gather, issued before any compute, pays none::

        >>> idle_wake_s(Link("l", 0.0, 1.0, idle_wake_s=0.002)), idle_wake_s(Link("l", 0.0, 1.0))
        (0.002, 0.0)
    """
    return link.idle_wake_s or 0.0


def comm_effects(profile: ModelProfile, link: Link, plan: Plan, world_size: int,
                 costs: HostCosts, comm_s: list[float], contention: Contention
                 ) -> tuple[Contention, list[float] | None, TokenBucket | None]:
    """What a single link does to each collective beyond its seconds ``comm_s``: the
    contention (split where it can be), each collective's slowdown under it (None: one
    factor for all) and the link's token bucket (None: a wire). Each collective's α part is
    worked out once, for both."""
    contention = split_contention(contention, profile, link, world_size)
    split, shaped = contention.comm_bytes is not None, link.burst_bytes is not None
    alpha_s = alpha_part_s(plan, link, world_size, costs) if split or shaped else []
    return (contention, comm_slowdowns(contention, comm_s, alpha_s) if split else None,
            token_bucket(plan, link, costs, comm_s, alpha_s, world_size) if shaped else None)


def token_bucket(plan: Plan, link: Link, costs: HostCosts, comm_s: list[float],
                 alpha_s: list[float], world_size: int = 2) -> TokenBucket | None:
    """The bucket of ``link`` for this plan's collectives (``comm_s``: their seconds,
    ``alpha_s``: their α parts, :func:`alpha_part_s`); None for a wire (no ``burst_bytes``)."""
    if link.burst_bytes is None:
        return None
    share = refill_share(link) if issued_blocking(plan, costs) else 0.0
    refill_s = [a * share for a in alpha_s]
    # A kind with its own fit (reduce-scatter, all-gather) has α and busbw fitted on a sweep
    # the bucket already shaped (its mid sizes cost about α), so its law holds the bucket:
    # on the 2 Gbit/s transformer, FSDP's 225 waited-for collectives were charged it twice
    # (fsdp -10.1 -> -20.8 %). The all-reduce's α is a lone 4 KiB one's, outside its reach.
    # A curve calibrate measured through the bucket holds it the same way.
    in_fit = [c.kind in link.kind_fits or bool(link.curves and pick_curves(link, c.kind, world_size))
              for c in plan.collectives]
    return TokenBucket(link.burst_bytes / (link.busbw_gbps * 1e9), refill_s,
                       [max(0.0, t - a) for t, a in zip(comm_s, alpha_s)], in_fit)


def refill_share(link: Link) -> float:
    """The share of a waited-for call's α that refills ``link``'s bucket
    (``Link.blocking_refill_s`` over ``blocking_alpha_s``; 1 where not measured): α is the
    mean call, a tick's stall included, and the bucket keeps only a burst of it::

        >>> refill_share(Link("l", 0.0, 1.0, blocking_alpha_s=8e-4, blocking_refill_s=4.6e-4))
        0.575
    """
    if link.blocking_refill_s is None or not link.blocking_alpha_s:
        return 1.0
    return min(1.0, link.blocking_refill_s / link.blocking_alpha_s)


