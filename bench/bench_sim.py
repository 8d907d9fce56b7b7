"""How fast is the simulator? The sweep users run, and how it scales with tensor count.

    python bench/bench_sim.py                 # parts a and b, 7 repeats each after a warm-up
    python bench/bench_sim.py --repeats 15
    python bench/bench_sim.py --part command --repeats 9 [--before DIR]   # (c)
    python bench/bench_sim.py --part tensors --repeats 3                  # (d)

(a) The 5 × 20 sweep: naive, flat, overlap, bucketed, ddp × 20 bucket sizes (1…1000 MB, log
    spaced) on transformer-xl (435 gradient tensors) over eth-100g, 2 ranks — what
    ``python -m simddp sweep --model transformer-xl`` does. Bucket-less strategies do not
    depend on the bucket size, so the 100 configurations are 43 simulations. Reports the
    whole ``simddp.sweep()`` (plans + engine) and the engine alone, with events/s
    (SimPy events processed, as counted by ``engine.simulate(stats=...)``).
(b) Scaling: mlp-Nx1024 profiles with N = 100, 1k, 3k, 10k gradient tensors (4 MiB each),
    strategies naive (one all-reduce per tensor: the most events) and ddp at 25 MB. If the
    engine is linear, µs per tensor stays about constant.

(c) The command users run, with prediction ranges (``simddp sweep`` always has them):
    ``python -m simddp sweep --model transformer-xl --bucket-mb 1,2,...,20 --format json``
    (83 rows), as a whole process, alternated with a bare ``python -c "import simpy, numpy"``
    so both see the same load; the ratio of the two is steadier than either. Then
    ``sweep(..., ranges=True)`` in-process: the simulation's share of the command.
    ``--before DIR``: also time the command from a checkout of older code in DIR, in the same
    rotation (e.g. ``git worktree add /tmp/before c829ea1~1``).
(d) Tensor count with ranges: ffn-Nx512x2048 (2N tensors of 4 MiB) swept over naive,
    overlap, bucketed, ddp × the 10 default bucket sizes, N up to 5000 (10k tensors).

Each figure is the median over the repeats with min–max spread; wall time (perf_counter) and
CPU time (process_time — steadier when other jobs share the machine). A script, not a test:
it asserts nothing about time (tests/simddp/test_predictor.py counts the work instead).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import numpy as np  # noqa: E402
import simpy  # noqa: E402

from simddp.sim.engine import simulate  # noqa: E402
from simddp.inputs.resolved import Inputs  # noqa: E402
from simddp.presets.links import get_link  # noqa: E402
from simddp.presets.models import build_profile, parse_model  # noqa: E402
from simddp.planning.plans import plan  # noqa: E402
from simddp.planning.strategy import STRATEGIES  # noqa: E402
from simddp.predict.sweep import DEFAULT_BUCKET_MB, sweep, sweep_strategies  # noqa: E402

SWEEP_STRATEGIES = ("naive", "flat", "overlap", "bucketed", "ddp")
SWEEP_BUCKETS_MB = tuple(float(f"{x:.3g}") for x in np.geomspace(1, 1000, 20))
SCALING_TENSORS = (100, 1_000, 3_000, 10_000)
ROOT = Path(__file__).resolve().parents[1]
XL_COMMAND = ("sweep", "--model", "transformer-xl", "--bucket-mb",
              ",".join(str(mb) for mb in range(1, 21)), "--format", "json")
RANGE_STRATEGIES = ("naive", "overlap", "bucketed", "ddp")
FFN_LAYERS = (500, 1_500, 5_000)       # x2 tensors each: 1k, 3k, 10k


def timed(fn, repeats: int):
    """Run ``fn`` once to warm up, then ``repeats`` times: (wall list, cpu list, last value)."""
    value = fn()
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        value = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return wall, cpu, value


def spread(xs: list[float], scale: float = 1e3, unit: str = "ms") -> str:
    return (f"{statistics.median(xs) * scale:8.1f} {unit} "
            f"(min {min(xs) * scale:.1f}, max {max(xs) * scale:.1f})")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (f"Python {platform.python_version()}, SimPy {simpy.__version__}, {cpu}, "
            f"{os.cpu_count()} CPUs, load average {load}")


def bench_sweep(repeats: int) -> None:
    profile = build_profile(parse_model("transformer-xl"))
    link = get_link("eth-100g")
    configs = sweep_strategies(SWEEP_STRATEGIES, SWEEP_BUCKETS_MB)
    print(f"(a) sweep: {len(SWEEP_STRATEGIES)} strategies × {len(SWEEP_BUCKETS_MB)} bucket sizes "
          f"({SWEEP_BUCKETS_MB[0]:g}…{SWEEP_BUCKETS_MB[-1]:g} MB) on {profile.name} "
          f"({profile.n_tensors} tensors), {link.name}, 2 ranks = {len(configs)} plans; "
          f"{repeats} repeats after 1 warm-up")

    def whole():
        stats: dict = {}
        sweep(profile, link, 2, SWEEP_STRATEGIES, SWEEP_BUCKETS_MB, stats=stats)
        return stats

    wall, cpu, stats = timed(whole, repeats)
    print(f"    sweep() incl. plans  wall {spread(wall)}   cpu {spread(cpu)}   "
          f"({stats['work']['engine_runs']} engine runs: equal layouts run once)")
    plans = [plan(profile, s) for s in configs]
    inputs = Inputs(profile, link, 2)

    def engine_only():
        stats: dict = {}
        for p in plans:
            simulate(p, inputs, record=False, stats=stats)
        return stats["events"]

    wall, cpu, events = timed(engine_only, repeats)
    rates = [events / w for w in wall]
    print(f"    engine only          wall {spread(wall)}   cpu {spread(cpu)}")
    print(f"    {events} events per sweep: {statistics.median(rates) / 1e3:.0f}k events/s "
          f"(min {min(rates) / 1e3:.0f}k, max {max(rates) / 1e3:.0f}k, wall)")


def bench_scaling(repeats: int) -> None:
    link = get_link("eth-100g")
    print(f"(b) scaling with tensor count: mlp-Nx1024 (4 MiB per tensor), {link.name}, 2 ranks; "
          f"engine only, {repeats} repeats after 1 warm-up")
    print(f"    {'tensors':>7}  {'strategy':<8}  {'collectives':>11}  {'events':>7}  "
          f"{'median ms':>9}  {'min–max ms':>15}  {'µs/tensor':>9}  {'k events/s':>10}  "
          f"{'plan ms':>7}")
    for n in SCALING_TENSORS:
        profile = build_profile(parse_model(f"mlp-{n}x1024"))
        inputs = Inputs(profile, link, 2)
        for name in ("naive", "ddp"):
            strategy = sweep_strategies([name], [25.0])[0]
            p_wall, _, p = timed(lambda: plan(profile, strategy), repeats)

            def run():
                stats: dict = {}
                simulate(p, inputs, record=False, stats=stats)
                return stats["events"]

            wall, _, events = timed(run, repeats)
            med = statistics.median(wall)
            print(f"    {n:>7}  {name:<8}  {len(p.collectives):>11}  {events:>7}  "
                  f"{med * 1e3:>9.1f}  {min(wall) * 1e3:>6.1f}–{max(wall) * 1e3:<8.1f}  "
                  f"{med / n * 1e6:>9.2f}  {events / med / 1e3:>10.0f}  "
                  f"{statistics.median(p_wall) * 1e3:>7.1f}")


def run_s(argv: list[str], pythonpath: Path = ROOT) -> float:
    """Wall seconds of one ``python argv`` process (from start-up to exit)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *argv], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=pythonpath,
                   env={**os.environ, "PYTHONPATH": str(pythonpath)})
    return time.perf_counter() - t0


