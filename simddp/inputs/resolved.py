"""What one prediction needs, resolved once: the profile, the link, the contention, host costs.

Like NCCL's tuning table, built once up front by :func:`simddp.predict.resolve.resolve`, one
per scenario of a prediction, and only read after: nothing downstream re-derives a factor::

    >>> from simddp.inputs.link import Link
    >>> from simddp.inputs.profile import Layer, ModelProfile
    >>> toy = ModelProfile("toy", (Layer("l0", (8,), 1e-3, 2e-3),))
    >>> inputs = Inputs(toy, Link("l", 0.0, 1.0), world_size=2, contention=Contention(1.5, 2.0))
    >>> inputs.scaled(compute_factor=2.0).profile.backward_s, inputs.contention.factors
    (0.004, (1.5, 2.0))
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from simddp.inputs.contention import Contention
from simddp.inputs.host import FREE, Host, HostCosts
from simddp.inputs.link import Link
from simddp.inputs.profile import ModelProfile
from simddp.inputs.topology import Topology

NONE = Contention()


@dataclass(frozen=True)
class Inputs:
    """One scenario's inputs: ``link`` is the link among all ranks (on two levels, between
    nodes); ``host`` None: free; ``topology`` None: one link; ``effects``: what the host
    adds to the link (:class:`simddp.rig.GlooOnSharedCpu`), None for presets and NCCL.
    """

    profile: ModelProfile
    link: Link
    world_size: int
    contention: Contention = NONE
    host: Host | None = None
    topology: Topology | None = None
    effects: Any = None

    def costs(self, implementation: str) -> HostCosts:
        """What ``implementation`` (a Strategy's) costs the host; free without measured costs."""
        return FREE if self.host is None else self.host.costs(implementation)

    def scaled(self, compute_factor: float = 1.0, comm_factor: float = 1.0,
               contention: Contention | None = None) -> "Inputs":
        """These inputs with every compute second ×``compute_factor``, every collective
        ×``comm_factor`` and, if given, another contention: one corner of a prediction range.
        Host costs stay as measured."""
        return replace(
            self, profile=scaled_profile(self.profile, compute_factor),
            link=self.link.time_scaled(comm_factor),
            topology=None if self.topology is None else self.topology.time_scaled(comm_factor),
            effects=None if self.effects is None else self.effects.time_scaled(comm_factor),
            contention=self.contention if contention is None else contention)


def scaled_profile(profile: ModelProfile, factor: float) -> ModelProfile:
    """``profile`` with every compute second x ``factor`` (itself at 1.0)."""
    if factor == 1.0:
        return profile
    return profile.scaled(forward_s=profile.forward_s * factor if profile.forward_s else None,
                          backward_s=profile.backward_s * factor if profile.backward_s
                          else None, optimizer_s=profile.optimizer_s * factor)
