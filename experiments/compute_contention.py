"""How much a backward slows under all-reduces in flight, by what the stream is made of.

    python experiments/compute_contention.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32 [--emulate-hosts 2 --link-gbit 2]

Why: the engine slows compute by one factor while any collective is in flight, the one the
model's own stream measured (``realrun profile``: one all-reduce per gradient tensor, mostly
fixed per-call work for the transformer). On the emulated 2 Gbit/s link, torch DDP's
backward at 1-4 MB buckets (experiments/step_phases.py) was predicted 4-14 ms longer than
measured, while on loopback it was within 1-3 ms. Is a collective's fixed part harder on
the backward than its bytes, which mostly wait on a shaped wire?

One world of 2 Gloo ranks (realrun/launch/contention_timing.py's protocol: alone, alone, both
started together, ``--repeats`` times each, every rank): two computes, the model's forward +
backward and calibrate's MLP (mlp-8x1024 at 16 rows, calibrate/settings.py), each against
the streams: ``model`` (its gradients' sizes, one each), ``1MiB`` and ``4MiB`` (its
gradient bytes in 1 MiB or 4 MiB tensors), ``calibrate`` (8 x 4 MiB, calibrate's). Printed
per pair: the medians (ms) and the per-repeat (compute, comm) factors' median
(simddp.contention.combine_contention) and p10-p90.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from experiments._model_run import model_run_args, run_ranks  # noqa: E402
from realrun.configs import config_of  # noqa: E402
from realrun.launch.contention_timing import median_overlap, mlp_step  # noqa: E402
from realrun.steps import Trainer  # noqa: E402
from realrun.workload import Workload  # noqa: E402
from simddp.contention import combine_contention  # noqa: E402

MIB = 2 ** 20
CALIBRATE_STREAM = [4 * MIB] * 8     # calibrate's default: the mlp-8x1024's gradients


def streams(tensor_bytes: list[int]) -> dict[str, list[int]]:
    """Each stream's all-reduce sizes in bytes: the model's, its bytes in 1 and 4 MiB, and
    calibrate's."""
    total = sum(tensor_bytes)

    def chunks(size: int) -> list[int]:
        return [size] * (total // size) + ([total % size] if total % size else [])
    return {"model": tensor_bytes, "1MiB": chunks(MIB), "4MiB": chunks(4 * MIB),
            "calibrate": CALIBRATE_STREAM}


def rank(payload: dict, ctx) -> dict:
    """{compute name: {stream name: median_overlap's dict}}."""
    torch.set_flush_denormal(True)
    workload = Workload(**payload["workload"])
    trainer = Trainer(config_of(None), workload, ctx, payload)

    def model_step() -> None:
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.loss().backward()
    sizes = [p.numel() * p.element_size() for p in trainer.model.parameters()
             if p.requires_grad]
    computes = {"model": model_step, "mlp": mlp_step([1024] * 8, 16, ctx.device)}
    out: dict[str, dict] = {}
    for name, compute in computes.items():
        for sname, nbytes in streams(sizes).items():
            stream = [torch.zeros(max(1, n // 4)) for n in nbytes]
            out.setdefault(name, {})[sname] = median_overlap(compute, stream, ctx,
                                                             payload["repeats"])
    return out


def main() -> int:
    args, workload, payload = model_run_args("compute_contention", __doc__, {"repeats": 9})
    ranks, load = run_ranks("compute_contention", args, payload)
    print(f"# {workload.name}, batch {args.batch} x seq {args.seq}, 2 ranks, "
          f"{args.repeats} repeats; load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"{'compute':8}{'stream':>10}{'calls':>6}{'MiB':>6}{'W ms':>8}{'T ms':>8}"
          f"{'D ms':>8}{'Ts ms':>8}   compute x (p10-p90)      comm x (p10-p90)")
    for name in ranks[0]:
        for sname in ranks[0][name]:
            per_rank = [r[name][sname] for r in ranks]
            c = combine_contention(per_rank)
            low, high = c["spread"]
            m = per_rank[0]
            print(f"{name:8}{sname:>10}{m['stream_count']:6d}{m['stream_bytes'] / MIB:6.1f}"
                  + "".join(f"{m[k] * 1e3:8.1f}" for k in ("compute_alone_s", "comm_alone_s",
                                                          "compute_together_s",
                                                          "comm_together_s"))
                  + f"   {c['compute_slowdown_raw']:5.2f} ({low[0]:.2f}-{high[0]:.2f})"
                  + f"      {c['comm_slowdown_raw']:5.2f} ({low[1]:.2f}-{high[1]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
