"""realrun.DDP's hook path, timed two ways: step medians over the plain step (as ``realrun
profile`` derives ``hook_s`` and ``launch_s``) against the hook calls' own clocks.

    python experiments/hook_calls.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32

One world of 2 Gloo ranks. Each rank runs, round-robin as realrun/ddp_host_costs.py does (3
warm-up steps each, then ``--turns`` turns of 3 steps, each after a barrier): the plain
step; realrun's per-parameter wrapper ("overlap": N hooks, N launches) and its one-bucket
step ("bucketed" 1e6 MB: N hooks, 1 launch), both on the rank's own 1-rank group, as the
profile runs them; and the same wrapper on the 2-rank group, in place. Every DDP's gradient
hooks (``_on_grad_ready``) and its ``finish_gradient_synchronization`` are clocked per step
on perf_counter. Printed, medians over steps of the slower rank (ms): the step, the step
over the plain one, the hooks' calls, the finish call, and ``hook_s``/``launch_s`` solved
both ways (realrun.ddp_host_costs.hook_fields). Numbers from this 2-vCPU VM:
docs/results/2026-11-26-flat-host.md.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from experiments._model_run import model_run_args, run_ranks  # noqa: E402
from realrun.configs import config_of  # noqa: E402
from realrun.ddp_host_costs import (SharedWeights, hook_fields, measure_copies,  # noqa: E402
                                    share_optimizer_state, solo_trainer)
from realrun.steps import Trainer  # noqa: E402
from realrun.workload import Workload  # noqa: E402
from simddp.strategy import make_strategy  # noqa: E402

WARMUP_STEPS, TURN_STEPS = 3, 3


def clock_calls(trainer: Trainer, spent: dict[str, float]) -> None:
    """Add each hook call's and the sync call's seconds to ``spent`` (instance wrappers; the
    executor holds the bound finish_gradient_synchronization as ``trainer.sync``)."""
    ddp, finish = trainer.model, trainer.sync
    on_ready = ddp._on_grad_ready

    def hook(tid: int) -> None:
        t0 = time.perf_counter()
        on_ready(tid)
        spent["hooks"] += time.perf_counter() - t0

    def finished() -> None:
        t0 = time.perf_counter()
        finish()
        spent["finish"] += time.perf_counter() - t0
    ddp._on_grad_ready, trainer.sync = hook, finished


def rank(payload: dict, ctx) -> dict:
    """Per trainer, per timed step: {"step", "hooks", "finish"} seconds; and the copy rates."""
    torch.set_flush_denormal(True)
    workload = Workload(**payload["workload"])
    plain = Trainer(config_of(None), workload, ctx, payload)
    weights, shared = SharedWeights(plain), {}
    trainers = {"plain": plain,
                "wrapper": solo_trainer("wrapper", weights, ctx, payload, shared),
                "bucket": solo_trainer("bucket", weights, ctx, payload, shared),
                "in place": Trainer(config_of(make_strategy("overlap")), weights, ctx, payload)}
    spent = {name: {"hooks": 0.0, "finish": 0.0} for name in trainers}
    for name, trainer in trainers.items():
        if name != "plain":
            share_optimizer_state(plain, trainer)
            clock_calls(trainer, spent[name])
    for _ in range(WARMUP_STEPS):
        for trainer in trainers.values():
            trainer.step()
            trainer.optimizer.zero_grad(set_to_none=True)
    out: dict[str, list[dict]] = {name: [] for name in trainers}
    for _ in range(payload["turns"]):
        for name, trainer in trainers.items():
            for _ in range(TURN_STEPS):
                spent[name].update(hooks=0.0, finish=0.0)
                ctx.barrier()
                t0 = time.perf_counter()
                trainer.step()
                out[name].append({"step": time.perf_counter() - t0, **spent[name]})
            trainer.optimizer.zero_grad(set_to_none=True)
    sizes = [p.numel() * p.element_size() for p in plain.model.parameters() if p.requires_grad]
    return {"steps": out, "copy": measure_copies(sizes, ctx, 9), "tensor_bytes": sizes}


def medians_ms(ranks: list[dict]) -> dict[str, dict[str, float]]:
    """Per trainer and quantity, the median over steps of the max over ranks, in ms."""
    out = {}
    for name in ranks[0]["steps"]:
        per_step = zip(*(r["steps"][name] for r in ranks))
        rows = [{k: max(s[k] for s in step) for k in ("step", "hooks", "finish")}
                for step in per_step]
        out[name] = {k: statistics.median(row[k] for row in rows) * 1e3 for k in rows[0]}
    return out


def main() -> int:
    args, workload, payload = model_run_args("hook_calls", __doc__, {"turns": 8})
    ranks, load = run_ranks("hook_calls", args, payload)
    ms = medians_ms(ranks)
    n = len(ranks[0]["tensor_bytes"])
    print(f"# {workload.name}, batch {args.batch} x seq {args.seq}, {n} gradients, 2 ranks, "
          f"{args.turns} turns of {TURN_STEPS}; load {load:.2f} -> {os.getloadavg()[0]:.2f}; "
          "medians of the slower rank, ms")
    print(f"{'':10} {'step':>8} {'- plain':>8} {'hooks':>8} {'finish':>8} {'calls':>8}")
    for name, m in ms.items():
        over = m["step"] - ms["plain"]["step"]
        print(f"{name:10} {m['step']:8.2f} {over:8.2f} {m['hooks']:8.2f} {m['finish']:8.2f} "
              f"{m['hooks'] + m['finish']:8.2f}")
    copy, sizes = ranks[0]["copy"], ranks[0]["tensor_bytes"]
    by_steps = hook_fields({"plain_s": ms["plain"]["step"] / 1e3,
                            "wrapper_s": ms["wrapper"]["step"] / 1e3,
                            "bucket_s": ms["bucket"]["step"] / 1e3}, copy, sizes)
    by_calls = hook_fields({"plain_s": 0.0,
                            "wrapper_s": (ms["wrapper"]["hooks"] + ms["wrapper"]["finish"]) / 1e3,
                            "bucket_s": (ms["bucket"]["hooks"] + ms["bucket"]["finish"]) / 1e3},
                           copy, sizes)
    for how, f in (("step medians", by_steps), ("the calls", by_calls)):
        print(f"from {how:12}: hook_s {f['hook_s'] * 1e6:6.1f} µs, launch_s "
              f"{f['launch_s'] * 1e6:6.1f} µs; N x (hook + launch) "
              f"{n * (f['hook_s'] + f['launch_s']) * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
