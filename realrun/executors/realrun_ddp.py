"""The "realrun" implementation: :class:`realrun.ddp.DDP` executes the Strategy's plan
(naive, flat, overlap, bucketed, hierarchical), one all-reduce per planned collective.

``hierarchical`` needs the ranks per node: :func:`gpus_per_node`, from
``REALRUN_GPUS_PER_NODE`` (what ``realrun bench --gpus-per-node`` sets for its ranks), else
the launcher's ``LOCAL_WORLD_SIZE`` (torchrun's, or realrun's own: the world on loopback, the
ranks of one emulated host with --emulate-hosts).
"""
from __future__ import annotations

import os

from realrun.configs import GPUS_PER_NODE_ENV
from realrun.ddp import DDP
from realrun.executors.wrapped import Wrapped
from simddp.errors import InputError
from simddp.planning.strategy import Strategy


def gpus_per_node(environ=None) -> int:
    """Ranks per node for a two-level all-reduce.

    >>> gpus_per_node({"REALRUN_GPUS_PER_NODE": "2", "LOCAL_WORLD_SIZE": "4"})
    2
    >>> gpus_per_node({"LOCAL_WORLD_SIZE": "4"}), gpus_per_node({})
    (4, 1)
    """
    environ = os.environ if environ is None else environ
    for name in (GPUS_PER_NODE_ENV, "LOCAL_WORLD_SIZE"):
        text = environ.get(name)
        if text is not None:
            if not text.isdigit() or int(text) < 1:
                raise InputError(f"{name}={text!r}: ranks per node must be an integer >= 1")
            return int(text)
    return 1


def wrap(module, strategy: Strategy, ctx, process_group=None) -> Wrapped:
    two_level = strategy.two_level
    model = DDP(module, strategy=strategy, process_group=process_group,
                gpus_per_node=gpus_per_node() if two_level else None)
    return Wrapped(model, model.finish_gradient_synchronization, None, None)
