"""What the bench scripts that run one model on a world share: realrun's model flags, the
world's (2 Gloo ranks by default; ``--emulate-hosts 2 --link-gbit 2`` for the emulated link)
and a few step counts in, the rank payload out (bad flags are one line and exit 2); then
their ``rank`` function on that world, with the load average before."""
from __future__ import annotations

import argparse
import os
import sys
import time

from realrun.commands.common import add_model_args, require_int, resolve_workload
from realrun.launch import run_world
from realrun.launch.world import add_world_args, world_from_args
from realrun.workload import Workload
from simddp.errors import InputError


def model_run_args(prog: str, doc: str, counts: dict[str, int],
                   options: dict[str, str] | None = None
                   ) -> tuple[argparse.Namespace, Workload, dict]:
    """(args, workload, payload) from the command line: ``--model`` and realrun's shrink
    flags, ``--batch``, ``--seq`` (add_model_args), ``--NAME N`` for each of ``counts`` and
    ``--NAME TEXT`` for each of ``options`` (their defaults), which the payload carries
    with the workload, seed, optimizer and precision (the script checks its options)."""
    options = options or {}
    ap = argparse.ArgumentParser(prog=prog, description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(ap)
    add_world_args(ap, timeout_s=600.0)
    for name, default in counts.items():
        ap.add_argument(f"--{name}", type=int, default=default)
    for name, default in options.items():
        ap.add_argument(f"--{name}", default=default)
    args = ap.parse_args()
    try:
        workload = resolve_workload(args)
        args.world = world_from_args(args, min_ranks=2, why="the parts of a 2-rank step")
        for name in counts:
            require_int(f"--{name}", getattr(args, name.replace("-", "_")))
    except InputError as e:   # bad flags: one line, exit 2
        print(f"{prog}: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    keys = [name.replace("-", "_") for name in (*counts, *options)]
    payload = {"workload": workload.to_json(), "seed": args.seed, "optimizer": args.optimizer,
               "precision": args.precision, **{key: getattr(args, key) for key in keys}}
    return args, workload, payload


def run_ranks(prog: str, args: argparse.Namespace, payload: dict) -> tuple[list, float]:
    """(what each rank's ``experiments.<prog>:rank`` returned, the load average before)."""
    load = os.getloadavg()[0]
    return run_world(f"experiments.{prog}:rank", payload, threads_per_rank=args.threads,
                     **args.world.launch_args()), load


def stamped_step(trainer, ctx) -> list[float]:
    """One step of a realrun.steps.Trainer after a barrier, on perf_counter: [start, forward,
    backward, sync, optimizer ends] (the sync's end is the backward's where it has none)."""
    ctx.barrier()
    t0 = time.perf_counter()
    trainer.optimizer.zero_grad(set_to_none=True)
    loss = trainer.loss()
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    if trainer.sync is not None:
        trainer.sync()
    t3 = time.perf_counter()
    trainer.optimizer.step()
    return [t0, t1, t2, t3, time.perf_counter()]
