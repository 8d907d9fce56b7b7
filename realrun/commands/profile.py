"""Measure per-layer forward/backward seconds on every rank at once: a simddp profile.

    python -m realrun profile                                    # mlp-8x1024, batch 2 x seq 8
    python -m realrun profile --model transformer-small --layers 2 --d-model 256 --d-ff 1024 \\
        --heads 4 --vocab 2048 --batch 4 --seq 32 --repeats 20 --out out/profile.json
    python -m realrun profile --module examples/gpt2_tiny.py:build --precision bf16
    python -m realrun profile --fsdp --shard-unit-mb 1      # + torch FSDP2's host costs
    python -m simddp sweep --model out/profile.json              # simulate the measured model

Every module that owns trainable parameters gets its forward time (forward hooks) and
backward time (gradient-ready hooks), median of --repeats steps after --warmup; gaps between
hooks go to the next layer to finish (see realrun/layer_timing.py). Also measured: the order in
which gradients became ready, each tensor's bytes and the optimizer step. --world-size ranks
(default 2) profile at once, sharing the host as the real run will; the totals are scaled to
the slowest rank's plain step (--compute-basis), and the DDP implementations' host costs,
this model's compute/all-reduce contention and the step's spread are measured on the same
ranks and saved with the profile (realrun/profile_on_ranks.py), so ``simddp sweep --model FILE``
charges them. --fsdp also measures torch FSDP2's host work around its all-gathers and
reduce-scatters (the "fsdp" implementation that runs fsdp and zero2;
realrun/fsdp_host_costs.py), with the units of --shard-unit-mb. The profile is named like the model (``transformer-small[d_model=256,layers=2]``,
``gpt2_tiny:build``); how it was measured is stored next to it under "measured".
Its last line is its peak memory per rank beside a torch DDP step's, both measured on the
ranks (``measured.memory``): the profile holds one model at a time, about what the job holds.
On stderr (stdout is the profile's): first what will run, the steps each rank takes and the
memory the ranks need against this machine's (realrun/memory_fit.py; a preset that cannot
fit is refused, exit 2); then, for work longer than ~10 s, an estimate after the first step
and progress from rank 0 (realrun/step_progress.py).
"""
from __future__ import annotations

import argparse
import os
import sys

from realrun.commands.common import (add_host_turns_arg, add_model_args, require_int,
                                     resolve_workload)
from realrun.configs import COMPUTE_BASES
from realrun.launch.env import is_torchrun
from realrun.launch.world import SWEEP_TIMEOUT_S, add_world_args, world_from_args
from realrun.memory_fit import (CANNOT, CLOSE, Fit, fit_text, host_memory, judge, preset_need,
                                refusal, warning)
from simddp.errors import InputError
from simddp.planning.strategy import mb_to_bytes
from simddp.inputs.io import PROFILE_FORMAT, profile_to_json, save_json
from simddp.report.outdir import check_out_file as check_profile_file
from simddp.presets.models import ModelSpec
from simddp.report.table import host_line


def check_out_file(path: str, force: bool) -> None:
    """InputError now, before minutes of profiling, if ``path`` cannot be written or holds
    something other than a profile; an earlier profile there is kept under a dated name."""
    check_profile_file(path, PROFILE_FORMAT, force=force)

HELP = "measure per-layer forward/backward seconds of a preset or your model; write a profile"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    g = p.add_argument_group("measurement")
    g.add_argument("--repeats", type=int, default=10,
                   help="timed steps; each layer's time is their median (default %(default)s)")
    g.add_argument("--warmup", type=int, default=3, help="untimed steps first (default %(default)s)")
    g.add_argument("--device", default=None, choices=("cpu", "cuda"),
                   help="same as --backend gloo / nccl (nccl: the hooks record CUDA events, "
                        "read after each step)")
    add_host_turns_arg(g)
    g.add_argument("--compute-basis", choices=COMPUTE_BASES, default="slowest",
                   help="scale the compute totals to the slowest rank's plain step, per step, "
                        "as realrun bench times a step (default), or rank 0's")
    g.add_argument("--fsdp", action="store_true",
                   help="also measure torch FSDP2's host costs for fsdp/zero2 predictions "
                        "(adds its steps: ~5-30 s)")
    g.add_argument("--shard-unit-mb", type=float, default=None, metavar="MB",
                   help="with --fsdp: group layers into units of at least MB, as --shard-unit-mb "
                        "of bench/validate/sweep (default: one unit per layer)")
    g.add_argument("--out", default="out/profile.json",
                   help="profile JSON to write (default %(default)s)")
    g.add_argument("--force", action="store_true",
                   help="replace the file at --out (default: keep an earlier profile as "
                        "NAME.<time>.json; refuse any other file)")
    # two minutes, as calibrate: --fsdp's first FSDP2 steps and a shaped link are slow
    add_world_args(p, timeout_s=SWEEP_TIMEOUT_S, ranks_help=(
        "ranks profiling at once, as many as will train on this host: they share it, as in "
        "the real run (default 2; under torchrun, its world; 1: one process alone)"))


