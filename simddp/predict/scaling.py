"""Scaling: one model's step, per-GPU throughput and efficiency over a list of GPU counts.

Each GPU count is a cluster of whole nodes (or part of one), each strategy one prediction on
it through the same resolve and predictor as ``simddp sweep``; weak scaling holds the per-GPU
batch, strong scaling ``global_batch`` (docs/CLI.md, ``scale``).

On round numbers: one 10⁸-byte gradient after 30 ms of compute, 100 GB/s inside an 8-GPU
node, 10 GB/s between nodes. At 8 GPUs the all-reduce takes 2·7/8·10⁸ B / 100 GB/s = 1.75 ms,
at 16 (the ring paced by the link between nodes) 2·15/16·10⁸ B / 10 GB/s = 18.75 ms::

    >>> from simddp import Layer, Link, ModelProfile
    >>> toy = ModelProfile("toy", (Layer("w", (10**8,), 0.010, 0.020),))
    >>> answer = scale(toy, Link("ib", 0.0, 10.0), clusters([8, 16], 8, Link("nvl", 0.0, 100.0)),
    ...                ScaleRequest(("ddp",), micro_batch=4))
    >>> [(r.gpus, round(r.step_ms, 2), round(r.efficiency, 4)) for r in answer.rows]
    [(8, 31.75, 1.0), (16, 48.75, 0.6513)]
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

from simddp.errors import InputError
from simddp.inputs.contention import Contention
from simddp.inputs.host import Host
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.inputs.profile import Layer, ModelProfile
from simddp.inputs.topology import Topology
from simddp.planning.grad_dtype import with_grad_dtype
from simddp.planning.registry import ROW, Name
from simddp.planning.sharding import shard_units
from simddp.planning.strategy import (DDP_DEFAULT_BUCKET_MB, MB, SWEEPABLE, Strategy,
                                      make_strategy, mb_to_bytes, with_precision)
from simddp.predict.predictor import Predictor
from simddp.predict.resolve import resolve
from simddp.predict.scenarios import scenario_set
from simddp.result import Result

SCALE_FORMAT = "simddp.scale/1"
# What --gpus means when not given: a node of 8, then whole nodes up to 1024 GPUs.
DEFAULT_GPUS = (8, 16, 32, 64, 128, 256, 512, 1024)
DEFAULT_STRATEGIES = (Name.DDP, Name.FSDP, Name.HSDP)
# Every strategy but no_sync: ddp accumulates as no_sync does (synced on the last micro-step).
SCALABLE = tuple(name for name in SWEEPABLE if name != Name.NO_SYNC)
# A transformer block's index in a module's name: "transformer.blocks.3.attn", "model.layers.3".
_BLOCK = re.compile(r"(?:^|\.)(\d+)(?:\.|$)")
GRAD_ELEM_BYTES = 4   # a profile's gradients are fp32 bytes (simddp/presets/models.py)


@dataclass(frozen=True)
class ScaleRequest:
    """What to scale: the strategies, the per-GPU micro-batch and, for strong scaling, the
    global batch in samples (None: weak scaling). ``seq``: tokens per sample (None: samples/s);
    ``bucket_mb`` None: torch's 25; ``shard_unit_mb`` None: a unit per transformer block."""

    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    micro_batch: int = 8
    seq: int | None = None
    global_batch: int | None = None
    accum_steps: int = 1
    bucket_mb: float | None = None
    shard_unit_mb: float | None = None
    precision: str = "fp32"
    cast_gbps: float | None = None
    grad_dtype: str | None = None

    def __post_init__(self) -> None:
        for flag, v in (("--batch", self.micro_batch), ("--accum-steps", self.accum_steps),
                        ("--seq", self.seq), ("--global-batch", self.global_batch)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise InputError(f"{flag} must be an integer >= 1, got {v!r}")
        if self.global_batch is not None and self.accum_steps != 1:
            raise InputError("--accum-steps: with --global-batch the accumulation steps "
                             "follow from it; give one or the other")
        if not self.strategies:
            raise InputError(f"--strategies: empty list; choose from {', '.join(SCALABLE)}")
        for name in self.strategies:
            if name not in SCALABLE:
                raise InputError(f"--strategies: unknown {name!r}; choose from "
                                 f"{', '.join(SCALABLE)}")
        if self.bucket_mb is not None:
            mb_to_bytes(self.bucket_mb)
        if self.shard_unit_mb is not None:
            mb_to_bytes(self.shard_unit_mb, "--shard-unit-mb")

    @property
    def weak(self) -> bool:
        return self.global_batch is None

    def accum_at(self, gpus: int) -> int:
        """Micro-steps per optimizer step at ``gpus`` GPUs: fixed under weak scaling; under
        strong scaling the global batch over GPUs × micro-batch, which must divide it."""
        if self.weak:
            return self.accum_steps
        per_step = gpus * self.micro_batch
        if self.global_batch % per_step:
            raise InputError(f"--global-batch {self.global_batch} is not a multiple of {gpus} "
                             f"GPUs × --batch {self.micro_batch} = {per_step} (the "
                             "accumulation steps must be whole)")
        return self.global_batch // per_step


@dataclass(frozen=True)
class ScaleRow:
    """One strategy at one GPU count: its optimizer step and what a GPU gets done per second;
    ``efficiency`` is per-GPU throughput over the strategy's own at the smallest count."""

    strategy: str
    gpus: int
    nodes: int
    gpus_per_node: int
    accum_steps: int
    micro_batch: int
    global_batch: int
    step_ms: float
    exposed_comm_ms: float
    compute_ms: float
    collectives: int
    samples_per_s_per_gpu: float
    tokens_per_s_per_gpu: float | None
    efficiency: float


@dataclass(frozen=True)
class ScaleSetup:
    """Everything the rows depend on, as the output states it."""

    model: str
    params: int
    device: str | None
    micro_batch: int
    seq: int | None
    global_batch: int | None
    accum_steps: int
    gpus_per_node: int
    intra_link: str
    inter_link: str
    inter_alpha_us: float
    inter_busbw_gbps: float
    contention: Contention
    grad_dtype: str | None
    precision: str
    # per strategy: what it runs with (its bucket cap or units, how it accumulates)
    strategies: dict[str, str] = field(default_factory=dict)

    @property
    def weak(self) -> bool:
        return self.global_batch is None


@dataclass(frozen=True)
class ScaleAnswer:
    setup: ScaleSetup
    rows: tuple[ScaleRow, ...]

    def to_json(self) -> dict:
        """The answer as one JSON document (``--format json``, ``scale.json``)."""
        setup = asdict(self.setup)
        c = self.setup.contention
        setup["contention"] = {"compute": c.compute, "comm": c.comm, "source": c.source}
        setup["scaling"] = "weak" if self.setup.weak else "strong"
        return {"format": SCALE_FORMAT, "setup": setup,
                "rows": [asdict(r) for r in self.rows]}


def clusters(gpus: Sequence[int], gpus_per_node: int, intra: Link | LinkFile
             ) -> list[Topology]:
    """One cluster per GPU count (:func:`layouts`) on the ``intra`` link inside a node.

        >>> [(t.nodes, t.gpus_per_node) for t in clusters([4, 8, 32], 8, Link("nvl", 0, 100))]
        [(1, 4), (1, 8), (4, 8)]
    """
    found = as_link_file(intra)
    return [Topology(nodes, per_node, found.link, intra_host=found.host)
            for nodes, per_node in layouts(gpus, gpus_per_node)]


def layouts(gpus: Sequence[int], gpus_per_node: int) -> list[tuple[int, int]]:
    """(nodes, GPUs a node) of each count, rising: whole nodes of ``gpus_per_node``, or part
    of one node for a count under it; InputError for a count over a node that does not
    fill whole nodes."""
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) \
            or gpus_per_node < 1:
        raise InputError(f"--gpus-per-node must be an integer >= 1, got {gpus_per_node!r}")
    out = []
    for n in check_gpus(gpus):
        if n > gpus_per_node and n % gpus_per_node:
            raise InputError(f"--gpus {n}: not a multiple of --gpus-per-node {gpus_per_node} "
                             "(a count over one node fills whole nodes)")
        out.append((max(1, n // gpus_per_node), min(n, gpus_per_node)))
    return out


def check_gpus(gpus: Sequence[int]) -> list[int]:
    """GPU counts, each an integer >= 2, sorted, once each; InputError otherwise."""
    counts = list(gpus)
    for n in counts:
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise InputError(f"--gpus: {n!r} must be an integer >= 2 (a world of GPUs)")
    if not counts:
        raise InputError("--gpus: empty list (e.g. 8,16,32)")
    return sorted(set(counts))


def by_block(profile: ModelProfile) -> ModelProfile | None:
    """``profile`` with each transformer block's layers (names sharing a block index), and
    each run of layers outside a block, merged into one layer: FSDP's units when a
    transformer is wrapped block by block. None where no block holds more than one layer.

        >>> from simddp import build_profile, parse_model
        >>> blocks = by_block(build_profile(parse_model("transformer-small")))
        >>> len(blocks.layers), [layer.name for layer in blocks.layers][:2]
        (14, ['embed', 'blocks.0'])
    """
    runs: list[tuple[str | None, list]] = []
    for layer in profile.layers:
        m = _BLOCK.search(layer.name)
        key = None if m is None else layer.name[:m.end(1)].lstrip(".")
        if runs and runs[-1][0] == key:
            runs[-1][1].append(layer)
        else:
            runs.append((key, [layer]))
    if not any(key is not None and len(layers) > 1 for key, layers in runs):
        return None
    merged = []
    for key, layers in runs:
        if len(layers) == 1 and key is None:
            merged.append(layers[0])
            continue
        name = key or f"{layers[0].name}…{layers[-1].name}"
        merged.append(Layer(name, tuple(n for x in layers for n in x.grad_bytes),
                            sum(x.forward_s for x in layers), sum(x.backward_s for x in layers),
                            tuple(n for x in layers for n in x.grad_names)
                            if all(x.grad_names or not x.grad_bytes for x in layers) else (),
                            tuple(t for x in layers for t in x.grad_ids)))
    return replace(profile, layers=tuple(merged), ready_order=None)


def strategy_at(name: str, accum_steps: int, request: ScaleRequest) -> Strategy:
    """The Strategy ``name`` runs as at ``accum_steps`` micro-steps: ddp syncs the last only
    (``no_sync()``, as the trainers accumulate); every other strategy syncs each (FSDP's)."""
    bucket_mb = request.bucket_mb or DDP_DEFAULT_BUCKET_MB
    if name == Name.DDP and accum_steps > 1:
        s = make_strategy(Name.NO_SYNC, bucket_mb, accum_steps)
    elif ROW[name].sharded:
        s = make_strategy(name, accum_steps=accum_steps, shard_unit_mb=request.shard_unit_mb)
    elif ROW[name].granularity == "bucket":
        s = make_strategy(name, bucket_mb, accum_steps)
    else:
        s = make_strategy(name, accum_steps=accum_steps)
    return with_grad_dtype(with_precision(s, request.precision, request.cast_gbps),
                           request.grad_dtype)


def sharded_profile(profile: ModelProfile, request: ScaleRequest) -> ModelProfile:
    """What a sharded strategy runs on: a unit per transformer block (:func:`by_block`),
    unless ``--shard-unit-mb`` groups the layers, or the model names no blocks."""
    blocks = by_block(profile) if request.shard_unit_mb is None else None
    return profile if blocks is None else blocks


def strategy_notes(profile: ModelProfile, request: ScaleRequest) -> dict[str, str]:
    """One line per strategy: the bucket cap or the units it ran with, and how it
    accumulates where it does."""
    accumulating = not request.weak or request.accum_steps > 1
    notes = {}
    for name in request.strategies:
        row = ROW[name]
        if row.sharded:
            sharded = sharded_profile(profile, request)
            unit = request.shard_unit_mb
            units = shard_units(sharded, None if unit is None else mb_to_bytes(unit))
            how = (f"--shard-unit-mb {unit:g}" if unit is not None
                   else "a unit per layer (no transformer blocks)" if sharded is profile
                   else "a unit per transformer block, one for the layers before and after")
            text = (f"{how}: {len(units)} units, the largest "
                    f"{max(u.nbytes for u in units) / MB:.1f} MB")
            if accumulating:
                text += "; gathers and reduce-scatters every micro-step"
        elif row.granularity == "bucket":
            mb = request.bucket_mb or DDP_DEFAULT_BUCKET_MB
            text = (f"bucket_cap_mb {mb:g}" + (" (torch's default; --bucket-mb)"
                                                if request.bucket_mb is None else ""))
            if accumulating:
                text += ("; accumulates under no_sync(), synced on the last micro-step"
                         if name == Name.DDP else "; synced every micro-step")
        else:
            text = row.help
        notes[name] = text
    return notes


def scale(profile: ModelProfile, link: Link | LinkFile, cluster_list: Sequence[Topology],
          request: ScaleRequest, *, host: Host | None = None, contention=None) -> ScaleAnswer:
    """Each strategy of ``request`` on each cluster (``link``: the link between nodes),
    resolved and predicted as ``simddp sweep`` does: one row per strategy and GPU count,
    strategies in the request's order, counts rising."""
    topologies = sorted(cluster_list, key=lambda t: t.world_size)
    if not topologies:
        raise InputError("--gpus: empty list (e.g. 8,16,32)")
    accum = {t.world_size: request.accum_at(t.world_size) for t in topologies}  # check first
    found = as_link_file(link)
    kinds = {ROW[name].sharded for name in request.strategies}
    profiles = {sharded: sharded_profile(profile, request) if sharded else profile
                for sharded in kinds}
    predicted: dict[tuple[str, int], Result] = {}
    point = None
    for topo in topologies:
        n = topo.world_size
        predictors = {}
        for sharded, prof in profiles.items():
            point = resolve(prof, found, n, host=host, topology=topo, contention=contention)
            predictors[sharded] = Predictor(scenario_set(point, ranges=False))
        for name in request.strategies:
            predictor = predictors[ROW[name].sharded]
            predicted[name, n] = predictor.predict(strategy_at(name, accum[n], request))
    rows = []
    for name in request.strategies:
        first = None
        for topo in topologies:
            n = topo.world_size
            r = predicted[name, n]
            samples_s = request.micro_batch * accum[n] / r.step_s
            first = first or samples_s
            rows.append(ScaleRow(
                name, n, topo.nodes, topo.gpus_per_node, accum[n], request.micro_batch,
                n * request.micro_batch * accum[n], r.step_s * 1e3, r.exposed_comm_s * 1e3,
                r.compute_s * 1e3, r.collectives, samples_s,
                None if request.seq is None else samples_s * request.seq, samples_s / first))
    inter = found.link
    setup = ScaleSetup(
        profile.name, profile.grad_total_bytes // GRAD_ELEM_BYTES, profile.device,
        request.micro_batch, request.seq, request.global_batch, request.accum_steps,
        max(t.gpus_per_node for t in topologies), topologies[-1].intra.name, inter.name,
        inter.alpha_s * 1e6, inter.busbw_gbps, point.contention, request.grad_dtype,
        request.precision, strategy_notes(profile, request))
    return ScaleAnswer(setup, tuple(rows))
