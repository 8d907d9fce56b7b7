"""What one prediction needs, resolved once: the profile, the link, the contention, host costs.

Like NCCL's tuning table (src/graph/tuning.cc), built once up front and only read after: one
:class:`Inputs` per scenario of a prediction (simddp/predict/scenarios.py), made by the one
function that decides the contention and the host's effects,
:func:`simddp.predict.resolve.resolve`. The engine (simddp/sim/engine.py), the closed form and
the predictor read it; nothing downstream re-derives a factor::

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
    """One scenario's inputs.

    profile, link, world_size: the model, the link among all ranks (on two levels: the link
      between nodes) and the ranks.
    contention: the factors both lanes run under while they overlap (resolved: measured, else
      the published GPU figures, else none; or the user's choice).
    host: each DDP implementation's host costs and the compute after communication (None:
      free, as every preset).
    topology: nodes × GPUs with the link inside a node (None: one link among all ranks).
    effects: what the host adds to the link, applied by the engine at one hook
      (:class:`simddp.rig.GlooOnSharedCpu`, Gloo on a shared CPU host); None for every preset
      and NCCL link.
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
        ×``comm_factor`` (the link between nodes, and what its host adds) and, if given,
        another contention: one corner of a prediction range. Host costs stay at their
        measurement."""
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
