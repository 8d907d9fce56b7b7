"""What one calibration measures, checked once: :class:`CalibrateSettings`.

    >>> s = CalibrateSettings(min_bytes=1024, max_bytes=8192, holdout_every=0)
    >>> s.sizes_bytes, s.world_sizes, s.sequence_sizes[:2]
    ([1024, 2048, 4096, 8192], (2,), (65536, 65536))

A bad field raises :class:`simddp.errors.InputError` naming its flag, so the CLI and a
library caller fail alike. No torch and no scipy: a bad flag is refused at once.
"""
from __future__ import annotations

import math
import os
import re
import statistics
from dataclasses import dataclass, field, replace

import numpy as np

from realrun.launch.env import is_torchrun
from realrun.launch.world import SWEEP_TIMEOUT_S, WorldConfig
from simddp.errors import InputError

# Bytes per element of the dtypes an all-reduce is timed in (torch's names).
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4,
               "int64": 8, "uint8": 1}
# The collectives measured besides all-reduce, for sharded strategies (Link.kind_fits).
KINDS = ("reduce_scatter", "all_gather")
MIN_POINTS = 3  # two parameters plus one degree of freedom for a confidence interval
# The sequence step (calibrate/rig/sequence.py): a small model's tensor count of typical small
# gradients; 40 repeats, as one repeat's α strays in stretches of seconds
# (docs/FINDINGS.md#bandwidth-from-the-large-sizes).
SEQUENCE_COUNT, SEQUENCE_BYTES, SEQUENCE_REPEATS = 32, 64 * 2 ** 10, 40
# Contention's MLP (calibrate/ranks/mlp_contention.py): mlp-8x1024 at batch 2 x seq 8, whose
# backward takes about as long as its 8 x 4 MiB all-reduce stream.
CONTENTION_WIDTHS, CONTENTION_ROWS = (1024,) * 8, 16
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmg]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2 ** 10, "m": 2 ** 20, "g": 2 ** 30}  # binary, like nccl-tests' -b/-e


def parse_bytes(flag: str, text: str | int) -> int:
    """'64M' -> 67108864; InputError naming the flag otherwise.

    >>> parse_bytes("--max-bytes", "64M"), parse_bytes("--min-bytes", 1024)
    (67108864, 1024)
    """
    m = _SIZE_RE.match(str(text))
    value = float(m.group(1)) * _UNITS[m.group(2).lower()] if m else 0
    if value < 1:
        raise InputError(f"{flag}: {text!r} is not a size >= 1 byte (e.g. 1024, 1K, 64MiB)")
    return int(value)


