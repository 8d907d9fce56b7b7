"""Measure per-layer forward/backward seconds of a preset in one process: a simddp profile.

    python -m realrun profile                                    # mlp-8x1024, batch 2 x seq 8
    python -m realrun profile --model transformer-small --layers 2 --d-model 256 --d-ff 1024 \\
        --heads 4 --vocab 2048 --batch 4 --seq 32 --repeats 20 --out out/profile.json
    python -m simddp sweep --model out/profile.json              # simulate the measured model

Every leaf op of simddp's ``ops()`` gets its forward time (forward hooks) and backward time
(gradient-ready hooks), median of --repeats steps after --warmup; gaps between hooks go to the
next layer to finish (see realrun/profiler.py). Also measured: the order in which gradients
became ready, each tensor's bytes and the optimizer step. The profile is named like the model
(e.g. ``transformer-small[d_model=256,layers=2]``); how it was measured is stored next to it
under "measured" (batch, seq, threads, hook-free forward/backward totals).
"""
from __future__ import annotations

import argparse

from realrun.commands.common import add_model_args, require_int, resolve_spec
from simddp.errors import InputError
from simddp.io import profile_to_json, save_json

HELP = "measure per-layer forward/backward seconds of a preset; write a simddp profile"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    g = p.add_argument_group("measurement")
    g.add_argument("--repeats", type=int, default=10,
                   help="timed steps; each layer's time is their median (default %(default)s)")
    g.add_argument("--warmup", type=int, default=3, help="untimed steps first (default %(default)s)")
    g.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="where the model runs; on cuda every hook synchronizes (default %(default)s)")
    g.add_argument("--out", default="out/profile.json",
                   help="profile JSON to write (default %(default)s)")


def run(args: argparse.Namespace) -> int:
    spec = resolve_spec(args)
    require_int("--repeats", args.repeats)
    require_int("--warmup", args.warmup, minimum=0)
    import torch

    from realrun.profiler import profile_model
    if args.device == "cuda" and not torch.cuda.is_available():
        raise InputError(f"--device cuda: no CUDA device here (torch {torch.__version__}); "
                         "use --device cpu")
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    profile, measured = profile_model(spec, batch=args.batch, seq=args.seq,
                                      repeats=args.repeats, warmup=args.warmup,
                                      optimizer=args.optimizer, device=args.device,
                                      seed=args.seed)
    save_json(args.out, {**profile_to_json(profile), "measured": measured})
    print(format_profile(profile, measured, args.out))
    return 0


def format_profile(profile, measured: dict, path: str) -> str:
    reverse = tuple(range(profile.n_tensors - 1, -1, -1))
    order = ("reverse definition order" if profile.ready_order == reverse
             else f"measured, differs from reverse definition order: {list(profile.ready_order)}")
    lines = [f"# realrun profile: {profile.name}, batch {measured['batch']} x seq "
             f"{measured['seq']}, {measured['optimizer']}, {measured['threads']} thread(s), "
             f"{measured['device']}; median of {measured['repeats']} steps",
             f"# {'layer':<22}{'grad_KiB':>10}{'forward_ms':>12}{'backward_ms':>13}"]
    for layer in profile.layers:
        kib = f"{sum(layer.grad_bytes) / 1024:.0f}" if layer.grad_bytes else "-"
        lines.append(f"  {layer.name:<22}{kib:>10}{layer.forward_s * 1e3:>12.3f}"
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
