"""Predict a model's step over a list of GPU counts: per-GPU throughput, scaling efficiency.

    python -m simddp scale --model transformer-large --link ib-hdr            # 8 … 1024 GPUs
    python -m simddp scale --model config.json --gpus 8,16,32,64 --gpus-per-node 8 \\
        --link ib-4xhdr --strategies ddp,fsdp,hsdp --batch 4 --grad-dtype bf16
    python -m simddp scale --model mpt:d_model=2048,n_heads=16,n_layers=24,expansion_ratio=4,max_seq_len=2048,vocab_size=50368 \\
        --device h100 --link ib-8xndr --global-batch 1024 --batch 8 --out out/scale

For each GPU count and strategy: the optimizer step, tokens per second per GPU (samples for a
model without tokens), the scaling efficiency against the smallest count, and the exposed
communication. Weak scaling (the default) holds the per-GPU batch (--batch, --accum-steps);
strong scaling (--global-batch) holds the global batch in samples, so each count accumulates
global / (GPUs × --batch) micro-steps. Each count is whole nodes of --gpus-per-node GPUs (or
part of one node); --link is the link between nodes, --intra-link the one inside (default
nvlink-<device>). ddp runs torch's 25 MB buckets unless --bucket-mb says otherwise; fsdp,
zero2 and hsdp a unit per transformer block unless --shard-unit-mb does.
--format json prints one JSON document; --out DIR writes scale.json and scale.png.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from simddp.cli.args import (add_contention_arg, add_host_args, add_model_args,
                             add_precision_arg, casts_of, contention_choice, resolve_host,
                             resolve_link, resolve_model, resolve_world, seq_of)
from simddp.errors import InputError
from simddp.inputs.io import write_atomic
from simddp.planning.registry import help_lines
from simddp.predict.scaling import (DEFAULT_GPUS, DEFAULT_STRATEGIES, SCALABLE, ScaleRequest,
                                    layouts, scale)
from simddp.presets import DEFAULT_LINK, LINKS
from simddp.presets.architecture import Architecture
from simddp.presets.hf_config import describe_model
from simddp.report.outdir import check_out_dir
from simddp.report.scaling_text import scale_text

HELP = "predict per-GPU throughput and scaling efficiency over a list of GPU counts"


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scale")
    g.add_argument("--gpus", default=",".join(str(n) for n in DEFAULT_GPUS), metavar="LIST",
                   help="GPU counts, comma-separated; each whole nodes or part of one "
                        "(default %(default)s)")
    g.add_argument("--gpus-per-node", type=int, default=8, metavar="G",
                   help="GPUs in a node (default %(default)s)")
    g.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES), metavar="LIST",
                   help=f"comma-separated from {', '.join(SCALABLE)} (default %(default)s)")
    g.add_argument("--global-batch", type=int, default=None, metavar="SAMPLES",
                   help="strong scaling: the global batch held fixed, in samples; each count "
                        "accumulates global / (GPUs × --batch) micro-steps (default: weak "
                        "scaling, --batch per GPU)")
    g.add_argument("--accum-steps", type=int, default=None, metavar="K",
                   help="weak scaling: micro-steps per optimizer step at every count "
                        "(default 1)")
    g.add_argument("--bucket-mb", type=float, default=None, metavar="MB",
                   help="ddp's bucket_cap_mb (default torch's 25)")
    g.add_argument("--shard-unit-mb", type=float, default=None, metavar="MB",
                   help="fsdp, zero2, hsdp: units of at least this many MB (default: a unit "
                        "per transformer block)")
    g.add_argument("--format", choices=("table", "json"), default="table",
                   help="table for people, json (one document on stdout) for scripts")
    g.add_argument("--out", metavar="DIR", help="also write scale.json and scale.png here")
    g.add_argument("--force", action="store_true",
                   help="replace an earlier run's files in --out (default: move them into "
                        "--out/earlier-<time>/)")
    add_precision_arg(g)
    add_model_args(p)
    c = p.add_argument_group("cluster (docs/TOPOLOGY.md)")
    c.add_argument("--link", default=DEFAULT_LINK,
                   help=f"the link between nodes: {', '.join(LINKS)} or a link FILE.json "
                        "(a calibrated one is moved to each count by the ring law) "
                        "(default %(default)s)")
    c.add_argument("--alpha-us", type=float, default=None, help="override its α, µs")
    c.add_argument("--busbw-gbps", type=float, default=None,
                   help="override its bus bandwidth, GB/s")
    c.add_argument("--intra-link", default=None,
                   help="the link inside a node: a preset or a link FILE.json (default: the "
                        "--link file's levels when calibrate measured them, else "
                        "nvlink-<device>)")
    c.add_argument("--intra-alpha-us", type=float, default=None, help="override its α, µs")
    c.add_argument("--intra-busbw-gbps", type=float, default=None,
                   help="override its bus bandwidth, GB/s")
    add_host_args(p)
    add_contention_arg(p)
    p.epilog = help_lines(SCALABLE)


def run(args: argparse.Namespace) -> int:
    # Resolve: every flag checked, every count's cluster built, before anything is simulated.
    if args.global_batch is not None and args.accum_steps is not None:
        raise InputError("--accum-steps: with --global-batch the accumulation steps follow "
                         "from it; give one or the other")
    request = ScaleRequest(tuple(_names(args.strategies)), args.batch, _seq(args),
                           args.global_batch, args.accum_steps or 1, args.bucket_mb,
                           args.shard_unit_mb, args.precision, grad_dtype=args.grad_dtype)
    counts = layouts(_ints(args.gpus, "--gpus"), args.gpus_per_node)
    for nodes, per_node in counts:
        request.accum_at(nodes * per_node)   # strong scaling: whole micro-steps everywhere
    worlds = [_world(args, nodes, per_node) for nodes, per_node in counts]
    topologies = [resolve_world(w) for w in worlds]
    link_file = resolve_link(worlds[-1])
    profile, host = resolve_model(args), resolve_host(args)
    request = replace(request, cast_gbps=casts_of(args, host)[0])
    contention = contention_choice(args.contention)
    out_dir = check_out_dir(args.out, files=("scale.json", "scale.png"), force=args.force)
    answer = scale(profile, link_file, topologies, request, host=host, contention=contention)
    # Render everything in memory before anything is written (no partial output).
    doc = answer.to_json()
    text = json.dumps(doc, indent=1) if args.format == "json" else scale_text(answer)
    if out_dir is not None:
        from simddp.report.scaling_plot import scale_png   # matplotlib: only for a picture

        files = {"scale.json": json.dumps(doc, indent=1) + "\n", "scale.png": scale_png(answer)}
        for name, payload in files.items():
            write_atomic(out_dir / name, payload)
        print(f"wrote {', '.join(str(out_dir / n) for n in files)}", file=sys.stderr)
    print(text)
    return 0


def _world(args: argparse.Namespace, nodes: int, per_node: int) -> argparse.Namespace:
    """The flags of one count as ``simddp sweep --nodes N --gpus-per-node G`` takes them; a
    calibrated link is moved to each count by the ring law (``--rescale-link``)."""
    return argparse.Namespace(**{**vars(args), "nodes": nodes, "gpus_per_node": per_node,
                                 "world_size": None, "rescale_link": True})


def _seq(args: argparse.Namespace) -> int | None:
    """Tokens per sample: a transformer's (a config, a spec or a transformer preset: --seq,
    else its own); None for an mlp or ffn preset and a profile file, counted in samples."""
    model = describe_model(args.model)
    if isinstance(model, Architecture) or getattr(model, "kind", None) == "transformer":
        return seq_of(args, model)
    return None


def _ints(text: str, flag: str) -> list[int]:
    """'8,16,32' -> [8, 16, 32]; one-line InputError on anything else."""
    out = []
    for item in text.split(","):
        try:
            out.append(int(item))
        except ValueError:
            raise InputError(f"{flag}: {item.strip()!r} is not a whole number "
                             "(expected e.g. 8,16,32)") from None
    return out


def _names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    for name in names:
        if name not in SCALABLE:
            raise InputError(f"--strategies: unknown {name!r}; choose from {', '.join(SCALABLE)}")
    if not names:
        raise InputError(f"--strategies: empty list; choose from {', '.join(SCALABLE)}")
    return names
