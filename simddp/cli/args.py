"""Flags every subcommand shares: which model, which link, and list parsing with clear errors.

Defaults: transformer-small on an A100 (batch 8 × seq 1024) over eth-100g, 2 ranks, where
all-reduce and backward take comparable time, so the strategies differ.
"""
from __future__ import annotations

import argparse
import math
import os
from dataclasses import replace

from simddp.errors import InputError
from simddp.inputs.host import Host
from simddp.inputs.io import load_host, load_levels, load_link_file, load_profile, read_json
from simddp.inputs.link import Link
from simddp.inputs.link_file import Levels, LinkFile, as_link_file
from simddp.inputs.profile import ModelProfile
from simddp.inputs.topology import Topology
from simddp.planning.grad_dtype import GRAD_DTYPES
from simddp.planning.hooks import HOOK_HELP, CommHook, parse_comm_hook
from simddp.planning.registry import TORCH_FSDP
from simddp.planning.sharding import PRECISIONS, cast_rate
from simddp.predict.resolve import CHOICES as CONTENTION_CHOICES
from simddp.presets import DEFAULT_LINK, DEVICES, LINKS, MODEL_HELP, build_profile, get_link
from simddp.presets.architecture import Architecture
from simddp.presets.devices import COMPUTE_DTYPES, get_device
from simddp.presets.hf_config import describe_model, is_file, is_spec, load_config

DEFAULT_MODEL = "transformer-small"
DEFAULT_SEQ = 1024   # --seq of a preset or a profile; a model config's default is its own


def add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--model", default=DEFAULT_MODEL, help=f"{MODEL_HELP} (default %(default)s)")
    g.add_argument("--device", default="a100",
                   help=f"compute device for preset times: {', '.join(DEVICES)} (default %(default)s)")
    g.add_argument("--batch", type=int, default=8, help="samples per rank (default %(default)s)")
    g.add_argument("--seq", type=int, default=None,
                   help=f"tokens per sample (default {DEFAULT_SEQ}; a model config or spec: "
                        "its max positions)")
    g.add_argument("--efficiency", type=float, default=None,
                   help="fraction of the device's peak achieved (default: the device's, 0.4 on GPUs)")
    g.add_argument("--optimizer", default="adam", choices=("adam", "sgd"),
                   help="optimizer whose step time is modelled (default %(default)s)")
    g.add_argument("--compute-dtype", default=None, choices=tuple(COMPUTE_DTYPES),
                   help="what the roofline computes in: bf16 or fp16 (the device's tensor-core "
                        "peak, 2-byte activations) or fp32 (its fp32 peak, 4-byte ones) "
                        "(default: the device's own, 16 bits on GPUs, fp32 on the cpu)")
    g.add_argument("--checkpointing", action="store_true",
                   help="activation checkpointing: each block's forward runs again in its "
                        "backward")
    for what in ("forward", "backward", "optimizer"):
        g.add_argument(f"--{what}-ms", type=float, default=None,
                       help=f"rescale total {what} time to this many ms (keeps per-layer shares)")
    g.add_argument("--step-ms", type=float, default=None, metavar="MS",
                   help="a measured one-GPU training step (forward, backward, optimizer; no "
                        "communication) of this model and batch: every compute time is scaled "
                        "by one factor to add up to it")


def add_link_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("link")
    g.add_argument("--link", default=DEFAULT_LINK,
                   help=f"{', '.join(LINKS)} or a link FILE.json from python -m calibrate "
                        "(default %(default)s)")
    g.add_argument("--alpha-us", type=float, default=None, help="override α, µs per all-reduce")
    g.add_argument("--busbw-gbps", type=float, default=None,
                   help="override bus bandwidth in GB/s (1e9 bytes/s), as nccl-tests prints it")
    g.add_argument("--world-size", type=int, default=None,
                   help="ranks (default 2, or --nodes × --gpus-per-node)")
    g.add_argument("--rescale-link", action="store_true",
                   help="accept a calibrated link at another world size, by the ring law")
    c = p.add_argument_group("two-level cluster (docs/TOPOLOGY.md)")
    c.add_argument("--nodes", type=int, default=None,
                   help="nodes; --link is then the link between nodes (default: one link)")
    c.add_argument("--gpus-per-node", type=int, default=None, help="GPUs (ranks) per node")
    c.add_argument("--intra-link", default=None,
                   help="the link inside a node: a preset or a link FILE.json (default: the "
                        "--link file's levels when calibrate measured them, else "
                        "nvlink-<device> where that preset exists)")
    c.add_argument("--intra-alpha-us", type=float, default=None, help="override its α, µs")
    c.add_argument("--intra-busbw-gbps", type=float, default=None,
                   help="override its bus bandwidth, GB/s")


