"""``python -m calibrate``: measure all-reduce times, fit α and busbw, write a simddp link file.

    python -m calibrate                                   # 2 local Gloo ranks, 1 KiB..64 MiB x2
    python -m calibrate --out cal --piecewise             # two lines with a fitted breakpoint
    python -m calibrate --world-sizes 2,4 --out cal       # cal/link-p2.json, cal/link-p4.json
    python -m calibrate --emulate-hosts 2 --link-gbit 1 --min-bytes 1M --max-bytes 16M
    torchrun --nproc-per-node 8 -m calibrate --backend nccl --max-bytes 1G
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:29500 -m calibrate --backend nccl
    python -m simddp sweep --link cal/link.json ...       # use the result

Writes under --out (default ``calibrate-out``): allreduce.json (everything), allreduce.csv,
allreduce_time.png, allreduce_busbw.png and link.json (link-p<N>.json per world size when
several are swept). Nothing is written unless every rank succeeded. Exit codes: 0 done,
1 a rank failed (one line naming it), 2 bad input (one line naming the flag).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from calibrate.analysis import analyse
from simddp.errors import InputError

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmg]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2 ** 10, "m": 2 ** 20, "g": 2 ** 30}  # binary, like nccl-tests' -b/-e
_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR")
# Contention is measured on one all-reduce of this many bytes (or --max-bytes if smaller):
# ~25 ms on loopback here, i.e. ~90 matmul chunks of 0.28 ms overlap it.
_CONTENTION_BYTES = 16 * 2 ** 20


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage + error on 2 lines; we want one
        raise InputError(message)


def build_parser() -> argparse.ArgumentParser:
    from calibrate.bench import DTYPES
    p = _Parser(prog="python -m calibrate", description=(
        "Time all-reduce over a range of sizes on real ranks, fit t(n) = α + 2(p−1)/p·n/busbw, "
        "measure compute/comm contention and write a link file for `python -m simddp`."))
    p.add_argument("--min-bytes", default="1K", help="smallest message, e.g. 1024, 1K, 1MiB "
                   "(K/M/G are binary; default 1K)")
    p.add_argument("--max-bytes", default="64M", help="largest message (default 64M)")
    p.add_argument("--factor", default="2", help="size multiplier between steps, > 1 (default 2)")
    p.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    p.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    p.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size (5)")
    p.add_argument("--iters", type=int, default=20, help="timed all-reduces per size (20)")
    p.add_argument("--world-sizes", default=None, help="comma list, e.g. 2,4: one run and one "
                   "link file each (default 2; under torchrun its world)")
    p.add_argument("--world-size", dest="world_sizes", help="same as --world-sizes N")
    p.add_argument("--threads-per-rank", type=int, default=1, help="torch threads per rank (1)")
    p.add_argument("--piecewise", action="store_true", help="fit two lines with a breakpoint "
                   "(protocol switches)")
    p.add_argument("--holdout-every", type=int, default=3, help="hold out every Nth size to "
                   "score the fit (3; 0 = none)")
    p.add_argument("--sequence-count", type=int, default=None, help="all-reduces per "
                   "sequence for α as a step sees it (default 32; calibrate/sequence.py)")
    p.add_argument("--sequence-bytes", default=None, help="size of each (default 64K)")
    p.add_argument("--sequence-repeats", type=int, default=None, help="repeats, median (10)")
    p.add_argument("--no-sequence", action="store_true", help="skip the sequence step: α is "
                   "then the sweep's fitted intercept (a lone all-reduce)")
    p.add_argument("--no-contention", action="store_true", help="skip the contention step")
    p.add_argument("--contention-bytes", default=None, help="all-reduce size for the "
                   "contention step (default min(16M, --max-bytes))")
    p.add_argument("--contention-repeats", type=int, default=5, help="repeats, median (5)")
    p.add_argument("--emulate-hosts", type=int, default=None, help="run each rank in its own "
                   "network namespace (root; must equal the world size)")
    p.add_argument("--link-gbit", type=float, default=None, help="shape each emulated host's "
                   "link to this many Gbit/s (needs --emulate-hosts)")
    p.add_argument("--name", default=None, help="link name (default from host/backend/world)")
    p.add_argument("--out", default="calibrate-out", help="output directory (calibrate-out)")
    p.add_argument("--timeout-s", type=float, default=120.0, help="per-collective timeout (120)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    return p


def parse_bytes(flag: str, text: str) -> int:
    """'64M' -> 67108864; InputError naming the flag otherwise."""
    m = _SIZE_RE.match(str(text))
    value = float(m.group(1)) * _UNITS[m.group(2).lower()] if m else 0
    if value < 1:
        raise InputError(f"{flag}: {text!r} is not a size >= 1 byte (e.g. 1024, 1K, 64MiB)")
    return int(value)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse and validate every flag; InputError (one line) on the first bad one."""
    from calibrate.bench import element_bytes, sweep_sizes
    a = build_parser().parse_args(argv)
    a.min_bytes = parse_bytes("--min-bytes", a.min_bytes)
    a.max_bytes = parse_bytes("--max-bytes", a.max_bytes)
    if a.min_bytes > a.max_bytes:
        raise InputError(f"--min-bytes {a.min_bytes} is larger than --max-bytes {a.max_bytes}")
    try:
        a.factor = float(a.factor)
    except ValueError:
        a.factor = float("nan")
    if not a.factor > 1:
        raise InputError(f"--factor must be a number > 1 (e.g. 2), got {a.factor!r}")
    from calibrate import sequence
    a.sequence_count = sequence.DEFAULT_COUNT if a.sequence_count is None else a.sequence_count
    a.sequence_repeats = (sequence.DEFAULT_REPEATS if a.sequence_repeats is None
                          else a.sequence_repeats)
    each = (sequence.DEFAULT_BYTES if a.sequence_bytes is None
            else parse_bytes("--sequence-bytes", a.sequence_bytes))
    if a.piecewise and not a.no_sequence:  # each piece keeps its own fitted α
        a.no_sequence = True
    for flag, value, low in (("--warmup", a.warmup, 0), ("--iters", a.iters, 1),
                             ("--sequence-count", a.sequence_count, 1),
                             ("--sequence-repeats", a.sequence_repeats, 1),
                             ("--threads-per-rank", a.threads_per_rank, 1),
                             ("--contention-repeats", a.contention_repeats, 1)):
        if value < low:
            raise InputError(f"{flag} must be an integer >= {low}, got {value}")
    if a.holdout_every < 0 or a.holdout_every == 1:
        raise InputError(f"--holdout-every must be 0 (none) or >= 2, got {a.holdout_every}")
    if not a.timeout_s > 0:
        raise InputError(f"--timeout-s must be > 0, got {a.timeout_s}")
    a.torchrun = all(v in os.environ for v in _TORCHRUN_VARS)
    a.world_sizes = _world_sizes(a)
    if a.link_gbit is not None and (a.emulate_hosts is None or not a.link_gbit > 0):
        raise InputError(f"--link-gbit {a.link_gbit}: needs --emulate-hosts and a rate > 0")
    if a.backend == "nccl" and not _have_gpus():
        raise InputError("--backend nccl needs CUDA GPUs and none were found; use --backend gloo")
    a.sizes_bytes = sweep_sizes(a.min_bytes, a.max_bytes, a.factor, element_bytes(a.dtype))
    from calibrate.fit import MIN_POINTS, heldout_mask
    n_fit = int((~heldout_mask(len(a.sizes_bytes), a.holdout_every)).sum())
    need = 2 * MIN_POINTS if a.piecewise else MIN_POINTS
    if n_fit < need:
        raise InputError(f"{len(a.sizes_bytes)} sizes ({a.min_bytes}..{a.max_bytes} x{a.factor:g}) "
                         f"leave {n_fit} to fit, need >= {need}: widen the range, lower "
                         "--factor or pass --holdout-every 0")
    a.contention_bytes = (min(_CONTENTION_BYTES, a.max_bytes) if a.contention_bytes is None
                          else parse_bytes("--contention-bytes", a.contention_bytes))
    # The sizes of one sequence; realrun validate replaces them with a model's gradients.
    a.sequence_sizes = None if a.no_sequence else [each] * a.sequence_count
    a.rank0 = not a.torchrun or os.environ["RANK"] == "0"
    if a.rank0:
        check_out_dir(a.out)
    return a