def run(args: argparse.Namespace) -> int:
    require_int("--repeats", args.repeats)
    require_int("--warmup", args.warmup, minimum=0)
    require_int("--host-turns", args.host_turns)
    if args.shard_unit_mb is not None:
        if not args.fsdp:
            raise InputError("--shard-unit-mb: only with --fsdp (it groups FSDP2's units)")
        mb_to_bytes(args.shard_unit_mb, "--shard-unit-mb")
    if args.device is not None:
        args.backend = {"cpu": "gloo", "cuda": "nccl"}[args.device]
    world = world_from_args(args)
    # the ranks' fork server imports torch (and --module's imports) meanwhile
    world.prestart(args.threads, args.module)
    workload = resolve_workload(args)  # a typo in --module fails before --out is touched
    leads = not is_torchrun() or os.environ["RANK"] == "0"
    fit = memory_fit(workload, world, args)   # None: rank 0 judges once its model is built
    if fit is not None and fit.verdict == CANNOT:
        raise InputError(refusal(fit, workload.name))
    if leads:
        check_out_file(args.out, args.force)
    from realrun.profile_on_ranks import planned_steps, profile_world  # torch, after the checks
    if leads:  # stderr: what will run and the memory it takes (stdout stays the profile's)
        planned = planned_steps(args.repeats, args.warmup, args.host_turns, world.world_size,
                                args.fsdp)
        print(plan_line(workload, world, args, planned, fit), file=sys.stderr)
        if fit is not None:
            print(f"profile: {fit_text(fit)}", file=sys.stderr)
            if fit.verdict == CLOSE:
                print(warning(fit), file=sys.stderr)
    try:
        out = profile_world(workload, world, threads=args.threads, repeats=args.repeats, warmup=args.warmup, optimizer=args.optimizer,
                            seed=args.seed, precision=args.precision,
                            compute_basis=args.compute_basis, fsdp=args.fsdp,
                            shard_unit_mb=args.shard_unit_mb, host_turns=args.host_turns,
                            progress={"tty": sys.stderr.isatty()}, memory_check=fit is None)
    except ValueError as e:  # run_world's checks: nccl without GPUs, emulate_hosts != ranks
        raise InputError(str(e).splitlines()[0]) from None
    if out is None:
        return 0  # a torchrun rank other than 0: rank 0 writes
    profile, measured, host = out
    save_json(args.out, {**profile_to_json(profile, host=host), "measured": measured})
    print(format_profile(profile, measured, args.out))
    print(f"# host costs (charged by simddp sweep --model {args.out}): {host_line(host)}")
    print(memory_line(measured["memory"]))
    return 0


def memory_fit(workload, world, args: argparse.Namespace) -> Fit | None:
    """How a preset's ranks fit this machine's RAM (realrun/memory_fit.py); None where it is
    known only once a rank has built the model (your own model) or holds a GPU."""
    if workload.spec is None or world.backend != "gloo":
        return None
    need = preset_need(ModelSpec(**workload.spec), workload.batch, workload.seq,
                       args.optimizer, args.precision)
    ranks = int(os.environ["LOCAL_WORLD_SIZE"]) if is_torchrun() else world.world_size
    return judge(need, ranks, host_memory())