def add_contention_arg(p: argparse.ArgumentParser) -> None:
    """--contention: the assumption that decides overlapped rows, in the user's hands."""
    g = p.add_argument_group("contention (docs/CLI.md)")
    g.add_argument("--contention", default="auto", metavar="WHICH",
                   help="how much compute and communication slow each other while they "
                        "overlap: auto (measured, where the profile or the link file has it; "
                        "else the published GPU figures where the compute runs on a GPU, "
                        "none on a CPU), none, published, or COMPUTE,COMM factors, e.g. "
                        "1.2,2.0 (default auto)")


def contention_choice(text: str):
    """--contention as :func:`simddp.predict.resolve.resolve` takes it: None for auto, the
    name, or (compute, comm) factors; a one-line InputError otherwise.

        >>> contention_choice("auto"), contention_choice("none"), contention_choice("1.2,2")
        (None, 'none', (1.2, 2.0))
    """
    text = text.strip()
    if text == "auto":
        return None
    if text in CONTENTION_CHOICES:
        return text
    try:
        factors = tuple(float(v) for v in text.split(","))
    except ValueError:
        factors = ()
    if len(factors) != 2 or not all(math.isfinite(v) and v >= 1.0 for v in factors):
        raise InputError(f"--contention: {text!r} is none of auto, "
                         f"{', '.join(CONTENTION_CHOICES)} or COMPUTE,COMM factors >= 1 "
                         "(e.g. 1.2,2.0)")
    return factors


def add_host_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("host costs")
    g.add_argument("--host", metavar="FILE", default=None,
                   help="the DDP implementations' host costs (hooks, copies): a simddp.host/1 "
                        "file or a profile with a host_costs section (default: the --model "
                        "profile's section, if any; presets have none)")
    g.add_argument("--free-host", action="store_true",
                   help="charge no host costs even if the profile has them")


def add_beyond_ddp_args(p: argparse.ArgumentParser, one_hook: bool = False) -> None:
    """--comm-hook and --shard-unit-mb: compression for ddp/bucketed, units for fsdp/zero2."""
    g = p.add_argument_group("comm hooks and sharding")
    g.add_argument("--comm-hook", default=None, metavar="HOOK" if one_hook else "LIST",
                   help=f"torch DDP comm hook{'' if one_hook else 's, comma-separated'} for "
                        f"ddp and bucketed: {HOOK_HELP} (default none)")
    g.add_argument("--shard-unit-mb", type=float, default=None, metavar="MB",
                   help="fsdp/zero2: group layers into units of at least this many MB "
                        "(2^20 bytes) (default: one layer per unit)")


def add_precision_arg(g) -> None:
    """--precision, as realrun's, and --grad-dtype (simulate and sweep)."""
    g.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="as realrun's: with fsdp and zero2, bf16 is FSDP2's "
                        "MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): "
                        "all-gathers in bf16 (half the bytes) plus a cast of the shard each; "
                        "other strategies (autocast) move the same fp32 bytes "
                        "(default %(default)s)")
    g.add_argument("--grad-dtype", default="fp32", choices=tuple(GRAD_DTYPES),
                   help="the dtype gradients are reduced in: fp32 as torch DDP under "
                        "autocast; bf16 or fp16 as Megatron-LM and DeepSpeed run 16-bit "
                        "gradients (all-reduces move half the bytes, --bucket-mb counts "
                        "them), and FSDP2's reduce_dtype for fsdp/zero2's reduce-scatters "
                        "(default %(default)s)")


def casts_of(args: argparse.Namespace, host: Host | None) -> tuple[float | None, str]:
    """(GB/s the mixed-precision casts are timed at, where it comes from), as
    :func:`simddp.planning.sharding.cast_rate` says: the measured host's copy rate, else the preset
    device's memory bandwidth (not for a profile file), else not modelled."""
    copy_gbps = None if host is None else host.costs(TORCH_FSDP).copy_gbps
    device = None if _is_profile_arg(args.model) else get_device(args.device)
    return cast_rate(copy_gbps, device and device.mem_gbps, device.name if device else "")


def parse_hooks(text: str | None) -> list[CommHook]:
    """'fp16,powersgd:2' -> CommHooks; None or '' -> []; one-line InputError otherwise."""
    if not text:
        return []
    return [parse_comm_hook(item) for item in text.split(",") if item.strip()] or \
        [parse_comm_hook(text)]


def _is_file_arg(text: str) -> bool:
    return text.endswith(".json") or os.sep in text or os.path.exists(text)


