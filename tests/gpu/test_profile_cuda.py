"""realrun's profile on one GPU, checked against torch's own measurements (gpu tier).

    python -m pytest tests/gpu -m gpu -q        # on a CUDA machine; docs/CONTRIBUTING-GPU.md

- ``realrun profile --backend nccl --world-size 1`` of a preset and of a Hugging Face GPT-2
  built from a config (tests/gpu/_gpt2.py), fp32 and bf16, and the profile predicting 8
  GPUs (the "one GPU now, a cluster later" recipe);
- the per-layer CUDA-event times (realrun.layer_timing) against a torch.profiler trace of the
  same passes, on a GPU-bound model: each layer within 10 % (1 % of the pass for small
  layers) and the sums within 10 % of the passes' GPU spans; the layers of a profile before
  scaling within 5 % of the plain step (``measured.compute_scale``);
- the profile command's peak GPU memory against a torch DDP job's, and transformer-xl at
  batch 2 x seq 512 profiled on one 80 GB GPU (issue 20, bug 2).
"""
from __future__ import annotations

import json
from statistics import median

import pytest
import torch

from simddp.inputs.io import load_profile
from tests.gpu._cuda import BIG, GPU, big_workload, peak_used_mib, run

pytestmark = GPU


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("model", ["preset", "gpt2"])
def test_profile_command_on_one_gpu_predicts_eight(tmp_path, model, precision):
    """The command on one GPU, then a sweep of 8. Its layers (CUDA events, GPU time) add up
    to its plain step (wall clock) within 5 % where the step is GPU-bound: fp32 at the BIG
    size. Where it is host-bound the step also holds host work no layer clock sees, and it
    is only printed: on an H200 (2026-11-26) the first tier run's tiny models (3-8 ms steps)
    scaled x1.03-1.16; a step there spent 0.09-0.13 ms in zero_grad and 0.025 ms returning
    from the synchronize, and its host was as slow as its GPU (forward 1.71 ms host, 1.68 ms
    GPU), so host speed between the profile's phases moves the ratio too. bf16 at the BIG
    size is estimated host-bound there (~10x less GPU time, the same ~300 launches)."""
    if model == "gpt2":
        pytest.importorskip("transformers")
    what = BIG if model == "preset" else ["--module", "tests/gpu/_gpt2.py:build"]
    out = tmp_path / "profile.json"
    proc = run(["-m", "realrun", "profile", *what, "--backend", "nccl", "--world-size", "1",
                "--precision", precision, "--repeats", "5", "--warmup", "2", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    measured, profile = json.loads(out.read_text())["measured"], load_profile(out)
    assert measured["precision"] == precision and "cuda" in str(measured["device"])
    assert profile.forward_s > 0 and profile.backward_s > 0
    assert all(x.forward_s >= 0 and x.backward_s >= 0 for x in profile.layers)
    print(f"\n[gpu-tier] profile {model} {precision}: compute_scale "
          f"{measured['compute_scale']:.3f}, plain step {measured['rank0_step_s'] * 1e3:.2f} ms")
    if precision == "fp32":
        # compute_scale = plain step / (per-layer profile before scaling), issue 20
        assert abs(measured["compute_scale"] - 1) <= 0.05, measured["compute_scale"]
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


def trace_layer_seconds(path, n_layers: int) -> dict[str, list[float]]:
    """Per phase, each layer's seconds from a trace, by realrun.layer_timing's own rule
    (``attribute``), with its clock replaced: a ``gpu-tier-mark:PHASE:LAYER`` annotation put
    where the profiler's hook records a CUDA event "ends" when the kernels launched before
    it have ended on the GPU, as that event would. The phase runs from its first kernel's
    start to its last kernel's end."""
    from realrun.layer_timing import attribute
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    ranges = {e["name"].split(":")[1]: (e["ts"], e["ts"] + e["dur"]) for e in events
              if e["name"].startswith("gpu-tier:") and e.get("cat") == "user_annotation"}
    marks = sorted((e["ts"], *e["name"].split(":")[1:]) for e in events
                   if e["name"].startswith("gpu-tier-mark:"))
    launched = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get(
                    "args", {})}
    kernels = [(launched.get(e["args"].get("correlation"), -1), e["ts"], e["ts"] + e["dur"])
               for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    seconds = {}
    for phase, (a, b) in ranges.items():
        mine = [k for k in kernels if a <= k[0] <= b]
        start, stop = min(k[1] for k in mine), max(k[2] for k in mine)
        ends: list[float | None] = [None] * n_layers
        for ts, mark_phase, layer in marks:
            if mark_phase == phase:   # the last mark of a layer counts, as in the profiler
                ends[int(layer)] = max((k[2] for k in mine if k[0] < ts), default=start)
        seconds[phase] = [t / 1e6 for t in attribute(ends, start, stop)]
    return seconds


def _mark_layers(model, names: list[str], owned: dict) -> list:
    """Hooks where realrun.layer_timing puts its clock marks: each layer's forward hook and
    its parameters' post-accumulate-grad hooks; each drops a zero-length annotation."""
    from torch.profiler import record_function

    def marker(label: str):
        def hook(*_args) -> None:
            with record_function(label):
                pass
        return hook
    handles = []
    for j, name in enumerate(names):
        module = model if name == "(root)" else model.get_submodule(name)
        handles.append(module.register_forward_hook(marker(f"gpu-tier-mark:forward:{j}")))
        for _, p in owned[name]:
            handles.append(p.register_post_accumulate_grad_hook(
                marker(f"gpu-tier-mark:backward:{j}")))
    return handles


def _gpu_head_start(model):
    """A forward pre-hook that queues ~2 ms of GPU spin (torch.cuda._sleep, 4e6 cycles at
    1.7-2.0 GHz) before each forward, so the host launches ahead and the pass runs GPU-bound
    from its first kernel. Without it the forward's first layers are host-bound, and the
    profiler's own host cost changes them: on an H200 (2026-11-26) embed 0.231 ms by CUDA
    events against 0.010 ms in a trace (the events also count the host's launch latency
    before the first kernel), blocks.0.attn_norm 0.104 against 0.306 ms with 0.009 ms of
    kernels in it: the GPU waited on a profiled host. Both runs being compared get it."""
    return model.register_forward_pre_hook(lambda *_: torch.cuda._sleep(4_000_000))


def test_cuda_event_layer_times_match_a_profiler_trace(tmp_path):
    """Each layer's CUDA-event time within 10 % of the same layer's in a Kineto trace (or
    within 1 % of the pass, for layers under a tenth of it, where 10 % is a few µs of
    launch jitter), and the pass totals within 10 % of the trace's GPU spans. The traced
    step runs as the instrument's do: GPU-bound from the start (:func:`_gpu_head_start`)
    and with no synchronize between forward and backward — one there left the GPU idle
    while autograd started (H200: head's backward 5.91 ms in the trace with 2.82 ms of
    kernels, against 2.82 ms by events; 2.818 vs 2.820 ms without it)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from realrun.layer_timing import owners, profile_module  # the CUDA-event instrument
    from realrun.workload import forward, loss_of
    model, inputs, loss_fn = big_workload().build(0, 0, "cuda")
    head_start = _gpu_head_start(model)
    prof, measured = profile_module(model, inputs, loss_fn, repeats=5, warmup=2,
                                    device="cuda")
    assert measured["clock"] == "cuda events"
    owned = owners(model)
    names = list(owned)
    handles = _mark_layers(model, names, owned)
    spans: dict[str, list[float]] = {"forward": [], "backward": []}
    per_layer: dict[str, list[list[float]]] = {"forward": [], "backward": []}
    try:
        for i in range(3):
            model.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
                with record_function("gpu-tier:forward"):
                    loss = loss_of(forward(model, inputs), loss_fn)
                with record_function("gpu-tier:backward"):   # kernels split by launch
                    loss.backward()
                    torch.cuda.synchronize()
            trace = tmp_path / f"step{i}.json"
            p.export_chrome_trace(str(trace))
            for phase, span_s in gpu_spans(trace).items():
                spans[phase].append(span_s)
            for phase, layer_s in trace_layer_seconds(trace, len(names)).items():
                per_layer[phase].append(layer_s)
    finally:
        for handle in [*handles, head_start]:
            handle.remove()
    fwd_ms, bwd_ms = (sum(getattr(x, f) for x in prof.layers) * 1e3
                      for f in ("forward_s", "backward_s"))
    print(f"\n[gpu-tier] layer sums vs trace spans: forward {fwd_ms:.3f} vs "
          f"{median(spans['forward']) * 1e3:.3f} ms, backward {bwd_ms:.3f} vs "
          f"{median(spans['backward']) * 1e3:.3f} ms")
    assert sum(x.forward_s for x in prof.layers) == pytest.approx(median(spans["forward"]),
                                                                  rel=0.10)
    assert sum(x.backward_s for x in prof.layers) == pytest.approx(median(spans["backward"]),
                                                                   rel=0.10)
    events = {x.name: {"forward": x.forward_s, "backward": x.backward_s} for x in prof.layers}
    off = []
    for phase, steps in per_layer.items():
        trace_s = [median(step[j] for step in steps) for j in range(len(names))]
        pass_s = sum(trace_s)
        for name, kineto_s in zip(names, trace_s):
            cuda_s = events[name][phase]
            if abs(cuda_s - kineto_s) > max(0.10 * kineto_s, 0.01 * pass_s):
                off.append(f"{phase} {name}: cuda events {cuda_s * 1e3:.3f} ms, "
                           f"trace {kineto_s * 1e3:.3f} ms")
    print(f"[gpu-tier] layers off by more than the bound: {len(off)}")
    assert not off, "\n".join(off)


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
    memory = json.loads(out.read_text())["measured"]["memory"]
    print(f"\n[gpu-tier] polled peak: profile {profile_mib:.0f} MiB, torch DDP job "
          f"{job_mib:.0f} MiB (x{profile_mib / job_mib:.2f}); own reading {memory}")
    assert profile_mib <= 1.25 * job_mib, (profile_mib, job_mib)
    assert memory["how"] == "max_memory_allocated"
    assert memory["peak_bytes"] <= 1.25 * memory["torch_ddp_step_bytes"], memory


def test_transformer_xl_profiles_on_one_80_gb_gpu(tmp_path):
    """The job as filed: transformer-xl (2.0 B parameters, 8.0 GB of fp32 weights) at batch 2
    x seq 512 ran out of memory in ``realrun profile`` on an H100 (75.6 GB allocated) where a
    torch DDP step peaks at 22.8 GB. It must now fit, within 1.25x that step (printed)."""
    if torch.cuda.get_device_properties(0).total_memory < 70 * 2**30:
        pytest.skip("needs an 80 GB-class GPU (H100/H200)")
    out = tmp_path / "profile.json"
    proc = run(["-m", "realrun", "profile", "--model", "transformer-xl", "--batch", "2",
                "--seq", "512", "--backend", "nccl", "--world-size", "1", "--repeats", "2",
                "--warmup", "1", "--out", str(out)], timeout_s=500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print("\n[gpu-tier] " + "".join(x for x in proc.stdout.splitlines(True) if x.startswith("#")))
    assert "# peak memory per rank: profile" in proc.stdout
    memory = json.loads(out.read_text())["measured"]["memory"]
    assert memory["peak_bytes"] <= 1.25 * memory["torch_ddp_step_bytes"], memory
