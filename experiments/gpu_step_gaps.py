"""On a CUDA GPU: where a plain step's wall time goes beyond its CUDA-event layers, and where
a Kineto trace's layer times differ from realrun.layer_timing's CUDA events, and why.

    python experiments/gpu_step_gaps.py          # on the device machine (docs/GPU.md), ~20 s

1. Two small models' plain steps (30, after 5 warm-up): wall, zero_grad, each pass's host
   time and GPU time (CUDA events), the synchronize's return (ms).
2. The gpu tier's BIG preset profiled by CUDA events, then traced twice (with and without a
   synchronize between forward and backward): per layer the events' time, the trace's by
   the same attribution rule, and the GPU busy time inside it; printed where they differ
   by over 10 %, and the first and last layers of each pass.
Figures from an H200: docs/results/2026-11-26-gpu-tier-h200.md.
"""
import json, sys, time
from statistics import median
import torch
sys.path.insert(0, ".")
from realrun.workload import Workload, forward, loss_of
from realrun.steps import make_optimizer
from simddp.presets.models import parse_model

if not torch.cuda.is_available():
    print("gpu_step_gaps: needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
    sys.exit(2)
dev = torch.device("cuda", 0)
def ev():
    e = torch.cuda.Event(enable_timing=True); e.record(); return e

def phases(name, model, inputs, loss_fn, n=30):
    opt = make_optimizer("sgd", model.parameters())
    rows = []
    for i in range(n + 5):
        torch.cuda.synchronize()
        w0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        w1 = time.perf_counter()
        e0 = ev()
        loss = loss_of(forward(model, inputs), loss_fn)
        e1 = ev(); w2 = time.perf_counter()
        loss.backward()
        e2 = ev(); w3 = time.perf_counter()
        opt.step()
        e3 = ev(); w4 = time.perf_counter()
        torch.cuda.synchronize()
        w5 = time.perf_counter()
        if i >= 5:
            rows.append(dict(wall=w5 - w0, zero=w1 - w0, host_fwd=w2 - w1, host_bwd=w3 - w2,
                             host_opt=w4 - w3, sync_wait=w5 - w4,
                             ev_fwd=e0.elapsed_time(e1) / 1e3, ev_bwd=e1.elapsed_time(e2) / 1e3,
                             ev_opt=e2.elapsed_time(e3) / 1e3, ev_all=e0.elapsed_time(e3) / 1e3))
    m = {k: median(r[k] for r in rows) * 1e3 for k in rows[0]}
    print(f"[diag] {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in m.items()) + " (ms)", flush=True)

import traceback
try:
  small = Workload.preset(parse_model("transformer-small").shrunk(layers=2, d_model=256, d_ff=1024, heads=4, vocab=2048), 4, 64)
  m, x, lf = small.build(0, 0, dev); phases("small fp32", m, x, lf)
  g = Workload.from_target("examples/gpt2_tiny.py:build")
  m, x, lf = g.build(0, 0, dev); phases("gpt2-tiny fp32", m, x, lf)
except Exception:
  traceback.print_exc()

# Kineto vs events, per layer, with the trace's GPU busy time inside each attributed interval
from tests.gpu.test_profile_cuda import _mark_layers, gpu_spans
from tests.gpu._cuda import big_workload
from realrun.layer_timing import owners, profile_module, attribute
from torch.profiler import ProfilerActivity, profile, record_function
model, inputs, loss_fn = big_workload().build(0, 0, "cuda")
prof, measured = profile_module(model, inputs, loss_fn, repeats=5, warmup=2, device="cuda")
owned = owners(model); names = list(owned)
events = {x.name: (x.forward_s, x.backward_s) for x in prof.layers}
handles = _mark_layers(model, names, owned)
for sync_between in (True, False):
    model.zero_grad(set_to_none=True); torch.cuda.synchronize()
    for _ in range(2):
        loss_of(forward(model, inputs), loss_fn).backward()
    model.zero_grad(set_to_none=True); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        with record_function("gpu-tier:forward"):
            loss = loss_of(forward(model, inputs), loss_fn)
            if sync_between: torch.cuda.synchronize()
        with record_function("gpu-tier:backward"):
            loss.backward(); torch.cuda.synchronize()
    p.export_chrome_trace("/tmp/t.json")
    evs = [e for e in json.load(open("/tmp/t.json"))["traceEvents"] if e.get("ph") == "X"]
    ranges = {e["name"].split(":")[1]: (e["ts"], e["ts"] + e["dur"]) for e in evs
              if e["name"].startswith("gpu-tier:") and e.get("cat") == "user_annotation"}
    marks = sorted((e["ts"], *e["name"].split(":")[1:]) for e in evs if e["name"].startswith("gpu-tier-mark:"))
    launched = {e["args"]["correlation"]: e["ts"] for e in evs
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = [(launched.get(e["args"].get("correlation"), -1), e["ts"], e["ts"] + e["dur"], e["name"][:40])
               for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    for ph, (a, b) in ranges.items():
        mine = [k for k in kernels if a <= k[0] <= b]
        start, stop = min(k[1] for k in mine), max(k[2] for k in mine)
        ends = [None] * len(names)
        for ts, mp, layer in marks:
            if mp == ph:
                ends[int(layer)] = max((k[2] for k in mine if k[0] < ts), default=start)
        order = [j for j in sorted(range(len(names)), key=lambda j: ends[j] if ends[j] is not None else 1e30) if ends[j] is not None]
        prev = start
        print(f"[diag] sync_between={sync_between} {ph}: span {(stop-start)/1e3:.3f} ms, busy {sum(k[2]-k[1] for k in mine)/1e3:.3f} ms")
        for i, j in enumerate(order):
            e = ends[j]
            busy = sum(max(0, min(k[2], e) - max(k[1], prev)) for k in mine)
            first = [k[3] for k in mine if k[1] >= prev and k[2] <= e][:3]
            evs_ms = events[names[j]][0 if ph == "forward" else 1] * 1e3
            tr_ms = (e - prev) / 1e3
            if i < 5 or i >= len(order) - 2 or abs(evs_ms - tr_ms) > 0.1 * tr_ms:
                print(f"[diag]   {i:2d} {names[j]:26s} events {evs_ms:7.3f} trace {tr_ms:7.3f} busy {busy/1e3:7.3f} ms; first {first}")
            prev = max(prev, e)
for h in handles: h.remove()
