"""One colour map for every picture: span kinds on timelines, strategies on curves.

A backward is the same green in ``simddp simulate --plot``, ``simddp compare``'s timelines and
``realrun validate``'s plots; ddp is the same colour on every curve::

    >>> from simddp.planning.strategy import make_strategy
    >>> KIND_COLOURS["backward"], strategy_colour(make_strategy("ddp"))
    ('#55A868', '#55A868')
"""
from __future__ import annotations

from simddp.kinds import SpanKind
from simddp.result import (ALL_GATHER, BACKWARD, COMPUTE_ONLY, COPY, FORWARD, OPTIMIZER, OTHER,
                           REDUCE_SCATTER)
from simddp.planning.registry import ROWS
from simddp.planning.strategy import Strategy

KIND_COLOURS = {FORWARD: "#4C72B0", BACKWARD: "#55A868", OPTIMIZER: "#8172B2",
                COPY: "#CCB974", OTHER: "#937860"}
# Collectives alternate two shades per kind, so back-to-back neighbours stay apart.
COMM_SHADES = {SpanKind.ALL_REDUCE: ("#DD8452", "#F0B27A"), REDUCE_SCATTER: ("#C44E52", "#E39A9C"),
               ALL_GATHER: ("#64B5CD", "#A9D8E6")}
# hatch over the time compute sits waiting for communication: a red no span kind uses
EXPOSED_COLOUR = "#E8000B"
KIND_LABELS = {COPY: "DDP host work (hooks, copies)", OTHER: "other compute"}
# each strategy's own colour is its registry row's (simddp/planning/registry.py)
STRATEGY_COLOURS = {COMPUTE_ONLY: "#7F7F7F", **{row.name: row.colour for row in ROWS}}
# A comm hook's rows take the hook's colour (the line style tells ddp from bucketed).
HOOK_COLOURS = {"fp16": "#17BECF", "bf16": "#BCBD22", "powersgd": "#9467BD"}


def strategy_colour(spec: Strategy | None) -> str:
    """A strategy's colour (a Result's ``spec``); a hooked one takes its hook's; None
    (compute-only): no sync at all.

    >>> from simddp.planning.strategy import make_strategy
    >>> strategy_colour(make_strategy("ddp+powersgd:2")) == HOOK_COLOURS["powersgd"]
    True
    """
    if spec is None:
        return STRATEGY_COLOURS[COMPUTE_ONLY]
    if spec.comm_hook is not None:
        return HOOK_COLOURS.get(spec.comm_hook.kind, "#333333")
    return STRATEGY_COLOURS.get(spec.name, "#333333")


def comm_shades(kind: str) -> tuple[str, str]:
    return COMM_SHADES.get(kind, COMM_SHADES[SpanKind.ALL_REDUCE])
