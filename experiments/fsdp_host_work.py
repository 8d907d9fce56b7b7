"""FSDP2's step on this box, taken apart: compute, its collectives alone, and the rest (host work).

    python experiments/fsdp_host_work.py                                  # mlp and transformer, loopback
    python experiments/fsdp_host_work.py --emulate-gbit 2                 # each rank its own 2 Gbit/s host
    python experiments/fsdp_host_work.py --models mlp --link out/validate/link.json   # + simddp's wire law

In one world of 2 Gloo ranks (one thread each), round-robin in chunks so drift hits all alike,
every timed step after a barrier, the step = max over ranks, median over steps:

- ``compute-only``: forward, backward, SGD, no communication (realrun's Trainer);
- ``fsdp``, ``zero2``: the same under torch FSDP2 (realrun/sharded.py, as realrun bench runs it);
- ``wire:fsdp``, ``wire:zero2``: the plan's all-gathers and reduce-scatters alone
  (``dist.all_gather_into_tensor`` / ``reduce_scatter_tensor`` on buffers of each unit's
  size, in the plan's order, each waited for, as FSDP2 issues them on CPU).

``host = strategy - compute-only - wire``: what FSDP2 does on the host around its collectives
(copy-in, copy-out, hooks, DTensor bookkeeping). realrun/fsdp_host_costs.py measures it the same
way with the profile, as the "fsdp" implementation's host costs simddp charges. With
``--link`` it also prints simddp's time for the same collectives from that link's kind fits.
Results and their use: docs/results/2026-11-23-sharded-and-hooks.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from simddp.strategy import SHARDED  # noqa: E402  (fsdp, zero2)
MODELS = {"mlp": ("mlp-8x1024", {}, 2, 8),
          "tfm": ("transformer-small", dict(layers=8, d_model=128, d_ff=512, heads=4, vocab=1024),
                  2, 32)}


def rank(payload: dict, ctx) -> dict:
    """Rank target: every item warmed up, then timed round-robin; per-step seconds per item."""
    import torch
    from realrun.fsdp_host_costs import Wire, sharded_plans
    from realrun.configs import config_of
    from realrun.steps import Trainer
    from simddp.strategy import make_strategy
    from realrun.workload import Workload
    warnings.filterwarnings("ignore", category=FutureWarning)  # *_tensor's deprecation notes
    torch.set_flush_denormal(True)
    workload = Workload(**payload["workload"])
    configs = [config_of(None)] + [config_of(make_strategy(s)) for s in SHARDED]
    items = {c["strategy"]: Trainer(c, workload, ctx, payload) for c in configs}
    module = workload.build(payload["seed"], ctx.rank, "cpu")[0]
    items.update({f"wire:{s}": Wire(p, ctx.world_size, ctx.device)
                  for s, p in sharded_plans(module, None).items()})
    for item in items.values():
        for _ in range(payload["warmup"]):
            item.step()
    times: dict[str, list[float]] = {name: [] for name in items}
    for _ in range(payload["rounds"]):
        for name, item in items.items():
            for _ in range(payload["chunk"]):
                ctx.barrier()
                t0 = time.perf_counter()
                item.step()
                times[name].append(time.perf_counter() - t0)
    return times


def main() -> int:
    from realrun.launch import run_world
    from realrun.workload import Workload
    from simddp.presets.models import parse_model
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,tfm", help="mlp (mlp-8x1024, batch 2 x seq 8) "
                    "and/or tfm (transformer-small shrunk as in docs/VALIDATION.md, 2 x 32)")
    ap.add_argument("--emulate-gbit", type=float, default=None,
                    help="each rank in its own network namespace at this rate (root)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--link", default=None, help="a simddp link JSON: print its wire times too")
    a = ap.parse_args()
    emulate = {} if a.emulate_gbit is None else {"emulate_hosts": 2, "link_gbit": a.emulate_gbit}
    where = "loopback" if a.emulate_gbit is None else f"emulated {a.emulate_gbit:g} Gbit/s"
    print(f"# FSDP2 step taken apart: 2 Gloo ranks, 1 thread each, {where}; {a.rounds} rounds x "
          f"{a.chunk} steps per item; step = max over ranks; medians in ms; load "
          f"{os.getloadavg()[0]:.2f}")
    for key in a.models.split(","):
        model, shrink, batch, seq = MODELS[key]
        spec = parse_model(model).shrunk(**shrink)
        payload = {"workload": Workload.preset(spec, batch, seq).to_json(), "seed": 0,
                   "optimizer": "sgd", "precision": "fp32", "rounds": a.rounds,
                   "chunk": a.chunk, "warmup": a.warmup}
        ranks = run_world("fsdp_host_work:rank", payload, world_size=2, threads_per_rank=1,
                          timeout_s=120, **emulate)
        med = {k: float(np.median(np.max([r[k] for r in ranks], axis=0))) * 1e3 for k in ranks[0]}
        for s in SHARDED:
            host = med[s] - med["compute-only"] - med[f"wire:{s}"]
            line = (f"{key:4s} {s:6s} step {med[s]:7.1f} = compute-only {med['compute-only']:6.1f}"
                    f" + wire {med[f'wire:{s}']:6.1f} + host {host:6.1f}")
            if a.link:
                line += f"   (simddp wire law: {_law_ms(a.link, spec, s):6.1f})"
            print(line)
    return 0


def _law_ms(link_path: str, spec, strategy: str) -> float:
    """simddp's time for the plan's collectives, one after the other, from a link file."""
    from simddp import build_profile, load_link, make_strategy, plan
    link = load_link(link_path).for_world(2)
    p = plan(build_profile(spec), make_strategy(strategy))
    return sum(link.collective_s(c.kind, c.nbytes, 2, True) for c in p.collectives) * 1e3


if __name__ == "__main__":
    sys.exit(main())