def bench_command(repeats: int, before: Path | None) -> None:
    print(f"(c) the xl sweep with ranges as a command: python -m simddp {' '.join(XL_COMMAND)}; "
          f"{repeats} rounds after 1 warm-up, alternated with a bare import")
    cases = {"bare": ["-c", "import simpy, numpy"], "command": ["-m", "simddp", *XL_COMMAND]}
    paths = {"bare": ROOT, "command": ROOT}
    if before is not None:
        cases["before"], paths["before"] = cases["command"], before
    times: dict[str, list[float]] = {k: [] for k in cases}
    for i in range(repeats + 1):
        for k, argv in cases.items():
            t = run_s(argv, paths[k])
            if i:
                times[k].append(t)
    for k, ts in times.items():
        ratio = statistics.median(t / b for t, b in zip(ts, times["bare"]))
        print(f"    {k:<8} wall {spread(ts)}   median per-round ratio to bare "
              f"{ratio:.2f}")
    profile = build_profile(parse_model("transformer-xl"))
    link = get_link("eth-100g")

    def inside():
        stats: dict = {}
        sweep(profile, link, 2, list(STRATEGIES), range(1, 21), ranges=True, stats=stats)
        return stats

    wall, cpu, stats = timed(inside, repeats)
    print(f"    sweep(ranges=True) wall {spread(wall)}   cpu {spread(cpu)}   "
          f"{stats['events']} events, {stats['work']}")


