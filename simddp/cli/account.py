"""Back-of-the-envelope accounting: memory per device, FSDP sharding, bytes on the wire.

    python -m simddp account --model ffn-126x16384x53248 --batch 1 --seq 1024 --comm-dtype bf16
    python -m simddp account --model transformer-xl --world-size 8 --link ib-hdr --format json
    python -m simddp account --model mlp-40x4096 --world-size 1 --master bf16 --optim sgd
    python -m simddp account --model transformer-xl --world-size 8 --comm-hook fp16,powersgd:2

Memory: parameters, gradients and optimizer state at the chosen precisions, plus the
activations each layer saves for backward (no checkpointing; docs/ACCOUNT.md lists what is
saved). FSDP / ZeRO-3 shards parameters, gradients and optimizer state over N devices but
not activations, and holds one unit (a block) unsharded while it computes; the command
finds the smallest N that fits in --device-mem-gb (GB = 1e9 bytes) or says none does.
Communication: per optimizer step per rank for every strategy (fsdp and zero2's all-gathers
and reduce-scatters, and ddp/bucketed through each --comm-hook too), from ``simddp.plan``'s
collectives and each kind's α–β law; then the model states per rank of the same plans
(simddp/analytic/states.py), and the closed-form optimal bucket size
(simddp.analytic.optimal_bucket). --world-size 1 is allowed: memory only, no communication.
Bad input: one line on stderr, exit code 2.
"""
from __future__ import annotations

import argparse
import json
import math

from simddp.analytic.memory import (ATTENTION, DTYPE_BYTES, GB, OPTIM_STATES, WEIGHT_COPIES, GiB,
                                   Precision, memory_report)
from simddp.analytic.optimal_bucket import NO_LATENCY, closed_form_optimum
from simddp.cost import COLLECTIVE_KINDS, pick_curves
from simddp.analytic.states import PerParam, state_bytes
from simddp.analytic.traffic import account_strategies, at_dtype, comm_rows
from simddp.cli.args import (DEFAULT_MODEL, DEFAULT_SEQ, add_beyond_ddp_args,
                                    add_link_args, parse_hooks, resolve_link,
                                    resolve_world, seq_of)
from simddp.errors import InputError
from simddp.inputs.io import load_profile
from simddp.planning.plans import plan
from simddp.planning.sharding import shard_ranks
from simddp.presets import DEVICES, MODEL_HELP, build_profile
from simddp.presets.hf_config import describe_model
from simddp.presets.models import ModelSpec
from simddp.report.recommendation import fmt_bytes
from simddp.report.table import fmt_sig
from simddp.planning.registry import Name
from simddp.planning.strategy import DDP_DEFAULT_BUCKET_MB, make_strategy, mb_to_bytes
from simddp.inputs.topology import level_load

HELP = "memory per device, FSDP sharding, communication volume, optimal bucket size"


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--model", default=DEFAULT_MODEL, help=f"{MODEL_HELP} (default %(default)s)")
    g.add_argument("--batch", type=int, default=8, help="samples per rank (default %(default)s)")
    g.add_argument("--seq", type=int, default=None,
                   help=f"tokens per sample (default {DEFAULT_SEQ}; a model config or spec: "
                        "its max positions)")
    g.add_argument("--attention", default="flash",
                   help=f"{'|'.join(ATTENTION)}: what attention saves (default %(default)s)")
    g.add_argument("--device", default="a100", help=f"{', '.join(DEVICES)}: backward time for "
                   "the bucket optimum only (default %(default)s)")
    g.add_argument("--efficiency", type=float, default=None, help="fraction of device peak")
    g.add_argument("--backward-ms", type=float, default=None,
                   help="rescale total backward time (bucket optimum only)")
    dtypes = "|".join(DTYPE_BYTES)
    g = p.add_argument_group("precision")
    g.add_argument("--master", default="fp32", help=f"{dtypes}: stored parameters (default %(default)s)")
    g.add_argument("--grad", "--grad-dtype", dest="grad", default="fp32",
                   help=f"{dtypes}: gradients, and the dtype DDP's all-reduces and FSDP's "
                        "reduce-scatters move (sweep and simulate's --grad-dtype) "
                        "(default %(default)s)")
    g.add_argument("--optim", default="adam", help=f"{'|'.join(OPTIM_STATES)}: optimizer state "
                   "(adam: 2 moments, sgd-momentum: 1, sgd: none; default %(default)s)")
    g.add_argument("--optim-dtype", default="fp32", help=f"{dtypes}: optimizer state (default %(default)s)")
    g.add_argument("--weight-copy", default="none",
                   help=f"{'|'.join(WEIGHT_COPIES)}: a low-precision copy of all weights kept "
                        "through the step (Megatron/apex O2; autocast's saved casts) (default none)")
    g.add_argument("--act-dtype", default="bf16", help=f"{dtypes}: activations (default %(default)s)")
    g.add_argument("--comm-dtype", default=None,
                   help=f"{dtypes}: gradient all-reduce and FSDP traffic (default: as --grad)")
    g = p.add_argument_group("sharding and communication")
    g.add_argument("--device-mem-gb", type=float, default=80.0,
                   help="memory per device in GB = 1e9 bytes (default %(default)s)")
    g.add_argument("--bucket-mb", type=float, default=DDP_DEFAULT_BUCKET_MB,
                   help="bucket cap for bucketed/ddp/no_sync, MB = 2**20 bytes (default %(default)s)")
    g.add_argument("--accum-steps", type=int, default=1,
                   help="micro-steps per optimizer step (default %(default)s)")
    add_beyond_ddp_args(p)
    add_link_args(p)  # --world-size 1 is accepted here: memory only
    p.add_argument("--format", default="text", choices=("text", "json"),
                   help="text tables or one JSON document on stdout (default %(default)s)")


