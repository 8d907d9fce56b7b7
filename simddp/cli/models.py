"""List the model presets with their predicted step times, and the devices behind those times.

    python -m simddp models
    python -m simddp models --device h100 --batch 4 --seq 2048
    python -m simddp models --model mlp-40x4096          # add any preset or profile FILE.json
    python -m simddp models --model config.json          # or a Hugging Face config, or a spec

One row per model: layers (transformer blocks, MLP/FFN layers, or a profile's modules),
gradient tensors, parameters (millions), fp32 gradient MiB, and forward / backward / optimizer
ms at the chosen --device, --batch, --seq, --efficiency and --optimizer. Then the devices:
datasheet peak TFLOPS, memory GB/s, the efficiency assumed, and where the numbers come from.
docs/MODELS.md explains the roofline behind the times.
"""
from __future__ import annotations

import argparse

from simddp.cli.args import DEFAULT_MODEL, DEFAULT_SEQ, add_model_args, resolve_model, seq_of
from simddp.presets import DEVICES
from simddp.presets.hf_config import describe_model
from simddp.presets.models import GRAD_BYTES, TRANSFORMERS, build_profile, parse_model
from simddp.report.table import render_table

HELP = "list model presets (with predicted step times) and devices"
# Family examples shown after the named presets: a deep MLP of many mid-size tensors and a
# two-block FFN stack, the shapes used in the README and the benchmarks.
EXAMPLES = ("mlp-40x4096", "ffn-8x4096x16384")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)


def run(args: argparse.Namespace) -> int:
    names = [f"transformer-{size}" for size in TRANSFORMERS] + list(EXAMPLES)
    seq = args.seq or DEFAULT_SEQ
    rows = []
    for name in names:
        spec = parse_model(name)
        profile = build_profile(spec, args.device, args.batch, seq, args.efficiency,
                                args.optimizer, args.compute_dtype, args.checkpointing)
        rows.append(_row(name, spec.layers, spec.n_params, profile))
    rescaled = any(getattr(args, f"{what}_ms") is not None
                   for what in ("forward", "backward", "optimizer", "step"))
    if (args.model != DEFAULT_MODEL and args.model not in names) or rescaled:
        model = describe_model(args.model)   # a preset, a config or spec, or None: a profile
        profile = resolve_model(args)  # with any --*-ms
        label = args.model + (" (rescaled)" if rescaled else "")
        if model is not None:
            layers, n_params = model.layers, model.n_params
            if seq_of(args, model) != seq:
                label += f" (seq {seq_of(args, model)})"
        else:  # a measured profile: its modules, and parameters from fp32 gradient bytes
            layers, n_params = len(profile.layers), profile.grad_total_bytes // GRAD_BYTES
        rows.append(_row(label, layers, n_params, profile))
    eff = "" if args.efficiency is None else f", efficiency {args.efficiency:g}"
    print(render_table(
        ["model", "layers", "grad tensors", "params M", "grad MiB", "forward ms",
         "backward ms", "optimizer ms"], rows,
        title=f"models at {args.device}, batch {args.batch} × seq {seq}{eff}, "
              f"{args.optimizer} (fp32 gradients)"))
    print()
    print(render_table(
        ["device", "peak TFLOPS", "memory GB/s", "efficiency", "source"],
        [[d.name, f"{d.peak_tflops:g}", f"{d.mem_gbps:g}", f"{d.efficiency:g}", d.source]
         for d in DEVICES.values()], title="devices"))
    return 0


def _row(name: str, layers: int, n_params: int, profile) -> list[str]:
    return [name, str(layers), str(profile.n_tensors), f"{n_params / 1e6:.1f}",
            f"{profile.grad_total_bytes / 2**20:.1f}", f"{profile.forward_s * 1e3:.2f}",
            f"{profile.backward_s * 1e3:.2f}", f"{profile.optimizer_s * 1e3:.2f}"]
