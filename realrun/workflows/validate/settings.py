"""Everything one validation needs, checked once: :class:`ValidateSettings`.

    >>> s = ValidateSettings(model="mlp-4x64", bucket_mbs=(1, 10), strategies=("naive", "ddp"))
    >>> [c["strategy"] for c in s.configs()], len(s.probes_run())
    (['compute-only', 'naive', 'ddp', 'ddp'], 8)
    >>> s = ValidateSettings(bucket_mbs=(4,), strategies=("ddp", "zero2"), comm_hooks=("fp16",))
    >>> [c["strategy"] for c in s.configs()]
    ['compute-only', 'ddp', 'ddp+fp16', 'zero2']
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from realrun.comm_hooks import check_backend, check_warmup
from realrun.configs import (BENCH_STRATEGIES, COMPUTE_BASES, DEFAULT_STRATEGIES, HOST_TURNS,
                             bench_configs, runs_torch_ddp, shards)
from realrun.launch.world import WorldConfig
from realrun.precision import check_precision
from realrun.tensors import tensor_bytes
from realrun.workflows.validate.probes import HOST_PROBES, PROBES
from realrun.workload import Workload
from simddp.errors import InputError
from simddp.planning.hooks import parse_comm_hook
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.presets.models import ModelSpec, parse_model
from simddp.planning.strategy import make_strategy


@dataclass(frozen=True)
class ValidateSettings:
    """Everything one validation needs; checked in ``__post_init__`` (InputError, one line)."""

    model: str = "mlp-8x1024"
    shrink: dict = field(default_factory=dict)      # layers, d_model, d_ff, heads, vocab
    module: str | None = None                        # FILE.py:FN or package.module:FN: the
                                                     # user's model instead of the preset
    batch: int = 2
    seq: int = 8
    optimizer: str = "sgd"
    threads: int = 1
    seed: int = 0
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    bucket_mbs: tuple[float, ...] = (1.0, 4.0, 10.0, 40.0)
    comm_hooks: tuple[str, ...] = ()                 # "fp16", "powersgd:2": hooked ddp/bucketed
    shard_unit_mb: float | None = None               # fsdp/zero2 units (None: one per layer)
    # ranks, backend, emulated hosts, link shaping, timeout (realrun/launch/world.py); its
    # timeout is a step's, a minute, for the calibration and profile phases too
    world: WorldConfig = field(default_factory=WorldConfig)
    precision: str = "fp32"
    link: Link | LinkFile | None = None              # None: calibrate first
    steps: int = 30
    warmup: int = 5
    chunk: int = 5
    profile_repeats: int = 15
    host_turns: int = HOST_TURNS                     # the profile's host-cost round-robin
    timeline_steps: int = 5
    calibrate_iters: int = 20
    piecewise: bool = False                          # calibrate two α–β lines (see below)
    lone_alpha: bool = False                         # calibrate --no-sequence (old α)
    anchor_compute: bool = True                      # compute total from the compute-only row
    probes: bool = True                              # link + hooks measured in the same run
    model_copies: bool = True                        # charge the wrapper's copies (copy_gbps)
    compute_basis: str = "slowest"                   # profile compute: slowest rank's step,
                                                     # or rank 0's (realrun/profile_on_ranks.py)

    def __post_init__(self) -> None:
        for name in ("batch", "seq", "threads", "steps", "warmup", "chunk",
                     "profile_repeats", "host_turns", "timeline_steps", "calibrate_iters"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"--{name.replace('_', '-')} must be an integer >= 1, got {v!r}")
        if self.world_size < 2:  # the world's own checks ran when it was made
            raise InputError(f"--world-size must be >= 2 (one rank has nothing to sync), "
                             f"got {self.world_size}")
        bad = [s for s in self.strategies if s not in BENCH_STRATEGIES]
        if bad or not self.strategies:
            raise InputError(f"--strategies: {bad[0] if bad else 'nothing'!r} is not one of "
                             f"{', '.join(BENCH_STRATEGIES)} (or all)")
        if not self.bucket_mbs and any(make_strategy(s).granularity == "bucket"
                                       for s in self.strategies):
            raise InputError("--bucket-mb: empty grid; give bucket sizes, e.g. 1,10,100")
        for mb in self.bucket_mbs:
            if not (isinstance(mb, (int, float)) and math.isfinite(mb) and mb > 0):
                raise InputError(f"--bucket-mb: {mb!r} is not a number of MB > 0")
        if self.link is not None:
            # InputError if calibrated at another size
            as_link_file(self.link).link.for_world(self.world_size)
        check_precision(self.precision)
        hooks = [parse_comm_hook(h) for h in self.comm_hooks]
        check_backend(hooks, self.backend)
        check_warmup(hooks, self.warmup)
        # the sweep's own checks: hooks need ddp/bucketed, units need fsdp/zero2
        if runs_torch_ddp(self.configs()) and self.warmup < 2:
            raise InputError(f"--warmup {self.warmup}: torch ddp rebuilds its buckets in its "
                             "second step; use --warmup >= 2")
        if self.compute_basis not in COMPUTE_BASES:
            raise InputError(f"--compute-basis: unknown {self.compute_basis!r}; choose "
                             f"{' or '.join(COMPUTE_BASES)}")

    # The world's own fields, read wherever a phase launches ranks or reports them.
    world_size = property(lambda self: self.world.world_size)
    backend = property(lambda self: self.world.backend)
    emulate_hosts = property(lambda self: self.world.emulate_hosts)
    link_gbit = property(lambda self: self.world.link_gbit)
    timeout_s = property(lambda self: self.world.timeout_s)

    @property
    def spec(self) -> ModelSpec:
        return parse_model(self.model).shrunk(**self.shrink)

    @cached_property
    def workload(self) -> Workload:
        """What every rank trains: the --module target, else the preset at batch x seq."""
        if self.module is not None:
            return Workload.from_target(self.module)
        return Workload.preset(self.spec, self.batch, self.seq)

    def tensor_bytes(self) -> list[int]:
        """The bytes of each gradient realrun.DDP all-reduces (the model built once, on CPU)."""
        return tensor_bytes(self.workload.build(self.seed, 0, "cpu")[0])

    def configs(self) -> list[dict]:
        """compute-only first, then every strategy at every bucket size (realrun.steps)."""
        return bench_configs(self.strategies, self.bucket_mbs, self.comm_hooks,
                             self.shard_unit_mb, self.precision)

    @property
    def shards(self) -> bool:
        """Whether a sharded strategy (fsdp, zero2) is validated (realrun.configs.shards)."""
        return shards(self.configs())

    def probes_run(self) -> list[str]:
        """The probes timed in the same rounds (not compared; realrun/workflows/validate/
        probes.py)."""
        if not self.probes:
            return []
        return [name for name in PROBES
                if self.model_copies or name not in HOST_PROBES]  # --free-copies


def bench_payload(s: ValidateSettings, configs: list[dict], probes: list[str] = ()) -> dict:
    """realrun bench's payload for ``configs`` of this validation, with ``probes`` timed in
    the same rounds."""
    return {"workload": s.workload.to_json(), "configs": configs, "precision": s.precision,
            "extras": list(probes),
            "extras_factory": "realrun.workflows.validate.probes:make_probe",
            "steps": s.steps, "warmup": s.warmup, "chunk": s.chunk, "seed": s.seed,
            "optimizer": s.optimizer, "trace_dir": None, "trace_steps": 1, "progress": False}
