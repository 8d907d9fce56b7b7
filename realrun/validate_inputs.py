"""validate, steps 1 and 2: calibrate the link and profile the model on the same ranks.

Split from :mod:`realrun.validate` (the pipeline); the rank targets here run under
``run_world`` and are named ``realrun.validate_inputs:<fn>``.
"""
from __future__ import annotations

import dataclasses
import math
import os
import statistics
import tempfile
import time
from typing import TYPE_CHECKING

from simddp.link import Link
from simddp.models import ModelSpec
from simddp.profile import ModelProfile

if TYPE_CHECKING:  # only an annotation here; realrun.validate imports this module
    from realrun.validate import ValidateSettings

# ---------------------------------------------------------------------------------------------
# 1. calibrate


def calibrate_link(s: ValidateSettings, max_bytes: int | None = None,
                   piecewise: bool = False) -> tuple[Link, dict]:
    """A short in-process ``python -m calibrate`` on the same world: (Link, its summary).

    Sizes 4 KiB .. ``max_bytes`` (default: the model's gradient bytes rounded up to a power
    of two, 1-64 MiB) ×2, ``calibrate_iters`` timed all-reduces each, contention measured.
    ``piecewise`` fits two lines joined at a fitted breakpoint. Off by default: it fits the
    large sizes better, but on this box it made 3 of 4 validation cells worse (the small-size
    line is fitted to erratic 0.5-3 ms medians; docs/VALIDATION.md).
    """
    from calibrate.cli import analyse, parse_args
    from calibrate.cli import measure as cal_measure
    if max_bytes is None:
        total = 4 * s.spec.n_params  # float32 gradients
        max_bytes = min(64 << 20, max(1 << 20, 1 << math.ceil(math.log2(max(total, 1)))))
    with tempfile.TemporaryDirectory(prefix="validate-cal-") as tmp:
        argv = ["--min-bytes", "4K", "--max-bytes", str(max_bytes), "--factor", "2",
                "--iters", str(s.calibrate_iters), "--warmup", "3", "--contention-repeats", "5",
                "--world-sizes", str(s.world_size), "--no-plots", "--out", tmp,
                "--threads-per-rank", str(s.threads), "--timeout-s", str(s.timeout_s)]
        if s.emulate_hosts is not None:
            argv += ["--emulate-hosts", str(s.emulate_hosts)]
        if s.link_gbit is not None:
            argv += ["--link-gbit", f"{s.link_gbit:g}"]
        if piecewise:
            argv += ["--piecewise"]
        a = parse_args(argv)
        a.load_before = os.getloadavg()[0]
        ranks = cal_measure(a, s.world_size)
        run = analyse(a, s.world_size, ranks)
    link = run["link"]
    fit = run["fit"]
    info = {"alpha_us": link.alpha_s * 1e6, "busbw_gbps": link.busbw_gbps, "r2_log": fit.r2,
            "piecewise": piecewise, "pieces": [dataclasses.asdict(p) for p in link.pieces],
            "rows": [{"size_bytes": r["size_bytes"], "time_us": r["time_s"] * 1e6,
                      "fit_us": link.allreduce_s(r["size_bytes"], s.world_size) * 1e6}
                     for r in run["rows"]],
            "compute_slowdown": link.compute_slowdown, "comm_slowdown": link.comm_slowdown,
            "sizes": f"4K..{max_bytes}", "iters": s.calibrate_iters}
    return link, info


