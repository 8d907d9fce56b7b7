"""Record the FSDP2 and no_sync trace fixtures of this folder (torch, 2 Gloo ranks on CPU).

    python tests/data/traces/record.py          # writes fsdp2-tiny.rank{0,1}.json.gz,
                                                # no_sync-tiny.rank{0,1}.json.gz

A 1-block transformer (width 64, vocabulary 512: 12 gradient tensors, 0.4 MiB) trained by
realrun (realrun/trace_job.py): torch FSDP2 at its finest units (each module with
parameters one ``fully_shard``), and torch DDP at 0.05 MB buckets over 2 micro-steps, the
first under ``no_sync()``; 2 steps each recorded with ``record_shapes=True``, as
docs/TRACES.md says. Timings in them are whatever the host did that minute: tests read the
structure (units, collectives, gradients, micro-steps), never the times.
"""
from __future__ import annotations

import gzip
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

from realrun.configs import config_of  # noqa: E402
from realrun.launch import run_world  # noqa: E402
from realrun.workload import Workload  # noqa: E402
from simddp.planning.strategy import make_strategy  # noqa: E402
from simddp.presets.models import ModelSpec  # noqa: E402

TINY = Workload.preset(ModelSpec("transformer", layers=1, d_model=64, d_ff=256, heads=2,
                                 vocab=512, name="tiny"), batch=2, seq=16)
JOBS = {"fsdp2-tiny": (make_strategy("fsdp"), 1), "no_sync-tiny": (make_strategy("ddp", 0.05), 2)}


def main() -> None:
    for name, (strategy, accum) in JOBS.items():
        tmp = tempfile.mkdtemp()
        try:
            run_world("realrun.trace_job:trace_rank", {
                "workload": TINY.to_json(), "config": config_of(strategy),
                "accum_steps": accum, "warmup": 3, "steps": 2,
                "out": os.path.join(tmp, "rank{rank}.json")}, world_size=2, timeout_s=300)
            for r in range(2):
                with open(os.path.join(tmp, f"rank{r}.json"), "rb") as f:
                    data = f.read()
                with open(os.path.join(HERE, f"{name}.rank{r}.json.gz"), "wb") as f:
                    f.write(gzip.compress(data, mtime=0))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
