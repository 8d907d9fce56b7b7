"""One process, one model, plain steps: the step's wall time against its CPU time.

    python experiments/plain_step.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32
    for i in 1 2 3 4 5 6; do python experiments/plain_step.py ...; done      # process to process

No process group and nothing else alive: realrun's compute-only step (realrun.steps.Trainer,
the same seed and batch) on one intra-op thread, 5 warm-up steps, then ``--steps`` timed on
perf_counter and on ``time.process_time``. Printed: the medians of both. Equal medians mean
the process kept its vCPU for the whole step, so a slower step ran the same instructions
slower. On this VM (2026-11-26) the median moved 28.5–51.6 ms from process to process with
CPU time equal to wall time (docs/results/2026-11-26-drift-and-naive.md, section 8).
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from experiments._model_run import model_run_args  # noqa: E402
from realrun.configs import config_of  # noqa: E402
from realrun.steps import Trainer  # noqa: E402


class OneProcess:
    """The rank context a Trainer needs, for one process without a group."""

    rank, world_size, device, backend = 0, 1, torch.device("cpu"), "gloo"


def main() -> int:
    args, workload, payload = model_run_args("plain_step", __doc__, {"steps": 40})
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    trainer = Trainer(config_of(None), workload, OneProcess(), payload)
    for _ in range(5):
        trainer.step()
    wall, cpu = [], []
    for _ in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        trainer.step()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(f"{workload.name}: plain step {statistics.median(wall) * 1e3:.1f} ms wall, "
          f"{statistics.median(cpu) * 1e3:.1f} ms CPU (medians of {args.steps}); load "
          f"{os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
