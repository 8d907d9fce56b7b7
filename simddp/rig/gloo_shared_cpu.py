"""Gloo on a shared CPU host: what that host adds to a step, applied by the engine at one hook.

Where training threads and Gloo's threads share a CPU box's cores (this project's test rig),
a step also pays, as calibrate measured into a link file's ``gloo_host`` section:

- a **blocking α**: a collective waited for before the next is issued costs more than one
  issued behind another (docs/FINDINGS.md#blocking-alpha);
- a **token bucket**: an emulated link's tbf lets a burst through at memory speed after the
  link idles (:class:`TokenBucket`, docs/FINDINGS.md#token-bucket);
- a **wake after idle**: a micro-step's first collective after compute waits for Gloo's
  sleeping threads (docs/FINDINGS.md#wake-after-idle);
- **split contention**: the model's comm factor splits into its α part's and its bytes
  part's (:func:`split_comm`, docs/FINDINGS.md#contention-split-into-alpha-and-bytes).

:func:`simddp.predict.resolve.resolve` puts a :class:`GlooOnSharedCpu` in ``Inputs.effects``
for such a link file; :func:`simddp.sim.costs.plan_costs` asks it for each plan's comm lane::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan
    >>> from simddp.inputs.gloo_host import GlooHost
    >>> from simddp.inputs.resolved import Inputs
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
    >>> rig = GlooOnSharedCpu(GlooHost(blocking_alpha_s=500e-6, idle_wake_s=0.002))
    >>> inputs = Inputs(toy, Link("l", 100e-6, 1.0), 2, effects=rig)
    >>> lane = rig.comm_lane(plan(toy, make_strategy("naive")), inputs, inputs.costs("realrun"))
    >>> [round(s * 1e3, 3) for s in lane.comm_s], lane.wake_s     # waited for: α 0.5 ms
    ([1.5, 1.5], 0.002)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from simddp.cost.factors import ALL_REDUCE
from simddp.cost.hierarchical import LevelHosts
from simddp.cost.single import collective_s, parts, pick_curves
from simddp.inputs.contention import Contention
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.host import HostCosts
from simddp.inputs.link import Link
from simddp.inputs.profile import ModelProfile
from simddp.inputs.resolved import Inputs
from simddp.planning.plans import Plan
from simddp.planning.sharding import cast_seconds
from simddp.sim.comm import comm_seconds, issued_blocking
from simddp.sim.costs import CommLane
from simddp.sim.overheads import comm_gaps_s

# Below this α share of the model's stream the split's solve multiplies its noise too much
# (docs/FINDINGS.md#contention-split-into-alpha-and-bytes).
MIN_ALPHA_SHARE = 0.2


@dataclass(frozen=True)
class GlooOnSharedCpu:
    """What Gloo on a shared CPU host adds to a step: ``host`` is the link's (on two levels,
    the link between nodes'); ``bytes_factor`` is calibrate's comm factor (None: not
    measured)."""

    host: GlooHost
    bytes_factor: float | None = None

    def time_scaled(self, factor: float) -> "GlooOnSharedCpu":
        """As :meth:`simddp.inputs.resolved.Inputs.scaled` scales its link."""
        if factor == 1.0:
            return self
        return replace(self, host=self.host.time_scaled(factor))

    def comm_lane(self, plan: Plan, inputs: Inputs, costs: HostCosts) -> CommLane:
        """The hook: ``plan``'s comm lane on ``inputs`` with this host's effects. On two
        levels the wake only (the split and the bucket were measured on one link)."""
        link, world_size, topo = inputs.link, inputs.world_size, inputs.topology
        hosts = LevelHosts(inter=self.host) if topo is None else \
            LevelHosts(topo.intra_host, topo.inter_host, self.host)
        comm_s = comm_seconds(plan, link, world_size, costs, topo, hosts)
        wake_s = self.host.idle_wake_s or 0.0
        if topo is not None:
            return CommLane(comm_s, inputs.contention, wake_s=wake_s)
        contention, bytes_factor = self.split(inputs.contention, inputs.profile, link,
                                              world_size)
        shaped = self.host.burst_bytes is not None
        split = bytes_factor is not None
        alpha_s = alpha_part_s(plan, link, world_size, costs, self.host) if split or shaped \
            else []
        return CommLane(
            comm_s, contention,
            comm_slowdowns(contention.comm, bytes_factor, comm_s, alpha_s) if split else None,
            token_bucket(plan, link, self.host, costs, comm_s, alpha_s, world_size)
            if shaped else None, wake_s)

    def split(self, contention: Contention, profile: ModelProfile, link: Link,
              world_size: int) -> tuple[Contention, float | None]:
        """``contention`` split by :func:`split_comm` against the model's own stream."""
        if contention.source != "model":
            return contention, None
        return split_comm(contention, self.bytes_factor,
                          *stream_parts_s(profile, link, world_size))


