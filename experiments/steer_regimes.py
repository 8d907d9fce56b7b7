"""Where an emulated host's receive work runs, and how much a launch's speed depends on it.

    python experiments/steer_regimes.py                        # 3 launches per policy, interleaved
    python experiments/steer_regimes.py --launches 5 --policies host,hash

Each launch is a fresh 2-rank world on emulated hosts at 2 Gbit/s (realrun/launch/netns.py),
timing experiments/fsdp_host_work.py's items on the transformer (compute-only, fsdp, zero2 and their
plans' waited-for collectives alone, ``wire:*``), round-robin, the step = max over ranks.
A policy is where each host's NIC and switch port steer received flows (RPS):

- ``host``: host i's to CPU i, mod the CPUs (what realrun does, realrun/launch/host_stack.py);
- ``hash``: over all CPUs, each flow to one by the hash of its ports (realrun before
  2026-11-27): a new placement, drawn at random, per launch;
- ``one``: every host's to the first CPU.

What this answers: whether the same items' medians move between launches more than within
one. Results: docs/results/2026-11-27-steering-regimes.md.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "experiments"))
from realrun.launch import host_stack  # noqa: E402

POLICIES = {"host": host_stack.host_cpus,
            "hash": lambda index, cpus: set(cpus),
            "one": lambda index, cpus: {min(cpus)}}
SHOWN = ("compute-only", "fsdp", "zero2", "wire:fsdp", "wire:zero2")


def launch(policy: str, rounds: int, chunk: int) -> dict[str, float]:
    """One world under ``policy``: each item's median step (ms) and fsdp's host."""
    import fsdp_host_work
    from realrun.launch import run_world
    from realrun.workload import Workload
    from simddp.presets.models import parse_model
    model, shrink, batch, seq = fsdp_host_work.MODELS["tfm"]
    spec = parse_model(model).shrunk(**shrink)
    payload = {"workload": Workload.preset(spec, batch, seq).to_json(), "seed": 0,
               "optimizer": "sgd", "precision": "fp32", "rounds": rounds, "chunk": chunk,
               "warmup": 2}
    host_stack.host_cpus = POLICIES[policy]    # netns.py looks it up per cluster
    ranks = run_world("fsdp_host_work:rank", payload, world_size=2, threads_per_rank=1,
                      timeout_s=300, emulate_hosts=2, link_gbit=2.0)
    med = {k: float(np.median(np.max([r[k] for r in ranks], axis=0))) * 1e3 for k in SHOWN}
    med["host fsdp"] = med["fsdp"] - med["compute-only"] - med["wire:fsdp"]
    return med


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=3, help="launches per policy")
    ap.add_argument("--policies", default="host,hash,one", help=", ".join(POLICIES))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=2)
    a = ap.parse_args()
    policies = a.policies.split(",")
    if unknown := set(policies) - set(POLICIES):
        ap.error(f"unknown policy {sorted(unknown)}; choose from {', '.join(POLICIES)}")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [ROOT, os.path.join(ROOT, "experiments"), os.environ.get("PYTHONPATH", "")])
    print(f"# transformer, 2 Gloo ranks x 1 thread, emulated hosts at 2 Gbit/s; {a.rounds} rounds"
          f" x {a.chunk} steps per item and launch; medians in ms; load {os.getloadavg()[0]:.2f}")
    print(f"{'launch':>6} {'policy':6} " + " ".join(f"{k:>12}" for k in (*SHOWN, "host fsdp")))
    seen: dict[str, list[dict[str, float]]] = {p: [] for p in policies}
    for i in range(a.launches):
        for policy in policies:             # interleaved, so drift hits every policy alike
            med = launch(policy, a.rounds, a.chunk)
            seen[policy].append(med)
            print(f"{i:6d} {policy:6} " + " ".join(f"{med[k]:12.1f}" for k in med), flush=True)
    print(f"# min-max over launches; load {os.getloadavg()[0]:.2f}")
    for policy, meds in seen.items():
        print(f"{'':6} {policy:6} " + " ".join(
            f"{min(m[k] for m in meds):6.0f}-{max(m[k] for m in meds):<5.0f}" for k in meds[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