def plan_line(workload, world, args: argparse.Namespace, planned: dict[str, int],
              fit: Fit | None) -> str:
    """What will run, before it runs: the model, its ranks, precision and optimizer, and the
    steps each rank takes in each phase (realrun.profile_on_ranks.planned_steps)."""
    if fit is not None:
        model = (f"{count_text(fit.need.n_params)} parameters, batch {workload.batch} x seq "
                 f"{workload.seq}")
    else:
        model = "your model" if workload.module else f"batch {workload.batch} x seq {workload.seq}"
    phases = "; ".join(f"{name} {steps}" for name, steps in planned.items())
    return (f"profile: {workload.name} ({model}) on {world.world_size} rank(s), "
            f"{args.precision}, {args.optimizer}: {sum(planned.values())} steps a rank "
            f"({args.warmup} warm-up + {args.repeats} timed with hooks + {args.repeats} "
            f"without; {phases})")


def count_text(n: int) -> str:
    """A parameter count to read at a glance.

    >>> count_text(969411840), count_text(8388608), count_text(5000)
    ('969 M', '8.39 M', '5,000')
    """
    if n >= 10**9:
        return f"{n / 1e9:.3g} B"
    return f"{n / 1e6:.3g} M" if n >= 10**6 else f"{n:,}"


def memory_line(memory: dict) -> str:
    """One line: the profile's peak memory per rank beside a torch DDP step's.

    >>> memory_line({"peak_bytes": 3 * 2**20, "peak_phase": "copies", "how": "VmHWM",
    ...              "torch_ddp_step_bytes": 2 * 2**20})
    '# peak memory per rank: profile 3 MiB (copies), a torch DDP step 2 MiB: x1.50 (VmHWM)'
    """
    ddp = memory.get("torch_ddp_step_bytes")
    ratio = f": x{memory['peak_bytes'] / ddp:.2f}" if ddp else ""
    ddp_text = f"{ddp / 2**20:.0f} MiB" if ddp is not None else "not measured"
    return (f"# peak memory per rank: profile {memory['peak_bytes'] / 2**20:.0f} MiB "
            f"({memory['peak_phase']}), a torch DDP step {ddp_text}{ratio} ({memory['how']})")


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
    basis, step_key = {"slowest": ("the slowest rank's", "slowest_step_s"),
                       "rank0": ("rank 0's", "rank0_step_s")}[measured["compute_basis"]]
    lines += [f"# total: forward {profile.forward_s * 1e3:.2f} ms (hook-free pass "
              f"{measured['forward_s_unhooked'] * 1e3:.2f}), backward "
              f"{profile.backward_s * 1e3:.2f} ms (hook-free pass "
              f"{measured['backward_s_unhooked'] * 1e3:.2f}), optimizer "
              f"{profile.optimizer_s * 1e3:.2f} ms; gradients "
              f"{profile.grad_total_bytes / 2**20:.2f} MiB in {profile.n_tensors} tensors",
              f"# measured on {measured['world_size']} rank(s) at once; scaled x"
              f"{measured['compute_scale']:.3f} to {basis} plain step "
              f"({measured[step_key] * 1e3:.2f} ms median); "
              f"its p5–p95 {measured['compute_spread'][0]:.2f}–"
              f"{measured['compute_spread'][1]:.2f} x the median",
              f"# gradient-ready order: {order}"]
    drift = drift_line(measured.get("plain_chunk_ms") or [])
    return "\n".join(lines + ([drift] if drift else []) + [f"# wrote {path}"])


DRIFT_WARN = 1.25  # chunk medians further apart than this: the machine moved, not the model


def drift_line(chunk_ms: list[float]) -> str | None:
    """A warning when the plain steps' chunks, spread over the profile's run, disagree by
    more than :data:`DRIFT_WARN`: a prediction inherits whichever stretch the profile met (a
    shared box's speed moves between stretches of seconds:
    docs/FINDINGS.md#drift-and-the-compute-only-anchor).

    >>> drift_line([148.0, 143.0, 67.0, 71.0]).split(": ")[2]
    'plain steps of 148, 143, 67, 71 ms in 4 stretches (x2.21 apart); predictions inherit it'
    >>> drift_line([80.0, 84.0, 78.0, 90.0]) is None
    True
    """
    if len(chunk_ms) < 2 or min(chunk_ms) <= 0 or max(chunk_ms) / min(chunk_ms) <= DRIFT_WARN:
        return None
    return (f"# warning: this machine's speed moved while profiling: plain steps of "
            f"{', '.join(f'{m:.0f}' for m in chunk_ms)} ms in {len(chunk_ms)} stretches "
            f"(x{max(chunk_ms) / min(chunk_ms):.2f} apart); predictions inherit it: profile "
            f"again when the machine is quiet, and read the prediction ranges")