def _world_sizes(a: argparse.Namespace) -> list[int]:
    text = a.world_sizes
    if a.torchrun:
        env_world = int(os.environ["WORLD_SIZE"])
        if text not in (None, str(env_world)):
            raise InputError(f"--world-sizes {text}: torchrun started {env_world} ranks; "
                             "drop the flag or pass that number")
        text = str(env_world)
    if text is None:
        text = str(a.emulate_hosts or 2)
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(s < 2 for s in sizes) or len(set(sizes)) != len(sizes):
        raise InputError(f"--world-sizes: {text!r} is not a comma list of distinct integers "
                         ">= 2 (e.g. 2,4)")
    if a.emulate_hosts is not None and sizes != [a.emulate_hosts]:
        raise InputError(f"--emulate-hosts {a.emulate_hosts}: one rank per emulated host, so "
                         f"the world size must be {a.emulate_hosts}, got {text}")
    return sizes


def _have_gpus() -> bool:
    import torch
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def check_out_dir(out: str) -> None:
    """InputError unless files can be written in ``out`` (created later, only on success)."""
    path = Path(out).absolute()
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise InputError(f"--out {out}: {probe} is not a directory")
    if probe == path:
        try:
            fd, tmp = tempfile.mkstemp(dir=path, prefix=".calibrate-probe-")
            os.close(fd)
            os.unlink(tmp)
            return
        except OSError as e:
            raise InputError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: cannot create it, {probe} is not writable")


