"""Every collective of real steps on both ranks, on one clock: the evidence for issue 19's law.

    python experiments/small_collectives.py                        # transformer-small, 2 Gloo ranks
    python experiments/small_collectives.py --configs overlap,bucketed:0.25,bucketed:4 --steps 20
    python experiments/small_collectives.py --emulate-hosts 2 --link-gbit 2       # two shaped hosts

Both ranks run on this machine, so ``time.perf_counter`` (CLOCK_MONOTONIC) is one clock for
both: a collective's launch on each rank and its completion on each rank can be lined up
without a profiler (torch.profiler stretches a 20 ms step to 60-90 ms here). Per step and rank
it records the forward, backward, sync and optimizer ends and, for every collective of
realrun.DDP, its launch and its completion (the work's future callback). Prints per
configuration the medians over steps of:

- ``bwd``: the backward (with its launches) and ``bwd0``: compute-only's, so their difference
  is what the collectives cost the compute lane;
- ``skew``: how much later the last rank launched each collective than the first;
- ``first_svc`` and ``svc``: a collective's service, from the later rank's launch (or the
  previous completion) to its completion, for the step's first collective and the median of
  the rest (the first pays a start the rest do not: 4-16 ms under compute here);
- ``after``: collectives still running when the later rank's backward ended, and the drain:
  the spacing of their completions (the marginal cost of a queued collective with no compute);
- ``during``: the spacing of completions while both backwards ran;
- ``tail``: step end minus the later backward end (waiting for communication), and the step.

Writes every raw record to --out (JSON) for a second look.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from realrun.configs import config_of  # noqa: E402
from realrun.launch import run_world  # noqa: E402
from simddp.presets.models import parse_model  # noqa: E402
from simddp.strategy import make_strategy  # noqa: E402

TFM = ("transformer-small", {"layers": 8, "d_model": 128, "d_ff": 512, "heads": 4, "vocab": 1024})


def rank(payload: dict, ctx) -> dict:
    """Rank side: every configuration, warm-up then timed steps, raw clocks (perf_counter)."""
    import torch

    from realrun.steps import Trainer
    from realrun.step_clock import clock_collectives, clocked_step
    from realrun.workload import Workload

    torch.set_flush_denormal(True)
    clock = time.perf_counter
    out = {}
    for config in payload["configs"]:
        trainer = Trainer(config, Workload(**payload["workload"]), ctx, payload)
        comm: list[list] = []   # [label, launch_s, end_s, nbytes]
        if trainer.sync is not None:
            clock_collectives(trainer.model, comm, clock)
        for _ in range(payload["warmup"]):
            trainer.step()
        steps = [{"t": clocked_step(trainer, ctx, comm, clock),
                  "comm": [c[1:] for c in comm]}     # [launch_s, end_s, nbytes]
                 for _ in range(payload["steps"])]
        out[config["strategy"] + ("" if config["bucket_mb"] is None
                                  else f":{config['bucket_mb']:g}")] = steps
    return out


def med(values) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def summarise(name: str, steps0: list[dict], steps1: list[dict], bwd0_ms: float) -> dict:
    """Per-step figures over both ranks (ms), medians over steps."""
    rows = []
    for s0, s1 in zip(steps0, steps1):
        start = min(s0["t"][0], s1["t"][0])
        bwd_end = max(s0["t"][2], s1["t"][2])
        step_end = max(s0["t"][4], s1["t"][4])
        n = len(s0["comm"])
        skew = [abs(s0["comm"][i][0] - s1["comm"][i][0]) for i in range(n)]
        done = [max(s0["comm"][i][1], s1["comm"][i][1]) for i in range(n)]
        launched = [max(s0["comm"][i][0], s1["comm"][i][0]) for i in range(n)]
        # service: from the later rank's launch (or the previous completion) to completion
        service = [done[i] - max(launched[i], done[i - 1] if i else 0.0) for i in range(n)]
        after = [i for i in range(n) if done[i] > bwd_end]
        drain = [service[i] for i in after if i > 0 and done[i - 1] > bwd_end]
        during = [service[i] for i in range(1, n) if done[i] <= bwd_end]
        rows.append({"bwd": max(s0["t"][2] - s0["t"][1], s1["t"][2] - s1["t"][1]) * 1e3,
                     "first_svc": service[0] * 1e3 if n else float("nan"),
                     "svc": med(service[1:]) * 1e3 if n > 1 else float("nan"),
                     "skew": med(skew) * 1e3 if skew else 0.0, "n_after": len(after),
                     "drain": med(drain) * 1e3, "during": med(during) * 1e3,
                     "first_after_wait": ((done[after[0]] - bwd_end) * 1e3 if after else 0.0),
                     "tail": (step_end - bwd_end) * 1e3, "step": (step_end - start) * 1e3,
                     "n": n, "mb": sum(c[2] for c in s0["comm"]) / 2**20})
    summary = {k: med(r[k] for r in rows) for k in rows[0]}
    summary["bwd0"] = bwd0_ms
    return summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None,
                   help="a preset (default: transformer-small, shrunk as workflow_grid runs it)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--configs", default="overlap,bucketed:0.25,bucketed:1,bucketed:4,naive")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out", default="out/small_collectives.json")
    p.add_argument("--emulate-hosts", type=int, default=None,
                   help="run the ranks in that many network namespaces (realrun's emulation)")
    p.add_argument("--link-gbit", type=float, default=None,
                   help="with --emulate-hosts: shape each host's link to this many Gbit/s")
    a = p.parse_args()
    from realrun.workload import Workload
    spec = parse_model(TFM[0]).shrunk(**TFM[1]) if a.model is None else parse_model(a.model)
    configs = [config_of(None)]
    for item in a.configs.split(","):
        name, _, mb = item.partition(":")
        configs.append(config_of(make_strategy(name, float(mb)) if mb else make_strategy(name),
                                 float(mb) if mb else None))
    payload = {"workload": Workload.preset(spec, a.batch, a.seq).to_json(), "configs": configs,
               "steps": a.steps, "warmup": a.warmup, "seed": 0, "optimizer": "sgd",
               "precision": "fp32"}
    load = os.getloadavg()[0]
    ranks = run_world("experiments.small_collectives:rank", payload, timeout_s=600,
                      emulate_hosts=a.emulate_hosts, link_gbit=a.link_gbit)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(ranks, f)
    bwd0 = med(max(s0["t"][2] - s0["t"][1], s1["t"][2] - s1["t"][1]) * 1e3
               for s0, s1 in zip(ranks[0]["compute-only"], ranks[1]["compute-only"]))
    step0 = med((max(s0["t"][4], s1["t"][4]) - min(s0["t"][0], s1["t"][0])) * 1e3
                for s0, s1 in zip(ranks[0]["compute-only"], ranks[1]["compute-only"]))
    hosts = f" in {a.emulate_hosts} hosts at {a.link_gbit:g} Gbit/s" if a.emulate_hosts else ""
    print(f"# {spec.name} b{a.batch}s{a.seq}, 2 Gloo ranks{hosts}, {a.steps} steps; "
          f"load {load:.2f} -> "
          f"{os.getloadavg()[0]:.2f}; compute-only: backward {bwd0:.2f} ms, step {step0:.2f} ms")
    cols = ["n", "mb", "step", "bwd", "skew", "first_svc", "svc", "during", "n_after",
            "first_after_wait", "drain", "tail"]
    print("config          " + " ".join(f"{c:>9}" for c in cols))
    for name in ranks[0]:
        if name == "compute-only":
            continue
        s = summarise(name, ranks[0][name], ranks[1][name], bwd0)
        print(f"{name:15} " + " ".join(f"{s[c]:9.2f}" for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
