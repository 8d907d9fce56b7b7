"""The collective law: how many seconds one collective takes. Every caller asks here.

One question, one package: seconds for a collective of ``kind`` (simddp.kinds.CollectiveKind)
and ``nbytes`` over these ranks, issued overlapped or waited for (blocking)::

    >>> from simddp.inputs.link import Link
    >>> collective_s(Link("eth", 50e-6, 1.0), "all_reduce", 1_000_000, world_size=2)
    0.00105

| module | answers |
|---|---|
| :mod:`~simddp.cost.factors` | bytes per rank per byte: nccl-tests' bus factors |
| :mod:`~simddp.cost.curve` | a measured size → time curve, read in log–log |
| :mod:`~simddp.cost.single` | one link: its curve for the kind, else α–β (pieces, kind fits, blocking α) |
| :mod:`~simddp.cost.hierarchical` | two levels: ring or hierarchical, each phase by the one-link law |
| :mod:`~simddp.sim.comm` | a plan's collectives on the comm lane (the engine's question) |
| :mod:`~simddp.rig.gloo_shared_cpu` | what a CPU box's link adds (token bucket, wake, split contention): one hook |
| :mod:`~simddp.cost.fitted` | the α–β a closed form uses: the link's own, or fitted to its curve |

tests/test_one_law.py keeps it the only place. The last three modules import plan and host
types, so they are imported by their own names, not from here.
"""
from simddp.cost.curve import Curve, make_curve
from simddp.cost.factors import (ALL_GATHER, ALL_REDUCE, COLLECTIVE_KINDS, GB, REDUCE_SCATTER,
                                bus_factor, kind_factor)
from simddp.cost.hierarchical import ALGORITHMS
from simddp.cost.hierarchical import collective_s as topology_collective_s
from simddp.cost.single import (all_reduce_law, alpha_beta_s, bytes_s, collective_s,
                               kind_segment, parts, pick_curves, segment)

__all__ = ["ALGORITHMS", "ALL_GATHER", "ALL_REDUCE", "COLLECTIVE_KINDS", "Curve", "GB",
           "REDUCE_SCATTER", "all_reduce_law", "alpha_beta_s", "bus_factor", "bytes_s",
           "collective_s", "kind_factor", "kind_segment", "make_curve", "parts", "pick_curves",
           "segment", "topology_collective_s"]
