"""Contention measured two ways on the same ranks: a queued stream, and DDP's own pattern.

    python experiments/contention_patterns.py                     # mlp-8x1024, batch 2 x seq 8
    python experiments/contention_patterns.py --model mlp-8x1024 --batch 4 --seq 16 --repeats 15

Each repeat, on 2 Gloo ranks, after a barrier each (realrun/launch/contention_timing.py's protocol):

- compute alone: forward + backward of the model (``W``);
- comm alone: all-reduces of its gradients' sizes, queued at once, waited for (``T``);
- queued: the stream queued, then forward + backward (its end ``D``), then waited (``Ts``);
- DDP pattern: forward + backward with a hook per parameter that queues that gradient's
  all-reduce (on a buffer of its size) the moment the gradient is ready, as DDP's overlap
  does (backward end ``Dd``, last all-reduce end ``Tsd``).

Then both are inverted with simddp's engine (simddp/contention.py for the queued stream; for
the DDP pattern a 2-D search for the (compute, comm) slowdowns with which the engine's
overlap plan of this model's profile ends its backward and its last all-reduce at ``Dd`` and
``Tsd``). Prints the medians and the factors each pattern gives.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def rank(payload: dict, ctx) -> dict:
    import torch
    import torch.distributed as dist

    from realrun.launch.contention_timing import median_overlap
    from realrun.layer_timing import profile_workload
    from realrun.configs import config_of
    from realrun.steps import Trainer
    from realrun.workload import Workload
    from simddp.io import profile_to_json
    torch.set_flush_denormal(True)
    workload = Workload(**payload["workload"])
    profile, _ = profile_workload(workload, seed=0, rank=ctx.rank, repeats=10, warmup=3,
                                  optimizer="sgd", device=ctx.device, precision="fp32")
    trainer = Trainer(config_of(None), workload, ctx, payload)
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    buffers = {id(p): torch.zeros_like(p) for p in params}
    state = {"on": False, "works": []}

    def hook(p) -> None:
        if state["on"]:
            state["works"].append(dist.all_reduce(buffers[id(p)], async_op=True))
    for p in params:
        p.register_post_accumulate_grad_hook(hook)

    def compute() -> None:
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.loss().backward()
    stream = [torch.zeros_like(p) for p in reversed(params)]
    queued = median_overlap(compute, stream, ctx, payload["repeats"])
    ddp = []
    for _ in range(payload["repeats"] + 2):
        ctx.barrier()
        state["on"], state["works"] = True, []
        start = time.perf_counter()
        compute()
        backward_end = time.perf_counter() - start
        for work in state["works"]:
            work.wait()
        ddp.append((backward_end, time.perf_counter() - start))
        state["on"] = False
    ddp = ddp[2:]
    return {"profile": profile_to_json(profile), "queued": queued,
            "ddp_backward_end_s": statistics.median(d[0] for d in ddp),
            "ddp_comm_end_s": statistics.median(d[1] for d in ddp)}


def invert_ddp(profile, compute_s: float, comm_s: float, backward_end_s: float,
               comm_end_s: float) -> tuple[float, float, float, float]:
    """(compute, comm) slowdowns with which the engine's overlap plan ends its backward and
    its last all-reduce where they were measured; then the fit's two ends, in seconds."""
    from simddp import Link, make_strategy, plan, simulate
    k = compute_s / (profile.forward_s + profile.backward_s)  # forward + backward, no optimizer
    p = profile.scaled(forward_s=profile.forward_s * k, backward_s=profile.backward_s * k,
                       optimizer_s=0.0)
    # α 0 and busbw such that the gradients' all-reduces alone take what was measured
    busbw = profile.grad_total_bytes / comm_s / 1e9
    overlap = plan(p, make_strategy("overlap"))

    def ends(cs: float, ms: float) -> tuple[float, float]:
        r = simulate(p, Link("fit", 0.0, busbw, compute_slowdown=cs, comm_slowdown=ms),
                     overlap, 2)
        bwd = max(s.end_s for s in r.spans if s.kind == "backward")
        return bwd, max(s.end_s for s in r.spans if s.kind == "all-reduce")
    best = None
    for i in range(81):
        for j in range(61):
            cs, ms = 1 + i * 0.05, 1 + j * 0.05
            d, t = ends(cs, ms)
            err = (d / backward_end_s - 1) ** 2 + (t / comm_end_s - 1) ** 2
            if best is None or err < best[0]:
                best = (err, cs, ms, d, t)
    return best[1:]


def main() -> int:
    from realrun.launch import run_world
    from realrun.workload import Workload
    from simddp.contention import combine_contention
    from simddp.io import profile_from_json
    from simddp.presets.models import parse_model
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp-8x1024")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=9)
    a = ap.parse_args()
    workload = Workload.preset(parse_model(a.model), a.batch, a.seq)
    payload = {"workload": workload.to_json(), "repeats": a.repeats, "seed": 0,
               "optimizer": "sgd", "precision": "fp32"}
    ranks = run_world("contention_patterns:rank", payload, world_size=2, threads_per_rank=1,
                      timeout_s=120)
    q = combine_contention([r["queued"] for r in ranks])
    print(f"{a.model} batch {a.batch} x seq {a.seq}, {a.repeats} repeats, 2 Gloo ranks")
    for i, r in enumerate(ranks):
        qq = r["queued"]
        print(f"rank {i}: compute alone {qq['compute_alone_s'] * 1e3:.1f} ms, comm alone "
              f"{qq['comm_alone_s'] * 1e3:.1f}; queued: compute ends "
              f"{qq['compute_together_s'] * 1e3:.1f}, comm {qq['comm_together_s'] * 1e3:.1f}; "
              f"DDP pattern: backward ends {r['ddp_backward_end_s'] * 1e3:.1f}, last all-reduce "
              f"{r['ddp_comm_end_s'] * 1e3:.1f}")
    print(f"queued stream (simddp/contention.py): compute x{q['compute_slowdown']:.2f}, "
          f"comm x{q['comm_slowdown']:.2f}")
    r0 = ranks[0]
    profile = profile_from_json(r0["profile"])
    cs, ms, d, t = invert_ddp(profile, r0["queued"]["compute_alone_s"],
                              r0["queued"]["comm_alone_s"], r0["ddp_backward_end_s"],
                              r0["ddp_comm_end_s"])
    print(f"DDP pattern (engine inverted, rank 0): compute x{cs:.2f}, comm x{ms:.2f} "
          f"(engine: backward ends {d * 1e3:.1f}, last all-reduce {t * 1e3:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
