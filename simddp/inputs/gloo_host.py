"""What Gloo on a shared CPU host adds to its link, as calibrate measured it: data only.

A link file's ``gloo_host`` section (docs/FORMATS.md), for a CPU box whose cores the ranks
and Gloo's threads share::

    >>> h = GlooHost(blocking_alpha_s=800e-6, idle_wake_s=0.002)
    >>> h.wait_s(alpha_s=400e-6), h.time_scaled(2.0).blocking_alpha_s
    (0.0004, 0.0016)

- ``blocking_alpha_s``: an all-reduce's α when each is waited for before the next is issued
  (naive, flat), a scheduler tick's stall included (docs/FINDINGS.md#blocking-alpha);
  ``kind_blocking_alpha_s``: the same for reduce-scatter and all-gather, measured on their own
  chains;
- ``burst_bytes``, ``blocking_refill_s``: an emulated link's tbf token bucket and what a
  waited-for hand-off refills it by (docs/FINDINGS.md#token-bucket);
- ``idle_wake_s``: what a micro-step's first collective after compute waits for Gloo's
  threads to wake (docs/FINDINGS.md#wake-after-idle).

What these do to a step is :mod:`simddp.rig`, imported only for a link file with this section.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from simddp.cost.factors import ALL_GATHER, REDUCE_SCATTER
from simddp.errors import InputError

SECTION = "gloo_host"


def _non_negative(owner: str, name: str, value, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value) or value < 0:
        raise InputError(f"{owner}: {name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class GlooHost:
    """What Gloo on a shared CPU host adds to one link; None: not measured."""

    blocking_alpha_s: float | None = None
    kind_blocking_alpha_s: dict[str, float] = field(default_factory=dict, hash=False)
    burst_bytes: float | None = None
    idle_wake_s: float | None = None
    blocking_refill_s: float | None = None

    def __post_init__(self) -> None:
        owner = f"{SECTION}"
        for name in ("blocking_alpha_s", "idle_wake_s", "blocking_refill_s"):
            _non_negative(owner, name, getattr(self, name))
        if self.burst_bytes is not None and not (
                isinstance(self.burst_bytes, (int, float)) and not isinstance(self.burst_bytes, bool)
                and math.isfinite(self.burst_bytes) and self.burst_bytes > 0):
            raise InputError(f"{owner}: burst_bytes must be a finite number > 0, "
                             f"got {self.burst_bytes!r}")
        kinds = dict(self.kind_blocking_alpha_s or {})
        for kind, value in kinds.items():
            if kind not in (REDUCE_SCATTER, ALL_GATHER):
                raise InputError(f"{owner}: kind_blocking_alpha_s: unknown kind {kind!r}; "
                                 f"expected {REDUCE_SCATTER} or {ALL_GATHER}")
            _non_negative(owner, f"kind_blocking_alpha_s.{kind}", value, allow_none=False)
        object.__setattr__(self, "kind_blocking_alpha_s", kinds)

    def wait_s(self, alpha_s: float) -> float:
        """What waiting for a collective before issuing the next costs on top of a link's lone
        α ``alpha_s``: ``blocking_alpha_s − alpha_s``, 0 without a blocking α."""
        if self.blocking_alpha_s is None:
            return 0.0
        return max(0.0, self.blocking_alpha_s - alpha_s)

    def time_scaled(self, factor: float) -> "GlooHost":
        """Every time ``factor`` times as long, as :meth:`simddp.inputs.link.Link.time_scaled`."""
        if factor == 1.0:
            return self

        def scaled(v):
            return None if v is None else v * factor

        return GlooHost(scaled(self.blocking_alpha_s),
                        {k: v * factor for k, v in self.kind_blocking_alpha_s.items()},
                        self.burst_bytes, self.idle_wake_s,
                        scaled(self.blocking_refill_s))

    def to_json(self) -> dict:
        """The link file's section: only what was measured."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in out.items() if v not in (None, {})}

    @classmethod
    def from_json(cls, section, where: str) -> "GlooHost":
        if not isinstance(section, dict):
            raise InputError(f"{where}: {SECTION} must be an object, got {section!r}")
        extra = sorted(set(section) - {f.name for f in fields(cls)})
        if extra:
            raise InputError(f"{where}: {SECTION}: unknown field(s) {', '.join(extra)}")
        try:
            return cls(**section)
        except InputError as e:
            raise InputError(f"{where}: {e}") from None
