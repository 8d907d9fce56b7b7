"""How long does ``simddp scale`` take over 8 → 1024 GPUs? The whole command, as users run it.

    python bench/bench_scale.py                  # 9 rounds after a warm-up
    python bench/bench_scale.py --repeats 15

The command is the 1024-GPU sweep (8 counts × ddp, fsdp, hsdp) on a 7B model
(llm-foundry's MPT-7B as an ``mpt:`` spec) on H100s over ib-8xndr, printed (``table``) and
printed and plotted (``--out``: scale.json and scale.png), each as a whole process, alternated
with a bare ``python -c "import simpy, numpy"`` so all see the same load (the pattern of
bench/bench_sim.py part c). Then the predictions alone, in-process. Medians with min–max of
wall time and of the process's CPU time (user + system: steadier on a shared box); the load
average before and after. A script, not a test: it asserts nothing about time.
"""
from __future__ import annotations

import argparse
import io
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.bench_sim import ROOT, machine, spread, timed  # noqa: E402

MPT_7B = ("mpt:d_model=4096,n_heads=32,n_layers=32,expansion_ratio=4,max_seq_len=2048,"
          "vocab_size=50368")
SCALE = ("scale", "--model", MPT_7B, "--device", "h100", "--link", "ib-8xndr", "--batch", "6",
         "--gpus", "8,16,32,64,128,256,512,1024", "--strategies", "ddp,fsdp,hsdp")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_cpu(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s user + system) of one ``python argv`` process, start-up to exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *argv], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=9, help="measured rounds (default 9)")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        cases = {"bare": ["-c", "import simpy, numpy"], "print": ["-m", "simddp", *SCALE],
                 "plot": ["-m", "simddp", *SCALE, "--out", tmp, "--force"]}
        print(f"python -m simddp {' '.join(SCALE)} [--out DIR]: {args.repeats} rounds after "
              "1 warm-up, alternated with a bare import")
        times: dict[str, list[float]] = {k: [] for k in cases}
        cpus: dict[str, list[float]] = {k: [] for k in cases}
        for i in range(args.repeats + 1):
            for k, command in cases.items():
                wall, cpu = run_cpu(command)
                if i:
                    times[k].append(wall)
                    cpus[k].append(cpu)
    for k, ts in times.items():
        print(f"    {k:<6} wall {spread(ts)}   cpu {spread(cpus[k])}")
    from simddp.cli.main import main as simddp_main

    def inside():
        with redirect_stdout(io.StringIO()):
            return simddp_main(list(SCALE))

    wall, cpu, _ = timed(inside, args.repeats)
    print(f"    in-process (parse, resolve, 24 predictions, text) wall {spread(wall)}   "
          f"cpu {spread(cpu)}")
    print(f"load average at the end: {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