def _load(args: argparse.Namespace):
    """(preset spec or None, profile with times) for --model; sets ``args.seq`` where it
    was left to the model (a config's or spec's max positions, else 1024)."""
    model = describe_model(args.model)   # its error names every form --model takes
    args.seq = DEFAULT_SEQ if model is None else seq_of(args, model)
    if model is None:
        return None, load_profile(args.model)
    optimizer = "adam" if args.optim.startswith("adam") else "sgd"
    profile = build_profile(model, args.device, args.batch, args.seq, args.efficiency, optimizer)
    spec = model if isinstance(model, ModelSpec) else None   # activations: presets only
    if args.backward_ms is not None:
        if not (math.isfinite(args.backward_ms) and args.backward_ms >= 0):
            raise InputError(f"--backward-ms must be a number >= 0, got {args.backward_ms!r}")
        profile = profile.scaled(backward_s=args.backward_ms / 1e3)
    return spec, profile


def account(args: argparse.Namespace) -> dict:
    """Everything the command prints, as one JSON-ready dict."""
    prec = Precision(args.master, args.grad, args.optim, args.optim_dtype, args.weight_copy,
                     args.act_dtype, args.comm_dtype)
    mb_to_bytes(args.bucket_mb)   # validate before any work
    if not isinstance(args.accum_steps, int) or args.accum_steps < 1:
        raise InputError(f"--accum-steps must be an integer >= 1, got {args.accum_steps!r}")
    hooks = parse_hooks(args.comm_hook)
    if args.shard_unit_mb is not None:
        mb_to_bytes(args.shard_unit_mb, "--shard-unit-mb")
    topology = resolve_world(args)
    spec, profile = _load(args)
    mem = memory_report(spec or profile, prec, args.batch, args.seq, args.world_size,
                        args.device_mem_gb, args.attention)
    out = {"format": "simddp.account/1", "model": args.model, "batch": args.batch,
           "seq": args.seq, "precision": {"master": prec.master, "grad": prec.grad,
                                          "optim": prec.optim, "optim_dtype": prec.optim_dtype,
                                          "weight_copy": prec.weight_copy, "act": prec.act,
                                          "comm": prec.comm or prec.grad},
           "attention": args.attention, "memory": mem, "communication": None,
           "states": None, "bucket_optimum": None}
    if args.world_size >= 2:
        link_file = resolve_link(args)
        link = link_file.link
        out["link"] = {"name": link.name, "alpha_s": link.alpha_s, "busbw_gbps": link.busbw_gbps}
        curves = curve_kinds(link, args.world_size)
        if curves:   # the times below come from them, not from that α and busbw
            out["link"]["curves"] = curves
        out["communication"] = {
            "world_size": args.world_size, "bucket_mb": args.bucket_mb,
            "accum_steps": args.accum_steps, "comm_hooks": [h.name for h in hooks],
            "shard_unit_mb": args.shard_unit_mb,
            "rows": comm_rows(profile, link, args.world_size, prec, args.bucket_mb,
                              args.accum_steps, hooks, args.shard_unit_mb)}
        if topology is not None:
            out["communication"]["levels"] = level_rows(
                topology, link_file, at_dtype(profile, prec.comm_bytes), args.bucket_mb,
                args.shard_unit_mb)
        # the same plans' model states: what each strategy keeps per rank (no activations);
        # on two levels hsdp's too, sharded over a node's ranks
        listed = account_strategies(args.bucket_mb, 1, hooks, args.shard_unit_mb)
        if topology is not None:
            listed.append(make_strategy(Name.HSDP, shard_unit_mb=args.shard_unit_mb))
        out["states"] = [{"strategy": s.name, **state_bytes(
            plan(profile, s), shard_ranks(s, args.world_size, topology and topology.gpus_per_node),
            PerParam.of(prec))} for s in listed]
        opt = closed_form_optimum(at_dtype(profile, prec.comm_bytes), link, args.world_size,
                                  link_file.contention)
        scale = prec.grad_bytes / prec.comm_bytes  # back to gradient bytes, as --bucket-mb counts
        out["bucket_optimum"] = {**opt, "bucket_mb": opt["bucket_mb"] * scale,
                                 "bucket_bytes": round(opt["bucket_bytes"] * scale),
                                 "backward_ms": profile.backward_s * 1e3}
    return out


