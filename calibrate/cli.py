"""``python -m calibrate``: measure all-reduce times (and reduce-scatter, all-gather), fit α and
busbw per kind, write a simddp link file.

    python -m calibrate                                   # 2 local Gloo ranks, 1 KiB..64 MiB x2
    python -m calibrate --out cal --piecewise             # two lines with a fitted breakpoint
    python -m calibrate --world-sizes 2,4 --out cal       # cal/link-p2.json, cal/link-p4.json
    python -m calibrate --emulate-hosts 2 --link-gbit 1 --min-bytes 1M --max-bytes 16M
    python -m calibrate --kinds none                      # all-reduce only (no kind_fits)
    python -m calibrate --emulate-hosts 2 --world-sizes 4 --link-gbit 2   # + per level (2 x 2)
    torchrun --nproc-per-node 8 -m calibrate --backend nccl --max-bytes 1G
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:29500 -m calibrate --backend nccl
    python -m simddp sweep --link cal/link.json ...       # use the result

Writes under --out (default ``calibrate-out``): allreduce.json (everything), allreduce.csv,
allreduce_time.png, allreduce_busbw.png, kinds.csv (reduce-scatter and all-gather, unless
--kinds none) and link.json (link-p<N>.json per world size when several are swept). Nothing
is written unless every rank succeeded. On a world of >1 node with >1 rank each, each level
is calibrated too, and link.json gets its levels section (docs/FORMATS.md). Exit codes: 0
done, 1 a rank failed (one line naming it), 2 bad input (one line naming the flag). Under
torchrun every rank ends with realrun.launch.finish.finish_torchrun(code) (barrier, flush,
os._exit): torch 2.13's Gloo cannot abort it in teardown after the calibration is written.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
import sys

from calibrate.settings import (DTYPE_BYTES, KINDS, SEQUENCE_BYTES, SEQUENCE_COUNT,
                                SEQUENCE_REPEATS, CalibrateSettings, parse_bytes)
from realrun.launch.env import is_torchrun
from realrun.launch.errors import LaunchError, NetnsUnavailable
from realrun.launch.finish import finish_torchrun
from realrun.launch.world import SWEEP_TIMEOUT_S, WorldConfig, add_world_args
from simddp.cli.main import join_negative_values
from simddp.errors import InputError, error_line
from simddp.inputs.io import load_profile, write_atomic
from simddp.report.outdir import check_out_dir


class _Parser(argparse.ArgumentParser):
    def parse_known_args(self, args=None, namespace=None):  # "--max-bytes -1": our message
        argv = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(join_negative_values(argv), namespace)

    def error(self, message: str):  # argparse prints usage + error on 2 lines; we want one
        raise InputError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m calibrate", description=(
        "Time all-reduce over a range of sizes on real ranks, fit t(n) = α + 2(p−1)/p·n/busbw, "
        "do the same for reduce-scatter and all-gather (α + (p−1)/p·n/busbw), measure "
        "compute/comm contention and write a link file for `python -m simddp`."))
    p.add_argument("--min-bytes", default="1K", help="smallest message, e.g. 1024, 1K, 1MiB "
                   "(K/M/G are binary; default 1K)")
    p.add_argument("--max-bytes", default="64M", help="largest message (default 64M)")
    p.add_argument("--factor", default="2", help="size multiplier between steps, > 1 (default 2)")
    p.add_argument("--dtype", default="float32", choices=sorted(DTYPE_BYTES))
    p.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size (5)")
    p.add_argument("--iters", type=int, default=20, help="timed all-reduces per size (20)")
    p.add_argument("--threads-per-rank", type=int, default=1, help="torch threads per rank (1)")
    p.add_argument("--piecewise", action="store_true", help="fit two lines with a breakpoint "
                   "(protocol switches)")
    p.add_argument("--holdout-every", type=int, default=3, help="hold out every Nth size to "
                   "score the fit (3; 0 = none)")
    p.add_argument("--sequence-count", type=int, default=SEQUENCE_COUNT, help="all-reduces "
                   "per sequence for α as a step sees it (default %(default)s; "
                   "calibrate/rig/sequence.py)")
    p.add_argument("--sequence-bytes", default=None, help="size of each (default 64K)")
    p.add_argument("--sequence-repeats", type=int, default=SEQUENCE_REPEATS,
                   help="repeats, median (%(default)s)")
    p.add_argument("--kinds", default=",".join(KINDS), metavar="LIST",
                   help="other collectives to sweep and fit on the same sizes, written as the "
                        "link's kind_fits (sharded strategies use them): comma list of "
                        f"{', '.join(KINDS)}, or none (default %(default)s)")
    p.add_argument("--kinds-max-bytes", default=None, metavar="BYTES",
                   help="largest size of the reduce-scatter and all-gather sweep (default a "
                        "quarter of --max-bytes, or all sizes if that leaves fewer than 3 to "
                        "fit: on Gloo they take a few times an all-reduce's time at large "
                        "sizes, docs/FINDINGS.md#sharded-steps-fsdp2-on-gloo)")
    p.add_argument("--no-sequence", action="store_true", help="skip the sequence step: α is "
                   "then the sweep's fitted intercept (a lone all-reduce)")
    p.add_argument("--profile", metavar="FILE", default=None,
                   help="a simddp profile (realrun profile --out): measure α on its own "
                        "gradient sizes, one all-reduce per tensor back to back, and contention "
                        "with a stream of its tensors; --max-bytes defaults to its gradient "
                        "total (calibrate/settings.py, for_model)")
    p.add_argument("--levels", action=argparse.BooleanOptionalAction, default=None,
                   help="also calibrate each level of a two-level world (inside every node "
                        "at once, across nodes in all local-rank groups at once) and write "
                        "them as the link file's levels (default: on where the world has >1 "
                        "node and >1 rank per node: --emulate-hosts, or torchrun's "
                        "LOCAL_WORLD_SIZE < WORLD_SIZE; --no-levels skips it)")
    p.add_argument("--no-contention", action="store_true", help="skip the contention step")
    p.add_argument("--contention-mlp", default="8x1024", metavar="DEPTHxWIDTH",
                   help="the backward-like workload of the contention step: a forward + "
                        "backward of DEPTH Linear(WIDTH, WIDTH) layers against its gradients' "
                        "all-reduces (default %(default)s)")
    p.add_argument("--contention-rows", type=int, default=16,
                   help="rows (tokens) the contention MLP computes on (default %(default)s)")
    p.add_argument("--contention-repeats", type=int, default=5, help="repeats, median (5)")
    p.add_argument("--name", default=None, help="link name (default from host/backend/world)")
    p.add_argument("--out", default="calibrate-out", help="output directory (calibrate-out)")
    p.add_argument("--force", action="store_true", help="replace an earlier calibration's "
                   "files in --out (default: move them into --out/earlier-<time>/)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--explain", action="store_true",
                   help="print every measurement behind the link file's numbers (each α, "
                        "held-out errors, the curve, the other kinds); --out/report.txt "
                        "always has them")
    p.add_argument("--from-nccl-tests", nargs="+", default=None, metavar="LOG",
                   help="write --out/link.json from nccl-tests or rccl-tests logs "
                        "(all_reduce_perf, reduce_scatter_perf, all_gather_perf, "
                        "alltoall_perf) instead of measuring: no GPU, no torch "
                        "(calibrate/from_nccl_tests.py)")
    p.add_argument("--ranks", type=int, default=None, metavar="N",
                   help="with --from-nccl-tests: the ranks, for a log that lists no devices "
                        "and whose busbw/algbw does not tell them")
    p.add_argument("--nodes", type=int, default=None, metavar="M",
                   help="with --from-nccl-tests: the nodes, for a log that does not list them")
    add_world_args(p, timeout_s=SWEEP_TIMEOUT_S, world_sizes=True)
    return p


def parse_args(argv: list[str] | None) -> tuple[CalibrateSettings, argparse.Namespace]:
    """The settings from the flags, and the flags themselves (--out, --no-plots); InputError
    (one line) on the first bad one."""
    a = build_parser().parse_args(argv)
    if a.from_nccl_tests:  # reads logs, measures nothing: no settings
        return None, a
    try:
        world_sizes = (None if a.world_sizes is None
                       else tuple(int(x) for x in a.world_sizes.split(",")))
    except ValueError:
        raise InputError(f"--world-sizes: {a.world_sizes!r} is not a comma list of distinct "
                         "integers >= 2 (e.g. 2,4)") from None
    try:
        factor = float(a.factor)
    except ValueError:
        raise InputError(f"--factor must be a number > 1 (e.g. 2), got {a.factor!r}") from None
    settings = CalibrateSettings(
        min_bytes=parse_bytes("--min-bytes", a.min_bytes),
        max_bytes=parse_bytes("--max-bytes", a.max_bytes), factor=factor, dtype=a.dtype,
        # the world size follows --world-sizes (checked there) or --emulate-hosts, else 2
        world=WorldConfig(backend=a.backend, emulate_hosts=a.emulate_hosts,
                          link_gbit=a.link_gbit, timeout_s=a.timeout_s),
        warmup=a.warmup, iters=a.iters, world_sizes=world_sizes,
        threads_per_rank=a.threads_per_rank, piecewise=a.piecewise,
        holdout_every=a.holdout_every, sequence=not a.no_sequence,
        sequence_count=a.sequence_count, sequence_repeats=a.sequence_repeats,
        kinds=_kinds(a.kinds), kinds_max_bytes=(
            None if a.kinds_max_bytes is None
            else parse_bytes("--kinds-max-bytes", a.kinds_max_bytes)),
        sequence_bytes=(SEQUENCE_BYTES if a.sequence_bytes is None
                        else parse_bytes("--sequence-bytes", a.sequence_bytes)),
        contention=not a.no_contention, contention_widths=_mlp_widths(a.contention_mlp),
        contention_rows=a.contention_rows,
        contention_repeats=a.contention_repeats, levels=a.levels, name=a.name,
        progress=sys.stderr.isatty())
    if a.profile is not None:
        profile = load_profile(a.profile)  # InputError on a missing or malformed file
        given = any(arg == "--max-bytes" or arg.startswith("--max-bytes=")
                    for arg in (argv if argv is not None else sys.argv[1:]))
        settings = settings.for_model(list(profile.tensor_bytes), max_bytes_given=given)
    if settings.backend == "nccl" and not _have_gpus():
        raise InputError("--backend nccl needs CUDA GPUs and none were found; use --backend gloo")
    if not is_torchrun() or os.environ["RANK"] == "0":  # rank 0 writes
        check_out_dir(a.out, files=("allreduce.json",), force=a.force)
    return settings, a


def _kinds(text: str) -> tuple[str, ...]:
    """'reduce_scatter,all_gather' -> that tuple; 'none' or '' -> (); checked by the settings.

    >>> _kinds("all_gather"), _kinds("none")
    (('all_gather',), ())
    """
    if text.strip().lower() in ("none", ""):
        return ()
    return tuple(k.strip().replace("-", "_") for k in text.split(","))


def _mlp_widths(text: str) -> tuple[int, ...]:
    """'8x1024' -> (1024,) * 8; InputError otherwise."""
    depth, _, width = text.lower().partition("x")
    if not (depth.isdigit() and width.isdigit() and int(depth) >= 1 and int(width) >= 1):
        raise InputError(f"--contention-mlp: {text!r} is not DEPTHxWIDTH (e.g. 8x1024)")
    return (int(width),) * int(depth)


def _have_gpus() -> bool:
    try:
        import torch
    except ModuleNotFoundError:
        return False  # the simulator's own install: the nccl error says to install torch
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def _measuring_modules():
    """(run, the report module, write_outputs); InputError naming what to install if torch or
    scipy is missing (the simulator's own install has neither)."""
    try:
        from calibrate import report
        from calibrate.calibration import run
        from calibrate.files import write_outputs
    except ModuleNotFoundError as e:
        if e.name not in ("torch", "scipy"):
            raise
        raise InputError(f"calibrating needs {e.name}: python -m pip install torch==2.13.0 "
                         "(or your CUDA build) then python -m pip install 'simddp[torch]'"
                         ) from None
    return run, report, write_outputs


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    finish_torchrun(code)  # under torchrun the process ends here, skipping Gloo's teardown
    return code


def _main(argv: list[str] | None) -> int:
    try:
        settings, a = parse_args(argv)
        if a.from_nccl_tests:
            from calibrate.from_nccl_tests import run_from_args
            return run_from_args(a)
        # the ranks' fork server imports torch while this process imports its own modules
        settings.world.prestart(settings.threads_per_rank)
        # torch, scipy and matplotlib only now: --help and bad flags need none of them
        run, report, write_outputs = _measuring_modules()
        cal = run(settings)
        if cal is None:  # a torchrun rank other than 0: rank 0 reports
            return 0
        details = Path(a.out) / "report.txt"
        paths = write_outputs(cal, a.out, plots=not a.no_plots) + [details]
        full = report.report_text(cal, paths)
        write_atomic(details, full)
        print(full if a.explain else report.summary_text(cal, paths, details), end="")
        return 0
    except InputError as e:
        print(error_line("calibrate", e), file=sys.stderr)
        return 2
    except (LaunchError, NetnsUnavailable) as e:
        if isinstance(e, NetnsUnavailable):  # no root / no `ip`: the flag can't work here
            print(error_line("calibrate", f"--emulate-hosts: {e}"), file=sys.stderr)
            return 2
        print(error_line("calibrate", e), file=sys.stderr)  # "rank 1 failed: ..."; nothing written
        return 1