def sweep_sizes(min_bytes: int, max_bytes: int, factor: float, elem_bytes: int) -> list[int]:
    """Message sizes from min to max multiplying by ``factor``, rounded down to whole elements.

    >>> sweep_sizes(1024, 8192, 2, 4)
    [1024, 2048, 4096, 8192]
    """
    sizes: list[int] = []
    size = float(min_bytes)
    while size <= max_bytes * (1 + 1e-9):
        n = max(elem_bytes, int(size) // elem_bytes * elem_bytes)
        if not sizes or n > sizes[-1]:
            sizes.append(n)
        size *= factor
    return sizes


def heldout_mask(n_sizes: int, every: int = 3) -> np.ndarray:
    """True for held-out sizes: every ``every``-th from the second, never the two ends (so the
    fit's range covers them). ``every`` = 0 holds nothing out.

    >>> heldout_mask(8, 3).nonzero()[0].tolist()
    [1, 4]
    """
    mask = np.zeros(n_sizes, dtype=bool)
    if every and every > 1:
        mask[1:n_sizes - 1:every] = True
    return mask


def _n_fit(sizes_bytes: list[int], max_bytes: int, holdout_every: int) -> int:
    """How many of the sizes up to ``max_bytes`` a fit keeps (the rest are held out)."""
    n = sum(1 for s in sizes_bytes if s <= max_bytes)
    return int((~heldout_mask(n, holdout_every)).sum())


@dataclass(frozen=True)
class CalibrateSettings:
    """One calibration: the sweep, the fit, the sequence and contention steps, the world."""

    min_bytes: int = 1024
    max_bytes: int = 64 * 2 ** 20
    factor: float = 2.0
    dtype: str = "float32"
    # the sweep's timeout: a calibration sends up to 64 MiB-1 GiB messages
    world: WorldConfig = field(default_factory=lambda: WorldConfig(timeout_s=SWEEP_TIMEOUT_S))
    warmup: int = 5
    iters: int = 20
    world_sizes: tuple[int, ...] | None = None   # several worlds; None: just world.world_size
    threads_per_rank: int = 1
    piecewise: bool = False
    holdout_every: int = 3
    sequence: bool = True                        # α from back-to-back all-reduces
    sequence_count: int = SEQUENCE_COUNT
    sequence_bytes: int = SEQUENCE_BYTES
    sequence_repeats: int = SEQUENCE_REPEATS
    sequence_sizes: tuple[int, ...] | None = None  # None: sequence_count x sequence_bytes
    kinds: tuple[str, ...] = KINDS   # the link's kind_fits; () = all-reduce only
    # None: a quarter of max_bytes (all sizes if that leaves too few to fit); FSDP's collectives
    # are one unit's, and Gloo's large ones are slow (docs/FINDINGS.md#sharded-steps-fsdp2-on-gloo).
    kinds_max_bytes: int | None = None
    contention: bool = True
    contention_widths: tuple[int, ...] = CONTENTION_WIDTHS   # the backward-like workload
    contention_rows: int = CONTENTION_ROWS
    contention_stream_bytes: tuple[int, ...] | None = None   # None: the MLP's gradients
    contention_repeats: int = 5
    # The per-level step (calibrate/levels.py). None: wherever >1 node and >1 rank a node.
    levels: bool | None = None
    name: str | None = None
    progress: bool = True
    _resolved: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.min_bytes > self.max_bytes:
            raise InputError(f"--min-bytes {self.min_bytes} is larger than --max-bytes "
                             f"{self.max_bytes}")
        if not (isinstance(self.factor, (int, float)) and self.factor > 1):
            raise InputError(f"--factor must be a number > 1 (e.g. 2), got {self.factor!r}")
        if self.dtype not in DTYPE_BYTES:
            raise InputError(f"--dtype: unknown {self.dtype!r}; choose from "
                             f"{', '.join(DTYPE_BYTES)}")
        for flag, value, low in (("--warmup", self.warmup, 0), ("--iters", self.iters, 1),
                                 ("--sequence-count", self.sequence_count, 1),
                                 ("--sequence-repeats", self.sequence_repeats, 1),
                                 ("--threads-per-rank", self.threads_per_rank, 1),
                                 ("--contention-repeats", self.contention_repeats, 1),
                                 ("--contention-rows", self.contention_rows, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InputError(f"{flag} must be an integer >= {low}, got {value}")
        kinds = (self.kinds,) if isinstance(self.kinds, str) else tuple(self.kinds)
        bad = [k for k in kinds if k not in KINDS] or (
            [",".join(kinds)] if len(set(kinds)) != len(kinds) else [])
        if bad:
            raise InputError(f"--kinds: {bad[0]!r} is not a comma list of distinct "
                             f"{', '.join(KINDS)} (or none)")
        if self.kinds_max_bytes is not None and kinds and (n := _n_fit(
                self.sizes_bytes, self.kinds_max_bytes, self.holdout_every)) < MIN_POINTS:
            raise InputError(f"--kinds-max-bytes {self.kinds_max_bytes} leaves {n} sizes to "
                             f"fit, need >= {MIN_POINTS}: raise it, or --kinds none")
        if self.holdout_every < 0 or self.holdout_every == 1:
            raise InputError(f"--holdout-every must be 0 (none) or >= 2, got "
                             f"{self.holdout_every}")
        if not self.contention_widths or any(
                isinstance(w, bool) or not isinstance(w, int) or w < 1
                for w in self.contention_widths):
            raise InputError(f"--contention-mlp: widths must be integers >= 1, got "
                             f"{self.contention_widths!r}")
        n_fit = int((~heldout_mask(len(self.sizes_bytes), self.holdout_every)).sum())
        need = 2 * MIN_POINTS if self.piecewise else MIN_POINTS
        if n_fit < need:
            raise InputError(f"{len(self.sizes_bytes)} sizes ({self.min_bytes}..{self.max_bytes} "
                             f"x{self.factor:g}) leave {n_fit} to fit, need >= {need}: widen "
                             "the range, lower --factor or pass --holdout-every 0")
        if self._resolved:
            return
        # Resolve the defaults that depend on other fields or on how the ranks were started.
        fields = {"world_sizes": self._world_sizes(), "kinds": tuple(self.kinds),
                  "_resolved": True}
        if self.piecewise:  # each piece keeps its own fitted α: no sequence step
            fields["sequence"] = False
        if self.sequence_sizes is None:
            fields["sequence_sizes"] = (self.sequence_bytes,) * self.sequence_count
        if self.contention_stream_bytes is None:
            fields["contention_stream_bytes"] = tuple(4 * w * w for w in self.contention_widths)
        resolved = replace(self, **fields)
        for name in fields:
            object.__setattr__(self, name, getattr(resolved, name))
        if self.levels and not any(self.gpus_per_node(p) for p in self.world_sizes):
            shape = " and ".join("{} node(s) x {} rank(s)".format(*self.world.sized(p).node_shape)
                                 for p in self.world_sizes)
            raise InputError(f"--levels: the world is {shape}; calibrating per level needs >1 "
                             "node and >1 rank per node (--emulate-hosts 2 --world-size 4, or "
                             "torchrun with --nnodes and --nproc-per-node >= 2)")

    def gpus_per_node(self, world_size: int) -> int | None:
        """Ranks per node of the per-level step at ``world_size``; None where it is not run
        (one node, one rank per node, or ``levels=False``)."""
        nodes, per = self.world.sized(world_size).node_shape
        return per if self.levels is not False and nodes > 1 and per > 1 else None

    def for_model(self, tensor_bytes: list[int], max_bytes_given: bool = False
                  ) -> "CalibrateSettings":
        """These settings on one model's gradients (``calibrate --profile``; docs/CALIBRATE.md,
        One model's sizes): the sequence step and contention stream on its tensors, and unless
        ``max_bytes_given`` the sweep up to its gradient total.

        >>> s = CalibrateSettings(world_sizes=(2,)).for_model([4 * 512 * 512] * 3)
        >>> s.sequence_sizes, s.contention_widths, s.max_bytes
        ((1048576, 1048576, 1048576), (512, 512, 512), 4194304)
        """
        sizes = [int(n) for n in tensor_bytes if n > 0]
        if not sizes:
            raise InputError("--profile: the model has no gradient tensors to all-reduce")
        width = int(min(4096, max(64, round(math.sqrt(statistics.median(sizes) / 4)))))
        fields = {"sequence_sizes": tuple(sizes), "contention_stream_bytes": tuple(sizes),
                  "contention_widths": (width,) * min(len(sizes), 32)}
        if not max_bytes_given:
            fields["max_bytes"] = min(1 << 30, max(1 << 20, 1 << math.ceil(math.log2(sum(sizes)))))
        return replace(self, **fields)

    @classmethod
    def short(cls, world: WorldConfig, tensor_bytes: list[int], *, iters: int = 20,
              threads_per_rank: int = 1, kinds: tuple[str, ...] = (), sequence: bool = True,
              piecewise: bool = False, max_bytes: int | None = None) -> "CalibrateSettings":
        """The short calibration ``realrun validate`` runs first (no ``--link``), on one
        model's gradients (:meth:`for_model`): 4 KiB up to ``max_bytes`` (default the gradient
        total, 1-64 MiB), fewer repeats; about a minute.

        >>> s = CalibrateSettings.short(WorldConfig(world_size=2), [4 << 20] * 3)
        >>> s.min_bytes, s.max_bytes, s.sequence_repeats, s.sequence_sizes
        (4096, 16777216, 15, (4194304, 4194304, 4194304))
        """
        if max_bytes is None:
            total = max(sum(tensor_bytes), 1)
            max_bytes = min(64 << 20, max(1 << 20, 1 << math.ceil(math.log2(total))))
        return cls(min_bytes=4 << 10, max_bytes=max_bytes, factor=2.0, iters=iters, warmup=3,
                   contention_repeats=5, world=world, threads_per_rank=threads_per_rank,
                   piecewise=piecewise, sequence=sequence, progress=False,
                   sequence_repeats=15, kinds=kinds, levels=False,  # validate uses no levels
                   ).for_model(tensor_bytes, max_bytes_given=True)

    @property
    def sizes_bytes(self) -> list[int]:
        return sweep_sizes(self.min_bytes, self.max_bytes, self.factor, DTYPE_BYTES[self.dtype])

    @property
    def kind_sizes_bytes(self) -> list[int]:
        """The reduce-scatter and all-gather sweep: the all-reduce's sizes to ``kinds_max_bytes``.

        >>> CalibrateSettings().kind_sizes_bytes[-1] == 16 * 2 ** 20     # 64 MiB / 4
        True
        """
        limit = self.kinds_max_bytes
        if limit is None:
            quarter = self.max_bytes // 4
            enough = _n_fit(self.sizes_bytes, quarter, self.holdout_every) >= MIN_POINTS
            limit = quarter if enough else self.max_bytes
        return [n for n in self.sizes_bytes if n <= limit]

    # The world's own fields, read where a calibration reports or launches them.
    backend = property(lambda self: self.world.backend)
    emulate_hosts = property(lambda self: self.world.emulate_hosts)
    link_gbit = property(lambda self: self.world.link_gbit)
    timeout_s = property(lambda self: self.world.timeout_s)

    def worlds(self) -> list[WorldConfig]:
        """One WorldConfig per world size calibrated (``realrun.launch.run_world``'s)."""
        return [self.world.sized(p) for p in self.world_sizes]

    def _world_sizes(self) -> tuple[int, ...]:
        given = self.world_sizes
        text = ",".join(map(str, given)) if given else None
        if is_torchrun():
            env_world = int(os.environ["WORLD_SIZE"])
            if given not in (None, (env_world,)):
                raise InputError(f"--world-sizes {text}: torchrun started {env_world} ranks; "
                                 "drop the flag or pass that number")
            return (env_world,)
        sizes = tuple(given) if given else (self.world.world_size,)
        if any(isinstance(p, bool) or not isinstance(p, int) or p < 2 for p in sizes) \
                or len(set(sizes)) != len(sizes):
            text = text or ",".join(map(str, sizes))
            raise InputError(f"--world-sizes: {text!r} is not a comma list of distinct "
                             "integers >= 2 (e.g. 2,4)")
        for p in sizes:  # the world's own checks at each size: as many ranks on every emulated host
            self.world.sized(p)
        return sizes
