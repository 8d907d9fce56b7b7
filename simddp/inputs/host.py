"""What a DDP *implementation* costs the host per step, besides the collectives themselves.

Picture one rank's backward. Each time a gradient is ready, the implementation's hook runs
(Python in realrun's wrapper, C++ in torch's reducer), copies the gradient into its bucket
scaled by 1/p, and launches the bucket's all-reduce once the bucket is full; when the
all-reduce is done it copies the average back out. None of that is the network's: it is CPU
time on the compute lane, and it differs between implementations on the same host::

    >>> host = Host("box", {"realrun": HostCosts(hook_s=140e-6, launch_s=60e-6),
    ...                     "torch": HostCosts(hook_s=30e-6)})
    >>> host.costs("torch").hook_s, host.costs("none-such").free
    (3e-05, True)

A strategy says which implementation runs it (``Strategy.implementation``: "torch" for
``ddp``, torch's own DistributedDataParallel; "realrun" for the others), and the engine charges
that implementation's costs — it never looks at a strategy's name. How each cost lands on
the timeline is :func:`simddp.sim.overheads.host_copies`. Measured by ``realrun validate`` (and
``realrun profile``) on the ranks; stored as a profile's ``host_costs`` section or as a
``simddp.host/1`` file (docs/FORMATS.md). Presets have none: their hosts are free.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from simddp.inputs.contention import Contention, check_factors, check_spread
from simddp.errors import InputError
from simddp.kinds import IMPLEMENTATIONS, REALRUN_DDP, TORCH_DDP, TORCH_FSDP

# IMPLEMENTATIONS (the registry's) key a host file's costs; "fsdp": torch FSDP2 (fully_shard)
# runs fsdp and zero2. Its host work around each all-gather
# and reduce-scatter (gather_s, scatter_s and the copies at copy_gbps) is a large share of the
# step on Gloo/CPU (docs/FINDINGS.md#sharded-steps-fsdp2-on-gloo); blocking_collectives says its
# collectives hold the training thread (Gloo on CPU) instead of overlapping (NCCL).
# Whether each implementation all-reduces a one-gradient bucket in the gradient itself
# (HostCosts.lone_in_place, where the costs do not say). realrun.DDP does (flat_bucket.py);
# torch's reducer keeps a flat buffer per bucket and copies every one in and out, one
# gradient or many: torch.profiler shows its copy-in and copy-out on one-tensor buckets too
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
    """One implementation's host costs on the compute lane.

    copy_gbps: gradient copies into a bucket (scaled by 1/p) and back out, bytes moved per
      second in GB/s (1e9 B/s); None: free.
    scale_gbps: a lone tensor's in-place 1/p (one pass over it); None: at copy_gbps.
    hook_s: seconds per gradient of the hook path (dispatch, bookkeeping).
    hook_after_backward_s: seconds per gradient launched after the backward (flat's bucket,
      naive's lone tensors): the hook only notes the gradient, and its copy in and out of
      the bucket, or its in-place scale, run as calls at the launch, beside no compute;
      None: hook_s. realrun times a flat step's copy calls themselves, which cost less a
      gradient than a hook-filled bucket's ``hook_s`` (docs/FINDINGS.md#host-costs).
    launch_s: seconds per collective the implementation launches (call, work, callback).
    gather_s, scatter_s: seconds per all-gather / reduce-scatter call besides its copies
      (FSDP2's hooks and DTensor bookkeeping); the copies around them, at copy_gbps, are an
      all-gather's shard in (n/p) and the gathered parameters out (n), a reduce-scatter's
      gradients in (n) and the reduced shard out (n/p) (simddp/sim/overheads.py).
    blocking_collectives: the compute lane waits for each collective it issues (FSDP2 on
      Gloo/CPU, where its collectives run on the training thread); False: they overlap with
      compute as the plan says (NCCL's own streams).
    lone_in_place: a bucket of one gradient is all-reduced in the gradient itself, scaled in
      place at ``scale_gbps``, with no copy-out (realrun.DDP); False: it is copied in and out
      of its bucket at ``copy_gbps`` like a bucket of several (torch's reducer); None: as the
      implementation that runs the plan does it (:data:`LONE_IN_PLACE`).
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
    """The host costs of each DDP implementation, measured on one host with one model.

    ``contention``: (compute_slowdown, comm_slowdown) measured with this model's own
    backward against its own all-reduces (realrun/launch/contention_timing.py); a prediction
    takes it before the link file's, which calibrate measures with a generic MLP.
    ``contention_spread``: the low and high (compute, comm) pairs of that measurement over its
    repeats and ranks (p10, p90), which the prediction ranges take (simddp/predict/scenarios.py).
    Both are the file's fields (a profile's ``host_costs``), read as one
    :class:`simddp.inputs.contention.Contention` (:attr:`measured_contention`) by the one
    function that resolves a prediction's inputs (simddp/predict/resolve.py).
    ``compute_after_comm``: how much slower the forward + backward run in a step that
    communicates than in back-to-back compute-only steps, which the profile's layers are
    scaled to; the engine multiplies every layer's time and the optimizer's by it in a plan
    with collectives (:func:`after_comm_factor`). Measured with the contention probe's
    compute alone (a forward + backward), which follows a stream of the model's all-reduces
    (realrun/profile_on_ranks.py). Any gap between steps slows the next one, the model's
    all-reduces most, and a model of many small ops most of all
    (docs/FINDINGS.md#compute-after-communication).
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
        """The contention measured with this model (``contention``, its spread), as the one
        type; None where the profile did not measure it."""
        if self.contention is None:
            return None
        return Contention(*self.contention, spread=self.contention_spread, source="model")


def after_comm_factor(host: Host | None, plan) -> float:
    """What the layers' compute is multiplied by in ``plan``: the host's
    ``compute_after_comm`` where the plan has collectives, else 1 (compute-only steps run
    back to back, as the profile timed them).

    >>> after_comm_factor(Host("h", compute_after_comm=1.2), type("P", (), {"collectives": (1,)}))
    1.2
    """
    if host is None or host.compute_after_comm is None or not plan.collectives:
        return 1.0
    return float(host.compute_after_comm)