def _is_profile_arg(text: str) -> bool:
    """Whether --model names a profile file: a file that is no model config."""
    return not is_spec(text) and is_file(text) and load_config(text) is None


def seq_of(args: argparse.Namespace, model) -> int:
    """--seq, else the model's own: a config's or spec's max positions, else 1024."""
    if args.seq is not None:
        return args.seq
    return model.max_positions if isinstance(model, Architecture) else DEFAULT_SEQ


def resolve_model(args: argparse.Namespace) -> ModelProfile:
    if ".py:" in args.model or args.model.endswith(".py"):
        raise InputError(f"--model {args.model}: a Python file is a torch model, not a "
                         f"profile; measure it first (python -m realrun profile --module "
                         f"{args.model if ':' in args.model else args.model + ':FN'} --out "
                         "prof.json), then pass --model prof.json")
    model = describe_model(args.model)   # its error names every form --model takes
    dtype, checkpointing = getattr(args, "compute_dtype", None), getattr(args, "checkpointing",
                                                                         False)
    if model is None:
        for flag, given in (("--compute-dtype", dtype), ("--checkpointing", checkpointing)):
            if given:
                raise InputError(f"{flag}: a measured profile ({args.model}) has its own "
                                 "times; it applies to a preset, a model config or a spec")
        profile = load_profile(args.model)
    else:
        profile = build_profile(model, args.device, args.batch, seq_of(args, model),
                                args.efficiency, args.optimizer, dtype, checkpointing)
    ms = {k: getattr(args, f"{k}_ms") for k in ("forward", "backward", "optimizer")}
    for k, v in ms.items():
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise InputError(f"--{k}-ms must be a number >= 0, got {v!r}")
    step_ms = getattr(args, "step_ms", None)
    if step_ms is not None:
        if any(v is not None for v in ms.values()):
            raise InputError("--step-ms scales forward, backward and optimizer together; "
                             "give it or --forward-ms/--backward-ms/--optimizer-ms, not both")
        return one_gpu_step(profile, step_ms)
    return profile.scaled(*(None if v is None else v / 1e3 for v in ms.values()))


def one_gpu_step(profile: ModelProfile, step_ms: float) -> ModelProfile:
    """``profile`` with forward, backward and optimizer scaled by one factor so that they add
    up to ``step_ms``, a step measured on one GPU (no communication), as trace import
    anchors a traced step (simddp/ingest/trace/closure.py)."""
    if not (isinstance(step_ms, (int, float)) and math.isfinite(step_ms) and step_ms > 0):
        raise InputError(f"--step-ms must be a number > 0, got {step_ms!r}")
    total_s = profile.forward_s + profile.backward_s + profile.optimizer_s
    if total_s <= 0:
        raise InputError(f"--step-ms: model {profile.name!r} has no compute time to scale")
    k = step_ms / 1e3 / total_s
    return profile.scaled(**{name: getattr(profile, name) * k for name in
                             ("forward_s", "backward_s") if getattr(profile, name)},
                          optimizer_s=profile.optimizer_s * k)


def resolve_link(args: argparse.Namespace) -> LinkFile:
    """--link with --alpha-us/--busbw-gbps, checked for --world-size (resolve_world first):
    the link, and what its file measured beside it."""
    found = _link(args.link, args.alpha_us, args.busbw_gbps, "")
    return replace(found, link=found.link.for_world(args.world_size, rescale=args.rescale_link))


def _link(name: str | Link | LinkFile, alpha_us: float | None, busbw_gbps: float | None,
          prefix: str) -> LinkFile:
    """The named preset or file (or a Link), with the --[prefix]alpha-us/busbw-gbps overrides."""
    if isinstance(name, (Link, LinkFile)):
        found = as_link_file(name)
    else:
        found = load_link_file(name) if _is_file_arg(name) else LinkFile(get_link(name))
    for flag, v in ((f"--{prefix}alpha-us", alpha_us), (f"--{prefix}busbw-gbps", busbw_gbps)):
        alpha = flag.endswith("alpha-us")
        if v is not None and not (math.isfinite(v) and v >= 0 and (v > 0 or alpha)):
            raise InputError(f"{flag} must be a number {'>= 0' if alpha else '> 0'}, got {v!r}")
    return replace(found, link=found.link.with_overrides(alpha_us, busbw_gbps))


