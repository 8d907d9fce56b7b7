"""FSDP2 under MixedPrecisionPolicy(param_dtype=bf16/fp16, reduce_dtype=fp32) on CUDA and NCCL
(issue 52 item 5, gpu tier): the check tests/realrun/test_fsdp_precision.py makes on Gloo.

    python -m pytest tests/gpu/test_fsdp_precision_cuda.py -m gpu -q   # on a CUDA machine

One rank on one GPU (two or more GPUs: two ranks too): trains like one process applying the
same casts within TOL (the CS336 assignment-2 FSDP test's 1e-4), computes on 16-bit weights,
all-gathers 16 bits and reduce-scatters fp32. At one rank FSDP2 copies instead of calling
reduce-scatter, so the reduce-scatter's dtype is checked from two ranks only. Not yet run on
a GPU: the session that wrote it had none.
"""
from __future__ import annotations

import pytest
import torch

from tests.gpu._cuda import GPU
from tests.realrun.test_fsdp_precision import CASES, TOL

pytestmark = GPU
DTYPE = {"bf16": "torch.bfloat16", "fp16": "torch.float16", None: "torch.float32"}


@pytest.mark.parametrize("world", [1, 2])
def test_fsdp2_with_the_policy_trains_like_one_process_on_cuda(world):
    if world > torch.cuda.device_count():
        pytest.skip(f"needs {world} GPUs, this machine has {torch.cuda.device_count()}")
    from realrun.launch import run_world
    ranks = run_world("tests.realrun._fsdp_precision_targets:train_and_compare",
                      {"cases": CASES}, world_size=world, backend="nccl", threads_per_rank=1,
                      timeout_s=300)
    for rank in ranks:
        for name, case in rank.items():
            dtype = DTYPE[CASES[name]["param_dtype"]]
            print(f"\n[gpu-tier] {name}, {world} rank(s): max |param - same-casts reference| "
                  f"{max(case['param_diffs']):.3g}, loss {max(case['loss_diffs']):.3g}, "
                  f"vs plain fp32 {max(case['plain_diffs']):.3g}")
            assert max(case["param_diffs"]) < TOL, (name, case["param_diffs"])
            assert max(case["loss_diffs"]) < TOL, (name, case["loss_diffs"])
            assert case["compute_dtypes"] == [dtype], name
            assert case["wire"]["all_gather_single"] == [dtype], name
            if world > 1:
                assert case["wire"]["reduce_scatter_single"] == ["torch.float32"], name