def bench_tensors(repeats: int) -> None:
    link = get_link("eth-100g")
    print(f"(d) tensors with ranges: ffn-Nx512x2048, {', '.join(RANGE_STRATEGIES)} × "
          f"{len(DEFAULT_BUCKET_MB)} bucket sizes, {link.name}, 2 ranks; {repeats} repeats "
          f"after 1 warm-up (sweep) and {repeats} commands")
    print(f"    {'tensors':>7}  {'rows':>4}  {'runs':>4}  {'events':>8}  {'sweep s':>7}  "
          f"{'min–max s':>11}  {'cpu s':>5}  {'cpu ms/tensor':>13}  {'command s':>9}  "
          f"{'min–max s':>11}")
    for n in FFN_LAYERS:
        profile = build_profile(parse_model(f"ffn-{n}x512x2048"))

        def inside():
            stats: dict = {}
            rows = sweep(profile, link, 2, RANGE_STRATEGIES, ranges=True, stats=stats)
            return len(rows), stats

        wall, cpu, (rows, stats) = timed(inside, repeats)
        cmd = [run_s(["-m", "simddp", "sweep", "--model", f"ffn-{n}x512x2048", "--strategies",
                      ",".join(RANGE_STRATEGIES), "--format", "json"]) for _ in range(repeats)]
        med, cpu_s, tensors = statistics.median(wall), statistics.median(cpu), profile.n_tensors
        print(f"    {tensors:>7}  {rows:>4}  {stats['work']['engine_runs']:>4}  "
              f"{stats['events']:>8}  {med:>7.2f}  {min(wall):>5.2f}–{max(wall):<5.2f}  "
              f"{cpu_s:>5.2f}  {cpu_s / tensors * 1e3:>13.3f}  {statistics.median(cmd):>9.2f}  "
              f"{min(cmd):>5.2f}–{max(cmd):<5.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7, help="measured runs per figure (default 7)")
    ap.add_argument("--part", choices=("all", "sweep", "scaling", "command", "tensors"),
                    default="all", help="all: (a) and (b)")
    ap.add_argument("--before", type=Path, help="(c): also time the command from this "
                    "checkout of older code")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    print(machine())
    if args.part in ("all", "sweep"):
        bench_sweep(args.repeats)
    if args.part in ("all", "scaling"):
        bench_scaling(args.repeats)
    if args.part == "command":
        bench_command(args.repeats, args.before)
    if args.part == "tensors":
        bench_tensors(args.repeats)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
