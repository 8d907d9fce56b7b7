"""Under torchrun: run_world gathers tests._launch_targets:allreduce_rank on rank 0, which
prints the list as JSON; every rank then ends with finish_torchrun (tests/realrun/test_launch.py).

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m tests._torchrun_gather
"""
from __future__ import annotations

import json
import os

from realrun.launch import finish_torchrun, run_world

if __name__ == "__main__":
    values = run_world("tests._launch_targets:allreduce_rank", {"n": 3},
                       world_size=int(os.environ["WORLD_SIZE"]), timeout_s=30.0)
    if values is not None:
        print(json.dumps(values))
    finish_torchrun(0)