def level_rows(topology, link_file, profile, bucket_mb: float, shard_unit_mb: float | None
               ) -> list[dict]:
    """What crosses each level per step and rank for ddp (NCCL's ring), hierarchical, fsdp
    and zero2 (rings over every rank) and hsdp (simddp.inputs.topology.level_load)."""
    rows = []
    for name in (Name.DDP, Name.HIERARCHICAL, Name.FSDP, Name.ZERO2, Name.HSDP):
        s = make_strategy(name, bucket_mb, shard_unit_mb=shard_unit_mb)
        load = level_load(topology, link_file.link, plan(profile, s), link_file.host)
        rows.append({"strategy": name, "inter_node_bytes": load["inter_node_bytes"],
                     "intra_node_bytes": load["intra_node_bytes"],
                     "inter_node_ms": load["inter_node_s"] * 1e3,
                     "intra_node_ms": load["intra_node_s"] * 1e3, "bound_by": load["bound_by"]})
    return rows


def _gb(n: float) -> str:
    return f"{n / GB:10.2f} {n / GiB:10.2f}"


def render(out: dict) -> str:
    """The account for people: memory per device, then communication per step."""
    return "\n".join(_memory_lines(out) + _comm_lines(out))


def _memory_lines(out: dict) -> list[str]:
    mem, prec = out["memory"], out["precision"]
    bpp = mem["bytes_per_param"]
    shape = (f"{out['batch']} × {out['seq']} = {mem['tokens']:,} tokens per rank"
             if mem["activations_modelled"] else "counted from the profile's fp32 gradient bytes")
    lines = [f"{out['model']}: {mem['params']:,} parameters ({mem['params'] / 1e9:.1f} B), {shape}",
             f"precision: master {prec['master']}, grads {prec['grad']}, {prec['optim']} state "
             f"{prec['optim_dtype']}, weight copy {prec['weight_copy']}, activations "
             f"{prec['act']}, communication {prec['comm']}; attention {out['attention']}",
             "units: GB = 1e9 bytes, GiB = 2^30 bytes", "",
             f"{'memory per device, replicated (DDP)':44} {'B/param':>7} {'GB':>10} {'GiB':>10}"]
    rep = mem["replicated"]
    for key, label in (("params", f"parameters ({prec['master']})"),
                       ("grads", f"gradients ({prec['grad']})"),
                       ("optimizer", f"optimizer state ({prec['optim']}, {prec['optim_dtype']})"),
                       ("weight_copy", f"weight copy ({prec['weight_copy']})")):
        if key == "weight_copy" and not bpp[key]:
            continue
        lines.append(f"  {label:42} {bpp[key]:7} {_gb(rep[key])}")
    act = "activations saved for backward" if mem["activations_modelled"] else \
        "activations: not modelled (not a preset)"
    lines.append(f"  {act:42} {'':7} {_gb(rep['activations'])}")
    for t in mem["activation_terms"]:
        lines.append(f"    {t['count']:4} × {t['what']:64} {t['bytes'] / GB:9.2f} GB")
    limit = mem["device_mem_bytes"]
    verdict = "fits" if rep["total"] <= limit else "does NOT fit"
    total = "total" if mem["activations_modelled"] else "total without activations"
    lines.append(f"  {total:42} {'':7} {_gb(rep['total'])}   {verdict} in "
                 f"{limit / GB:g} GB")
    lines += ["", f"FSDP / ZeRO-3: params, grads, optimizer sharded over N "
              f"({mem['fsdp_units']} units); activations not sharded",
              f"  working set: the largest unit unsharded, {mem['fsdp_largest_unit_params']:,} "
              f"params with full gradients (one unit at a time; no prefetch)"]
    cols = [mem[Name.FSDP]] + ([mem["fsdp_at_min_world"]] if mem["fsdp_at_min_world"] else [])
    cols = sorted({c["world_size"]: c for c in cols}.values(), key=lambda c: c["world_size"])
    lines.append(f"  {'per device, GB':28}" + "".join(f"{'N = ' + str(c['world_size']):>12}"
                                                      for c in cols))
    for key in ("params", "grads", "optimizer", "working_set", "activations", "total"):
        lines.append(f"  {key.replace('_', ' '):28}" + "".join(f"{c[key] / GB:12.2f}" for c in cols))
    if mem["fsdp_min_world"] is None:
        lines.append(f"  cannot fit in {limit / GB:g} GB at any N: the unsharded part (activations "
                     f"+ working set) alone is {mem['fsdp_floor_bytes'] / GB:.2f} GB; "
                     "lower --batch/--seq or checkpoint activations")
    else:
        lines.append(f"  smallest N that fits in {limit / GB:g} GB: {mem['fsdp_min_world']}")
    return lines