def resolve_world(args: argparse.Namespace) -> Topology | None:
    """The cluster the flags describe; sets ``args.world_size`` (default: the link file's own
    world size, else 2; or nodes × GPUs per node). None: one link among all ranks, as without
    --nodes/--gpus-per-node."""
    nodes, gpus = getattr(args, "nodes", None), getattr(args, "gpus_per_node", None)
    if nodes is None and gpus is None:
        if getattr(args, "intra_link", None) is not None:
            raise InputError("--intra-link: describe the cluster with --nodes and "
                             "--gpus-per-node too")
        if args.world_size is None:
            args.world_size = _link_world_size(args.link) or 2
        return None
    if nodes is None or gpus is None:
        raise InputError("--nodes and --gpus-per-node go together (world = nodes × GPUs)")
    levels = _levels_of(args.link) if args.intra_link is None else None
    if levels is not None:  # calibrated per level: both links from the file (docs/TOPOLOGY.md)
        topo = _on_levels(levels, nodes, gpus, args)
    else:
        device = getattr(args, "device", None)
        intra_name = args.intra_link or f"nvlink-{device}"
        if args.intra_link is None and intra_name not in LINKS:
            raise InputError(f"--intra-link: no NVLink preset for --device {device}; give "
                             f"the link inside a node ({', '.join(LINKS)} or a FILE.json)")
        intra = _link(intra_name, args.intra_alpha_us, args.intra_busbw_gbps, "intra-")
        topo = Topology(nodes, gpus, intra.link, intra_host=intra.host)
    if args.world_size not in (None, topo.world_size):
        raise InputError(f"--world-size {args.world_size} is not --nodes {nodes} × "
                         f"--gpus-per-node {gpus} = {topo.world_size}")
    args.world_size = topo.world_size
    return topo


def _link_world_size(link_arg: str) -> int | None:
    """The world size a --link file was measured at (None: a preset, or not recorded)."""
    return load_link_file(link_arg).link.world_size if _is_file_arg(link_arg) else None


def _levels_of(link_arg: str) -> Levels | None:
    """The --link file's levels section (calibrate on a two-level world), if any."""
    return load_levels(link_arg) if _is_file_arg(link_arg) else None


def _on_levels(levels: Levels, nodes: int, gpus: int, args: argparse.Namespace) -> Topology:
    """The cluster on a link file's levels: the intra link (with --intra-* overrides) and the
    hierarchical inter-node phase's link. --alpha-us/--busbw-gbps describe the link between
    nodes by hand, so they replace the levels' inter fit as well as the ring's."""
    intra = _link(levels.intra, args.intra_alpha_us, args.intra_busbw_gbps, "intra-")
    by_hand = args.alpha_us is not None or args.busbw_gbps is not None
    topo = levels.topology(nodes, gpus, intra.link, where=f"--link {args.link}")
    return replace(topo, inter=None, inter_host=None) if by_hand else topo


def resolve_host(args: argparse.Namespace) -> Host | None:
    """--host FILE; else the --model profile's host_costs; else the host fields of an old
    --link file (moved there, with a note on stderr); else None (free)."""
    if args.free_host:
        return None
    if args.host is not None:
        host = load_host(args.host)
        if host is None:
            raise InputError(f"--host {args.host}: the file has no host costs")
        return host
    if _is_profile_arg(args.model):
        host = load_host(args.model)
        if host is not None:
            return host
    return None


def resolve_cpu_note(args: argparse.Namespace) -> str:
    """The caution of simddp/rig/cpu_share.py for a measured profile's host (its ``measured``
    section), '' for a preset or a profile measured where Gloo's threads had cores."""
    if not _is_profile_arg(args.model):
        return ""
    from simddp.rig.cpu_share import section_note   # a measured profile's host only

    doc = read_json(args.model)
    return section_note(doc.get("measured") if isinstance(doc, dict) else None)


def parse_positive_floats(text: str, flag: str) -> list[float]:
    """'1,10,100' -> [1.0, 10.0, 100.0]; one-line InputError on anything else."""
    values = []
    for item in text.split(","):
        try:
            v = float(item)
        except ValueError:
            raise InputError(f"{flag}: {item.strip()!r} is not a number (expected e.g. 1,10,100)") from None
        if not math.isfinite(v) or v <= 0:
            raise InputError(f"{flag}: {item.strip()!r} must be a finite number > 0")
        values.append(v)
    return values


def parse_names(text: str, allowed: tuple[str, ...], flag: str) -> list[str]:
    """'naive,ddp' or 'all' -> names, each checked against ``allowed``."""
    if text.strip() == "all":
        return list(allowed)
    names = [t.strip() for t in text.split(",") if t.strip()]
    for name in names:
        if name not in allowed:
            raise InputError(f"{flag}: unknown {name!r}; choose from {', '.join(allowed)} or all")
    if not names:
        raise InputError(f"{flag}: empty list; choose from {', '.join(allowed)} or all")
    return names