def measure(a: argparse.Namespace, world_size: int) -> list[dict] | None:
    """All ranks' raw results for one world size (None on torchrun ranks > 0)."""
    from realrun.launch import run_world
    contention = None if a.no_contention else {
        "size_bytes": a.contention_bytes, "dtype": a.dtype, "repeats": a.contention_repeats}
    sequence = None if not a.sequence_sizes else {
        "sizes_bytes": a.sequence_sizes, "dtype": a.dtype, "repeats": a.sequence_repeats}
    payload = {"sizes_bytes": a.sizes_bytes, "dtype": a.dtype, "warmup": a.warmup,
               "iters": a.iters, "contention": contention, "sequence": sequence,
               "progress": True}
    try:
        return run_world("calibrate.bench:run_rank", payload, world_size=world_size,
                         backend=a.backend, threads_per_rank=a.threads_per_rank,
                         timeout_s=a.timeout_s, emulate_hosts=a.emulate_hosts,
                         link_gbit=a.link_gbit)
    except ValueError as e:  # the launcher's bad-argument errors, e.g. nccl without CUDA
        raise InputError(str(e).splitlines()[0]) from None


def main(argv: list[str] | None = None) -> int:
    start_s = time.perf_counter()
    from calibrate.report import print_report, write_outputs
    try:
        a = parse_args(argv)
        a.load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        raw = [(p, measure(a, p)) for p in a.world_sizes]
        if not a.rank0:
            return 0
        runs = [analyse(a, p, ranks) for p, ranks in raw]
        paths = write_outputs(a, runs)
        print_report(a, runs, paths, time.perf_counter() - start_s)
        return 0
    except InputError as e:
        print(f"calibrate: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        from realrun.launch.errors import LaunchError, NetnsUnavailable
        if isinstance(e, NetnsUnavailable):  # no root / no `ip`: the flag can't work here
            print(f"calibrate: error: --emulate-hosts: {e}", file=sys.stderr)
            return 2
        if not isinstance(e, LaunchError):
            raise
        print(f"calibrate: {e}", file=sys.stderr)  # "rank 1 failed: ..."; nothing written
        return 1
