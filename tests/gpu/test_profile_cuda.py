"""realrun's profile on one GPU, checked against torch's own measurements (gpu tier).

    python -m pytest tests/gpu -m gpu -q        # on a CUDA machine; docs/GPU.md

- ``realrun profile --backend nccl --world-size 1`` of a preset and of a Hugging Face GPT-2
  built from a config (examples/gpt2_tiny.py), fp32 and bf16, and the profile predicting 8
  GPUs (the "one GPU now, a cluster later" recipe);
- the per-layer CUDA-event times (realrun.layer_timing, summed over layers) against the GPU span
  of the same passes in a torch.profiler trace, within 10 %, on a GPU-bound model;
- the profile command's peak GPU memory against a torch DDP job's, and transformer-xl at
  batch 2 x seq 512 profiled on one 80 GB GPU (issue 20, bug 2).
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


def test_profile_peak_memory_is_near_a_torch_ddp_jobs(tmp_path):
    """Issue 20 bug 2 (the profile needed ~3x the job's memory; 75.6 GB, out of memory, for
    transformer-xl at batch 2 x seq 512 on an 80 GB H100). Polled peaks include a CUDA context
    (~0.5 GiB each), which flatters the ratio a little; the profile's own reading
    (max_memory_allocated per phase, measured.memory) is held to the same bound."""
    job_mib, _ = peak_used_mib(["-c", "from realrun.launch import run_world; run_world("
                                "'tests.gpu._targets:ddp_steps', {'steps': 5}, world_size=1, "
                                "backend='nccl', timeout_s=300)"])
    out = tmp_path / "profile.json"
    profile_mib, _ = peak_used_mib(["-m", "realrun", "profile", *BIG, "--backend", "nccl",
                                    "--world-size", "1", "--repeats", "3", "--warmup", "1",
                                    "--out", str(out)])
    assert profile_mib <= 1.25 * job_mib, (profile_mib, job_mib)
    memory = json.loads(out.read_text())["measured"]["memory"]
    assert memory["how"] == "max_memory_allocated"
    assert memory["peak_bytes"] <= 1.25 * memory["torch_ddp_step_bytes"], memory


def test_transformer_xl_profiles_on_one_80_gb_gpu(tmp_path):
    """The job as filed: transformer-xl (~1.5 B parameters, 6 GB of fp32 weights) at batch 2
    x seq 512 ran out of memory in ``realrun profile`` on an H100 (75.6 GB allocated) where a
    torch DDP step peaks at 22.8 GB. It must now fit, within 1.25x that step (printed)."""
    if torch.cuda.get_device_properties(0).total_memory < 70 * 2**30:
        pytest.skip("needs an 80 GB-class GPU (H100/H200)")
    out = tmp_path / "profile.json"
    proc = run(["-m", "realrun", "profile", "--model", "transformer-xl", "--batch", "2",
                "--seq", "512", "--backend", "nccl", "--world-size", "1", "--repeats", "2",
                "--warmup", "1", "--out", str(out)], timeout_s=500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "# peak memory per rank: profile" in proc.stdout
    memory = json.loads(out.read_text())["measured"]["memory"]
    assert memory["peak_bytes"] <= 1.25 * memory["torch_ddp_step_bytes"], memory