def split_comm(contention: Contention, bytes_factor: float | None, stream_alpha_s: float,
               stream_bytes_s: float) -> tuple[Contention, float | None]:
    """The model's comm factor split into its α part's and its bytes part's: (the contention
    with comm c_α, c_β), or (``contention``, None) where that cannot be told.

    A call's fixed part is CPU work beside the backward while its bytes wait on the wire, so
    they contend differently (docs/FINDINGS.md#contention-split-into-alpha-and-bytes).
    c_β is calibrate's ``bytes_factor``; c_α solves c·(A + B) = c_α·A + c_β·B for the model's
    stream's lone α and bytes seconds (A, B)::

        >>> model = Contention(1.5, 2.44, source="model")
        >>> c, b = split_comm(model, 1.14, 0.0916, 0.0403); round(c.comm, 2), b
        (3.01, 1.14)
        >>> split_comm(model, 1.14, 0.0096, 0.1416)[0] is model   # bytes-dominated: as it is
        True
    """
    alpha_s, bytes_s = stream_alpha_s, stream_bytes_s
    if (contention.source != "model" or bytes_factor is None
            or alpha_s < MIN_ALPHA_SHARE * (alpha_s + bytes_s)):
        return contention, None
    comm_alpha = (contention.comm * (alpha_s + bytes_s) - bytes_factor * bytes_s) / alpha_s
    if comm_alpha < 1.0:
        return contention, None
    return replace(contention, comm=comm_alpha), bytes_factor


def comm_slowdowns(alpha_factor: float, bytes_factor: float, comm_s: list[float],
                   alpha_s: list[float]) -> list[float]:
    """Each collective's slowdown while compute runs: its α part at ``alpha_factor`` and the
    rest at ``bytes_factor``, weighted by seconds::

        >>> comm_slowdowns(3.0, 1.0, [0.002, 0.004], [0.001, 0.001])     # 1 + 1 ms, 1 + 3 ms
        [2.0, 1.5]
    """
    return [(alpha_factor * min(a, t) + bytes_factor * (t - min(a, t))) / t if t > 0
            else alpha_factor for t, a in zip(comm_s, alpha_s)]


def alpha_part_s(plan: Plan, link: Link, world_size: int, costs: HostCosts,
                 host: GlooHost | None = None) -> list[float]:
    """Each collective's fixed part on one link, in launch order: its calls' α (the kind's,
    blocking or not, as :func:`simddp.sim.comm.comm_seconds` charges it; a curve's low-end α)
    and a comm hook's work between them (CPU work, like α)."""
    blocking = issued_blocking(plan, costs)
    gaps_s = comm_gaps_s(costs, plan) or [0.0] * len(plan.collectives)
    casts_s = cast_seconds(plan, world_size)   # device work ahead of the call, like a gap
    return [sum(parts(link, c.kind, n, world_size, blocking, host=host)[0] for n in c.calls)
            + gap_s + cast_s for c, gap_s, cast_s in zip(plan.collectives, gaps_s, casts_s)]


def stream_parts_s(profile: ModelProfile, link: Link, world_size: int) -> tuple[float, float]:
    """(α seconds, bytes seconds) of the stream realrun profile measures the model's
    contention with: one all-reduce per gradient tensor, queued at once, on ``link``."""
    alpha_s = bytes_s = 0.0
    for n in profile.tensor_bytes:
        a_s = parts(link, ALL_REDUCE, n, world_size)[0]
        alpha_s += a_s
        bytes_s += collective_s(link, ALL_REDUCE, n, world_size) - a_s
    return alpha_s, bytes_s


class TokenBucket:
    """A shaped link's token bucket (Linux tbf, docs/FINDINGS.md#token-bucket), in seconds of
    the link's rate: a collective's bytes go unshaped as far as the tokens last, the rest at
    busbw. Tokens refill while the link idles and during a waited-for call's α
    (:func:`refill_share`), not a queued one's (docs/FINDINGS.md#small-collective-queues).
    The bucket is full when the step starts::

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

    def fresh(self) -> "TokenBucket":
        """The same bucket, full: one per engine run."""
        return TokenBucket(self.burst_s, self.refill_s, self.bytes_s, self.in_fit)

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


def token_bucket(plan: Plan, link: Link, host: GlooHost, costs: HostCosts,
                 comm_s: list[float], alpha_s: list[float], world_size: int = 2
                 ) -> TokenBucket | None:
    """The bucket of ``link`` for this plan's collectives (``comm_s``: their seconds,
    ``alpha_s``: their α parts, :func:`alpha_part_s`); None for a wire (no ``burst_bytes``)."""
    if host.burst_bytes is None:
        return None
    share = refill_share(host) if issued_blocking(plan, costs) else 0.0
    refill_s = [a * share for a in alpha_s]
    # A kind fit or curve measured through the bucket already holds it: not charged twice
    # (docs/FINDINGS.md#token-bucket).
    in_fit = [c.kind in link.kind_fits or bool(link.curves and pick_curves(link, c.kind, world_size))
              for c in plan.collectives]
    return TokenBucket(host.burst_bytes / (link.busbw_gbps * 1e9), refill_s,
                       [max(0.0, t - a) for t, a in zip(comm_s, alpha_s)], in_fit)


def refill_share(host: GlooHost) -> float:
    """The share of a waited-for call's α that refills the bucket (``blocking_refill_s`` over
    ``blocking_alpha_s``; 1 where not measured)::

        >>> refill_share(GlooHost(blocking_alpha_s=8e-4, blocking_refill_s=4.6e-4))
        0.575
    """
    if host.blocking_refill_s is None or not host.blocking_alpha_s:
        return 1.0
    return min(1.0, host.blocking_refill_s / host.blocking_alpha_s)
