"""Measure per-layer forward/backward seconds in one process: a simddp profile.

    python -m realrun profile                                    # mlp-8x1024, batch 2 x seq 8
    python -m realrun profile --model transformer-small --layers 2 --d-model 256 --d-ff 1024 \\
        --heads 4 --vocab 2048 --batch 4 --seq 32 --repeats 20 --out out/profile.json
    python -m realrun profile --module examples/gpt2_tiny.py:build --precision bf16
    python -m simddp sweep --model out/profile.json              # simulate the measured model

Every module that owns trainable parameters gets its forward time (forward hooks) and
backward time (gradient-ready hooks), median of --repeats steps after --warmup; gaps between
hooks go to the next layer to finish (see realrun/profiler.py). Also measured: the order in
which gradients became ready, each tensor's bytes and the optimizer step. The profile is
named like the model (``transformer-small[d_model=256,layers=2]``, ``gpt2_tiny:build``); how
it was measured is stored next to it under "measured" (threads, precision, hook-free totals).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from realrun.commands.common import add_model_args, require_int, resolve_workload
from simddp.errors import InputError
from simddp.io import check_out_dir, profile_to_json, save_json


def check_out_file(path: str, force: bool) -> None:
    """InputError now, before minutes of profiling, if ``path`` cannot be written, or holds an
    earlier profile and ``force`` is off."""
    if Path(path).is_dir():
        raise InputError(f"--out: {path!r} is a directory; give a file name, e.g. profile.json")
    if Path(path).exists() and not force:
        raise InputError(f"--out {path}: an earlier profile is there; pass --force to replace "
                         "it, or choose another --out")
    check_out_dir(Path(path).parent or ".", "--out")

HELP = "measure per-layer forward/backward seconds of a preset or your model; write a profile"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    g = p.add_argument_group("measurement")
    g.add_argument("--repeats", type=int, default=10,
                   help="timed steps; each layer's time is their median (default %(default)s)")
    g.add_argument("--warmup", type=int, default=3, help="untimed steps first (default %(default)s)")
    g.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="where the model runs; on cuda the hooks record CUDA events, read "
                        "after each step (default %(default)s)")
    g.add_argument("--out", default="out/profile.json",
                   help="profile JSON to write (default %(default)s)")
    g.add_argument("--force", action="store_true",
                   help="replace an earlier profile at --out (default: refuse)")


def run(args: argparse.Namespace) -> int:
    require_int("--repeats", args.repeats)
    require_int("--warmup", args.warmup, minimum=0)
    check_out_file(args.out, args.force)
    workload = resolve_workload(args)
    import torch

    from realrun.profiler import profile_workload
    if args.device == "cuda" and not torch.cuda.is_available():
        raise InputError(f"--device cuda: no CUDA device here (torch {torch.__version__}); "
                         "use --device cpu")
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    profile, measured = profile_workload(workload, seed=args.seed, repeats=args.repeats,
                                         warmup=args.warmup, optimizer=args.optimizer,
                                         device=args.device, precision=args.precision)
    save_json(args.out, {**profile_to_json(profile), "measured": measured})
    print(format_profile(profile, measured, args.out))
    return 0


def format_profile(profile, measured: dict, path: str) -> str:
    reverse = tuple(range(profile.n_tensors - 1, -1, -1))
    order = ("reverse definition order" if profile.ready_order == reverse
             else f"measured, differs from reverse definition order: {list(profile.ready_order)}")
    width = max(22, *(len(layer.name) + 2 for layer in profile.layers))
    batch = (f", batch {measured['batch']} x seq {measured['seq']}" if measured.get("batch")
             else "")
    lines = [f"# realrun profile: {profile.name}{batch}, {measured['optimizer']}, "
             f"{measured['precision']}, {measured['threads']} thread(s), {measured['device']}; "
             f"median of {measured['repeats']} steps",
             f"# {'layer':<{width}}{'grad_KiB':>10}{'forward_ms':>12}{'backward_ms':>13}"]
    for layer in profile.layers:
        kib = f"{sum(layer.grad_bytes) / 1024:.0f}" if layer.grad_bytes else "-"
        lines.append(f"  {layer.name:<{width}}{kib:>10}{layer.forward_s * 1e3:>12.3f}"
                     f"{layer.backward_s * 1e3:>13.3f}")
    lines += [f"# total: forward {profile.forward_s * 1e3:.2f} ms (hook-free "
              f"{measured['forward_s_unhooked'] * 1e3:.2f}), backward "
              f"{profile.backward_s * 1e3:.2f} ms (hook-free "
              f"{measured['backward_s_unhooked'] * 1e3:.2f}), optimizer "
              f"{profile.optimizer_s * 1e3:.2f} ms; gradients {profile.grad_total_bytes / 2**20:.2f} MiB "
              f"in {profile.n_tensors} tensors",
              f"# gradient-ready order: {order}",
              f"# wrote {path}"]
    return "\n".join(lines)
