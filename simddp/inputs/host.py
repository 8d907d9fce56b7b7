"""What a DDP *implementation* costs the host per step, besides the collectives themselves.

Hooks, copies into and out of buckets, launches: CPU time on the compute lane, different for
each implementation on the same host (fields: docs/FORMATS.md, host costs)::

    >>> host = Host("box", {"realrun": HostCosts(hook_s=140e-6, launch_s=60e-6),
    ...                     "torch": HostCosts(hook_s=30e-6)})
    >>> host.costs("torch").hook_s, host.costs("none-such").free
    (3e-05, True)

The engine charges the costs of ``Strategy.implementation``, never by a strategy's name
(:func:`simddp.sim.overheads.host_copies`). ``realrun profile`` and ``validate`` measure them;
presets have none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from simddp.inputs.contention import Contention, check_factors, check_spread
from simddp.errors import InputError
from simddp.kinds import IMPLEMENTATIONS, REALRUN_DDP, TORCH_DDP, TORCH_FSDP

# Whether each implementation all-reduces a one-gradient bucket in the gradient itself;
# torch's reducer copies every bucket in and out, one gradient or many
# (docs/FINDINGS.md#host-costs).
LONE_IN_PLACE = {REALRUN_DDP: True, TORCH_DDP: False, TORCH_FSDP: True}


def _check(owner: str, name: str, value, allow_none: bool, allow_zero: bool) -> None:
    if value is None and allow_none:
        return
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
          and math.isfinite(value) and (value >= 0 if allow_zero else value > 0))
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise InputError(f"host costs {owner!r}: {name} must be a finite number {bound}"
                         f"{' or null' if allow_none else ''}, got {value!r}")


@dataclass(frozen=True)
class HostCosts:
    """One implementation's host costs on the compute lane: rates in GB/s (None: free, or
    for ``scale_gbps`` at ``copy_gbps``), the rest in seconds per gradient or call; each
    field is a host file's (docs/FORMATS.md). FSDP2's work around its collectives is a large
    share of a step on Gloo/CPU (docs/FINDINGS.md#sharded-steps-fsdp2-on-gloo).
    """

    copy_gbps: float | None = None
    scale_gbps: float | None = None
    hook_s: float = 0.0
    launch_s: float = 0.0
    hook_after_backward_s: float | None = None
    gather_s: float = 0.0
    scatter_s: float = 0.0
    blocking_collectives: bool = False
    lone_in_place: bool | None = None

    def __post_init__(self) -> None:
        for name in ("copy_gbps", "scale_gbps"):
            _check(name, name, getattr(self, name), allow_none=True, allow_zero=False)
        for name in ("hook_s", "launch_s", "gather_s", "scatter_s"):
            _check(name, name, getattr(self, name), allow_none=False, allow_zero=True)
        _check("hook_after_backward_s", "hook_after_backward_s", self.hook_after_backward_s,
               allow_none=True, allow_zero=True)
        if not isinstance(self.blocking_collectives, bool):
            raise InputError(f"host costs: blocking_collectives must be true or false, got "
                             f"{self.blocking_collectives!r}")
        if self.lone_in_place is not None and not isinstance(self.lone_in_place, bool):
            raise InputError(f"host costs: lone_in_place must be true or false, got "
                             f"{self.lone_in_place!r}")

    @property
    def free(self) -> bool:
        """Nothing to charge (no copies, hooks, launches, per-call costs) and nothing blocks."""
        return (self.copy_gbps is None and not self.hook_s and not self.launch_s
                and not self.hook_after_backward_s
                and not self.gather_s and not self.scatter_s and not self.blocking_collectives)


FREE = HostCosts()


@dataclass(frozen=True)
class Host:
    """The host costs of each DDP implementation, measured on one host with one model, and
    what was measured with the model: its own ``contention`` with its p10/p90
    ``contention_spread`` (read as :attr:`measured_contention`), and ``compute_after_comm``,
    how much slower compute runs in a step that communicates
    (docs/FINDINGS.md#compute-after-communication; fields: docs/FORMATS.md).
    """

    name: str
    implementations: dict[str, HostCosts] = field(default_factory=dict)
    source: str = ""
    contention: tuple[float, float] | None = None
    contention_spread: tuple[tuple[float, float], tuple[float, float]] | None = None
    compute_after_comm: float | None = None

    def __post_init__(self) -> None:
        owner = f"host {self.name!r}"
        f = self.compute_after_comm
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float))
                              or not math.isfinite(f) or f < 1.0):
            raise InputError(f"{owner}: compute_after_comm must be a slowdown >= 1.0, got {f!r}")
        if self.contention is not None:
            object.__setattr__(self, "contention",
                               check_factors(owner, "contention", self.contention))
        if self.contention_spread is not None:
            object.__setattr__(self, "contention_spread",
                               check_spread(owner, self.contention_spread))
        costs = {}
        for impl, c in dict(self.implementations).items():
            if impl not in IMPLEMENTATIONS:
                raise InputError(f"host {self.name!r}: unknown implementation {impl!r}; "
                                 f"expected {', '.join(IMPLEMENTATIONS)}")
            costs[impl] = c if isinstance(c, HostCosts) else HostCosts(**c)
        object.__setattr__(self, "implementations", costs)

    def costs(self, implementation: str) -> HostCosts:
        """That implementation's costs; free when none were measured."""
        return self.implementations.get(implementation, FREE)

    @property
    def free(self) -> bool:
        return (all(c.free for c in self.implementations.values()) and self.contention is None
                and self.compute_after_comm in (None, 1.0))

    @property
    def measured_contention(self) -> Contention | None:
        """The contention measured with this model, with its spread; None if not measured."""
        if self.contention is None:
            return None
        return Contention(*self.contention, spread=self.contention_spread, source="model")


def after_comm_factor(host: Host | None, plan) -> float:
    """What the layers' compute is multiplied by in ``plan``: ``compute_after_comm`` where the
    plan has collectives, else 1 (compute-only steps run back to back, as profiled).

    >>> after_comm_factor(Host("h", compute_after_comm=1.2), type("P", (), {"collectives": (1,)}))
    1.2
    """
    if host is None or host.compute_after_comm is None or not plan.collectives:
        return 1.0
    return float(host.compute_after_comm)
