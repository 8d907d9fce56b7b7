"""realrun's profile on one GPU, checked against torch's own measurements (gpu tier).

    python -m pytest tests/gpu -m gpu -q        # on a CUDA machine; docs/GPU.md

- ``realrun profile --backend nccl --world-size 1`` of a preset and of a Hugging Face GPT-2
  built from a config (examples/gpt2_tiny.py), fp32 and bf16, and the profile predicting 8
  GPUs (the "one GPU now, a cluster later" recipe);
- the per-layer CUDA-event times (realrun.layer_timing, summed over layers) against the GPU span
  of the same passes in a torch.profiler trace, within 10 %, on a GPU-bound model;
- the profile command's peak GPU memory against a torch DDP job's (issue 20, bug 2: xfail).
"""
from __future__ import annotations

import json
from statistics import median

import pytest
import torch

from simddp.io import load_profile
from tests.gpu._cuda import BIG, GPU, big_workload, peak_used_mib, run

pytestmark = GPU
SMALL = ["--model", "transformer-small", "--layers", "2", "--d-model", "256", "--d-ff", "1024",
         "--heads", "4", "--vocab", "2048", "--batch", "4", "--seq", "64"]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("model", ["preset", "gpt2"])
def test_profile_command_on_one_gpu_predicts_eight(tmp_path, model, precision):
    if model == "gpt2":
        pytest.importorskip("transformers")
    what = SMALL if model == "preset" else ["--module", "examples/gpt2_tiny.py:build"]
    out = tmp_path / "profile.json"
    proc = run(["-m", "realrun", "profile", *what, "--backend", "nccl", "--world-size", "1",
                "--precision", precision, "--repeats", "5", "--warmup", "2", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    measured, profile = json.loads(out.read_text())["measured"], load_profile(out)
    assert measured["precision"] == precision and "cuda" in str(measured["device"])
    assert profile.forward_s > 0 and profile.backward_s > 0
    assert all(x.forward_s >= 0 and x.backward_s >= 0 for x in profile.layers)
    proc = run(["-m", "simddp", "sweep", "--model", str(out), "--link", "nvlink-h100",
                "--world-size", "8", "--strategies", "ddp", "--bucket-mb", "1,25"])
    assert proc.returncode == 0, proc.stderr[-3000:]


def gpu_spans(path) -> dict[str, float]:
    """Seconds from the first kernel's start to the last one's end, of the kernels launched
    inside each ``gpu-tier:PHASE`` range (a kernel names its launch by args.correlation)."""
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    ranges = {e["name"].split(":")[1]: (e["ts"], e["ts"] + e["dur"]) for e in events
              if e["name"].startswith("gpu-tier:") and e.get("cat") == "user_annotation"}
    launched = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get(
                    "args", {})}
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    spans = {}
    for phase, (a, b) in ranges.items():
        mine = [k for k in kernels if a <= launched.get(k["args"].get("correlation"), -1) <= b]
        assert mine, f"no kernel launched inside gpu-tier:{phase}"
        spans[phase] = (max(k["ts"] + k["dur"] for k in mine) - min(k["ts"] for k in mine)) / 1e6
    return spans


def test_cuda_event_layer_times_match_a_profiler_trace(tmp_path):
    from torch.profiler import ProfilerActivity, profile, record_function

    from realrun.layer_timing import profile_module       # the CUDA-event instrument itself
    from realrun.workload import forward, loss_of
    model, inputs, loss_fn = big_workload().build(0, 0, "cuda")
    prof, measured = profile_module(model, inputs, loss_fn, repeats=5, warmup=2,
                                    device="cuda")
    assert measured["clock"] == "cuda events"
    spans: dict[str, list[float]] = {"forward": [], "backward": []}
    for i in range(3):
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            with record_function("gpu-tier:forward"):
                loss = loss_of(forward(model, inputs), loss_fn)
                torch.cuda.synchronize()      # the two passes' kernels apart on the GPU
            with record_function("gpu-tier:backward"):
                loss.backward()
                torch.cuda.synchronize()
        p.export_chrome_trace(str(tmp_path / f"step{i}.json"))
        for phase, span_s in gpu_spans(tmp_path / f"step{i}.json").items():
            spans[phase].append(span_s)
    assert sum(x.forward_s for x in prof.layers) == pytest.approx(median(spans["forward"]),
                                                                  rel=0.10)
    assert sum(x.backward_s for x in prof.layers) == pytest.approx(median(spans["backward"]),
                                                                   rel=0.10)


@pytest.mark.xfail(strict=False, reason="issue 20 bug 2: realrun profile needs about 3x the "
                                        "job's GPU memory; fails until that is fixed")
def test_profile_peak_memory_is_near_a_torch_ddp_jobs(tmp_path):
    """Both peaks include a CUDA context (~0.5 GiB each), which flatters the ratio a little."""
    job_mib, _ = peak_used_mib(["-c", "from realrun.launch import run_world; run_world("
                                "'tests.gpu._targets:ddp_steps', {'steps': 5}, world_size=1, "
                                "backend='nccl', timeout_s=300)"])
    profile_mib, _ = peak_used_mib(["-m", "realrun", "profile", *BIG, "--backend", "nccl",
                                    "--world-size", "1", "--repeats", "3", "--warmup", "1",
                                    "--out", str(tmp_path / "profile.json")])
    assert profile_mib <= 1.25 * job_mib, (profile_mib, job_mib)