def sequence_rank(payload: dict, ctx) -> dict:
    """Rank function: this model's gradients all-reduced one after another, as naive does.

    One barrier, then every tensor's blocking all-reduce back to back (no barrier between),
    ``repeats`` times; seconds per repeat. calibrate times each all-reduce alone after a
    barrier; a step issues them in a row, and that is what this measures.
    """
    import torch
    import torch.distributed as dist
    grads = [torch.ones(max(1, n // 4)) for n in payload["tensor_bytes"]]
    for g in grads:  # connections and buffers for each size
        dist.all_reduce(g)
    times = []
    for _ in range(payload["repeats"]):
        dist.barrier()
        t0 = time.perf_counter()
        for g in grads:
            dist.all_reduce(g)
        times.append(time.perf_counter() - t0)
    return {"times_s": times}


def sequence_alpha(s: ValidateSettings, link: Link, tensor_bytes: list[int]) -> dict:
    """The per-collective cost of back-to-back all-reduces of this model's tensors, on the
    same world: α_seq = (median sequence time − Σ bandwidth terms) / tensors, max over ranks.
    """
    from realrun.launch import run_world
    ranks = run_world("realrun.validate_inputs:sequence_rank",
                      {"tensor_bytes": tensor_bytes, "repeats": 15},
                      world_size=s.world_size, threads_per_rank=s.threads,
                      timeout_s=s.timeout_s, emulate_hosts=s.emulate_hosts,
                      link_gbit=s.link_gbit)
    seq_s = max(statistics.median(r["times_s"]) for r in ranks)
    alpha0 = link.for_world(s.world_size)
    bw_s = sum(alpha0.allreduce_s(n, s.world_size) - alpha0.allreduce_s(0, s.world_size)
               for n in tensor_bytes)
    return {"sequence_s": seq_s, "tensors": len(tensor_bytes),
            "alpha_seq_s": max(0.0, (seq_s - bw_s) / len(tensor_bytes)),
            "alpha_calibrated_s": link.alpha_s}


# ---------------------------------------------------------------------------------------------
# 2. profile


def profile_rank(payload: dict, ctx) -> dict:
    """Rank function: profile the model on this rank while the other ranks do the same."""
    import torch

    from realrun.profiler import profile_model
    from simddp.io import profile_to_json
    torch.set_flush_denormal(True)
    spec = ModelSpec(**payload["spec"])
    profile, measured = profile_model(spec, batch=payload["batch"], seq=payload["seq"],
                                      repeats=payload["repeats"], warmup=payload["warmup"],
                                      optimizer=payload["optimizer"], seed=payload["seed"])
    measured["copy"] = measure_copies(list(profile.tensor_bytes), ctx, payload["repeats"])
    measured["plain_steps_s"] = plain_steps(spec, payload, ctx)
    return {"profile": profile_to_json(profile), "measured": measured}


def plain_steps(spec: ModelSpec, payload: dict, ctx) -> list[float]:
    """Seconds of hook-free compute-only steps, each after a barrier (as realrun bench times
    them): the parent takes the max over ranks per step, since a step ends with the slowest."""
    import torch
    import torch.distributed as dist

    from realrun.bench import make_optimizer
    from realrun.models import build_model, make_batch
    torch.manual_seed(payload["seed"])
    model = build_model(spec)
    inputs, target = make_batch(spec, payload["batch"], payload["seq"], payload["seed"] + ctx.rank)
    opt = make_optimizer(payload["optimizer"], model.parameters())
    times = []
    for i in range(3 + max(10, payload["repeats"])):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        model(inputs, target).backward()
        opt.step()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    return times


def measure_copies(tensor_bytes: list[int], ctx, repeats: int) -> dict:
    """GB/s of realrun.DDP's gradient copies over this model's tensors, all ranks at once.

    The three passes of flat_bucket.py: copy-in scaled by 1/p (``torch.mul(g, 1/p, out=)``),
    copy-out (``g.copy_(view)``) and a lone tensor's in-place ``g.div_(p)``; each is timed
    over every tensor of the model, median of ``repeats`` after a barrier. ``copy_gbps`` (what
    simddp's Link uses for all three) = bytes moved / time over copy-in plus copy-out.
    """
    import statistics

    import torch
    import torch.distributed as dist
    grads = [torch.randn(max(1, n // 4)) for n in tensor_bytes]
    flat = torch.empty(sum(g.numel() for g in grads))
    views, offset = [], 0
    for g in grads:
        views.append(flat[offset:offset + g.numel()])
        offset += g.numel()
    scale = 1.0 / ctx.world_size

    def copy_in():
        for g, v in zip(grads, views):
            torch.mul(g, scale, out=v)

    def copy_out():
        for g, v in zip(grads, views):
            g.copy_(v)

    def in_place():
        for g in grads:
            g.div_(1.0)  # same pass as div_(p), without shrinking the values every repeat

    out = {}
    for name, fn in (("copy_in", copy_in), ("copy_out", copy_out), ("in_place", in_place)):
        fn()
        times = []
        for _ in range(max(5, repeats)):
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[f"{name}_s"] = statistics.median(times)
    total = sum(g.numel() * 4 for g in grads)
    out["bytes"] = total
    out["copy_gbps"] = 2 * total / (out["copy_in_s"] + out["copy_out_s"]) / 1e9
    out["in_place_gbps"] = total / out["in_place_s"] / 1e9
    return out


def measure_profile(s: ValidateSettings) -> tuple[ModelProfile, dict]:
    """(profile rescaled to hook-free totals, what was measured) from ``world_size`` ranks."""
    from realrun.launch import run_world
    from simddp.io import profile_from_json
    payload = {"spec": spec_dict(s.spec), "batch": s.batch, "seq": s.seq,
               "repeats": s.profile_repeats, "warmup": 3, "optimizer": s.optimizer,
               "seed": s.seed}
    ranks = run_world("realrun.validate_inputs:profile_rank", payload, world_size=s.world_size,
                      threads_per_rank=s.threads, timeout_s=s.timeout_s)
    raw = profile_from_json(ranks[0]["profile"])
    measured = ranks[0]["measured"]
    # The per-layer split comes from hooks; the totals from the hook-free passes, which is
    # what a training step without profiler hooks pays.
    profile = raw.scaled(forward_s=measured["forward_s_unhooked"],
                         backward_s=measured["backward_s_unhooked"])
    # Jitter: a step ends when its slowest rank ends, so the compute a step sees is the
    # per-step max over ranks of hook-free steps (median over steps), not rank 0's median.
    # Both medians come from the same steps, so a load burst during profiling scales both and
    # cancels in the ratio; only the ranks' spread remains. Always measured; applied only
    # with rank_max (off by default: it did not help on the grid, docs/VALIDATION.md).
    steps0 = ranks[0]["measured"]["plain_steps_s"]
    per_step = [max(r["measured"]["plain_steps_s"][i] for r in ranks)
                for i in range(len(steps0))]
    k = statistics.median(per_step) / statistics.median(steps0)
    measured["rank_max_factor"] = k
    measured["rank_max_step_s"] = statistics.median(per_step)
    measured["rank_max_applied"] = bool(s.rank_max)
    if s.rank_max:
        profile = profile.scaled(forward_s=profile.forward_s * k,
                                 backward_s=profile.backward_s * k,
                                 optimizer_s=profile.optimizer_s * k)
    return profile, measured


def spec_dict(spec: ModelSpec) -> dict:
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