def curve_kinds(link, world_size: int) -> list[str]:
    """The kinds ``link`` charges by a measured curve at ``world_size`` ranks (empty: α–β)."""
    return [k for k in COLLECTIVE_KINDS if link.curves and pick_curves(link, k, world_size)]


def _comm_lines(out: dict) -> list[str]:
    comm, prec = out["communication"], out["precision"]
    if comm is None:
        return ["", "world size 1: no communication"]
    link = out["link"]
    lines = ["", f"communication per optimizer step per rank: {comm['world_size']} ranks, "
              f"link {link['name']} (α {fmt_sig(link['alpha_s'] * 1e6)} µs, busbw "
              f"{fmt_sig(link['busbw_gbps'])} GB/s), {prec['comm']}, bucket {comm['bucket_mb']:g} MB, "
              f"{comm['accum_steps']} micro-step(s)"]
    if link.get("curves"):
        lines.append(f"  times by the link's measured curves for {', '.join(link['curves'])} "
                     "(the α and busbw above: its line for the rest; α ms: each curve's low-end α)")
    lines += [
              f"  {'strategy':19} {'calls':>7} {'payload GB':>11} {'sent/rank GB':>13} "
              f"{'α ms':>9} {'bw ms':>11} {'total ms':>11}"]
    for r in comm["rows"]:
        lines.append(f"  {r['strategy']:19} {r['collectives']:7} {r['payload_bytes'] / GB:11.3f} "
                     f"{r['sent_bytes_per_rank'] / GB:13.3f} {r['alpha_s'] * 1e3:9.3f} "
                     f"{r['bandwidth_s'] * 1e3:11.3f} {r['time_s'] * 1e3:11.3f}")
    lines.append("  (time on the link, serial; how much overlap hides: python -m simddp sweep)")
    if comm.get("levels"):
        lines += ["", f"per level, {comm['world_size']} ranks as nodes × GPUs (the link above "
                  "between nodes), at the communication dtype, run alone:",
                  f"  {'strategy':19} {'inter-node GB':>14} {'intra-node GB':>14} "
                  f"{'inter ms':>10} {'intra ms':>10}  bounded by"]
        for r in comm["levels"]:
            lines.append(f"  {r['strategy']:19} {r['inter_node_bytes'] / GB:14.3f} "
                         f"{r['intra_node_bytes'] / GB:14.3f} "
                         f"{r['inter_node_ms']:10.3f} {r['intra_node_ms']:10.3f}  "
                         f"{r['bound_by']}-node link")
    lines += ["", f"model states per rank by strategy ({comm['world_size']} ranks; units and "
              "buckets as the simulator plans them; no activations)"]
    for row in out["states"]:
        parts = {k: v for k, v in row.items() if k != "strategy"}
        total = sum(parts.values())
        lines.append(f"  {row['strategy']:20} {fmt_bytes(total):>11}   " + ", ".join(
            f"{k.replace('_', ' ')} {fmt_bytes(v, total)}" for k, v in parts.items()))
    opt = out["bucket_optimum"]
    law = f"α–β; {opt['alpha_beta']}" if opt.get("alpha_beta") else "α–β"
    head = f"closed-form optimal bucket (bucketed, {law}, backward {opt['backward_ms']:.1f} ms): "
    if opt["regime"] == NO_LATENCY:
        lines.append(head + "none: the link's α is 0, so smaller buckets are never slower")
    else:
        lines.append(head + f"{opt['bucket_mb']:.4g} MB, {opt['overhead_ms']:.3f} ms exposed, "
                     f"{opt['regime']}")
    return lines


def run(args: argparse.Namespace) -> int:
    out = account(args)
    print(json.dumps(out, indent=1) if args.format == "json" else render(out))
    return 0
