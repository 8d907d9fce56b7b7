"""``simddp trace-import`` on traces written by hand (tests/simddp/hand_traces.py): CPU
(Gloo) and CUDA jobs. Fast, deterministic, no torch.

    python -m pytest tests/simddp/test_trace_import.py -q
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simddp.inputs.io import load_link
from simddp.presets import get_link
from simddp.planning.strategy import MB
from simddp.ingest.trace import import_traces
from tests.simddp.hand_traces import (
    ALPHA_US,
    BUSBW_GBPS,
    BWD_US,
    FWD_US,
    OPT_US,
    ROWS,
    STEPS,
    cli,
    job,
    ready_grads,
    write,
)


# --- CPU (Gloo) -----------------------------------------------------------------------------

def test_cpu_job_gives_back_its_gradients_steps_collectives_and_link(tmp_path):
    imp = import_traces(write(tmp_path, job()))
    grads = ready_grads()
    assert imp.profile.grad_total_bytes == sum(b for _, b in grads)
    assert imp.profile.n_tensors == len(grads) and imp.granularity == "parameter"
    # reverse numbering is the traced ready order; each layer owns one bias and one weight
    assert [imp.profile.tensor_bytes[len(grads) - 1 - i] for i in range(len(grads))] == \
        [b for _, b in grads]
    assert len(imp.joint) == STEPS and imp.timelines[0].implementation == "torch"
    assert [c.nbytes for c in imp.joint[0].ranks[0].syncs] == \
        [grads[i][1] + grads[i + 1][1] for i in range(0, len(grads), 2)]
    assert imp.link.world_size == 2
    fit = imp.derived.link_fit     # replaying the traced all-reduces gives the law back
    assert fit.alpha_s * 1e6 == pytest.approx(ALPHA_US, rel=0.01)
    assert fit.busbw_gbps == pytest.approx(BUSBW_GBPS, rel=0.01)
    assert fit.comm_slowdown == pytest.approx(1.0, abs=0.01)
    # The engine readies a bucket when its layer's backward ends (the trace: at the launch
    # inside the last gradient's node, 20 µs before): closing on the step absorbs that.
    assert abs(imp.replay_error) < 0.03 and abs(imp.reproduction_error) < 1e-6
    assert 0.8 < imp.comm_scale < 1.2
    traced = imp.derived.traced_profile   # as traced; imp.profile: the profiler's cost removed
    assert traced.backward_s == pytest.approx(len(ROWS) * (BWD_US + 100) * 1e-6, rel=0.02)
    overhead_s = imp.derived.overhead_s
    assert overhead_s == pytest.approx(4e-6)   # aten::linear's self time beside its one child
    assert imp.profile.backward_s < traced.backward_s - 10 * overhead_s
    assert imp.traced.strategy.name == "ddp" and imp.traced.rule_reproduces


def test_cpu_phases_and_traced_bucket_size(tmp_path):
    imp = import_traces(write(tmp_path, job()))
    phases = imp.derived.phases
    assert phases["forward_s"] == pytest.approx(FWD_US * 1e-6, rel=0.01)
    assert phases["optimizer_s"] == pytest.approx(OPT_US * 1e-6, rel=0.01)
    lo, hi = imp.traced.bucket_mb_range
    assert lo < imp.traced.strategy.bucket_mb <= hi
    assert hi == pytest.approx((1024 + min(ROWS[1:]) * 1024) / MB)   # smallest closed bucket
    assert imp.traced.strategy.bucket_mb == pytest.approx(0.01, rel=1e-3)   # largest round value


def test_a_trace_without_profiler_steps_uses_the_optimizer_ranges(tmp_path):
    traces = job()
    for trace in traces:
        trace["traceEvents"] = [e for e in trace["traceEvents"]
                                if not e["name"].startswith("ProfilerStep")]
    imp = import_traces(write(tmp_path, traces))
    assert len(imp.joint) == STEPS and imp.joint[0].label == "step 0"


def test_realrun_traces_and_gzip_are_read(tmp_path):
    imp = import_traces(write(tmp_path, job(torch_marks=False), gz=True))
    assert imp.timelines[0].implementation == "realrun"
    assert imp.traced.strategy.name == "overlap" or imp.traced.strategy.name == "bucketed"


def test_without_shapes_on_gradients_the_profile_is_per_bucket(tmp_path):
    traces = job()
    for trace in traces:
        for e in trace["traceEvents"]:
            if e["name"] == "torch::autograd::AccumulateGrad":
                e["args"] = {}
    imp = import_traces(write(tmp_path, traces))
    assert imp.granularity == "bucket"
    assert imp.profile.n_tensors == len(ROWS)   # one tensor per traced all-reduce
    assert imp.profile.grad_total_bytes == sum(b for _, b in ready_grads())


# --- CUDA (Kineto, hand-written) ------------------------------------------------------------

@pytest.mark.parametrize("sizes_on_kernel", [True, False])
def test_cuda_job_reads_nccl_kernels_on_the_gpu_clock(tmp_path, sizes_on_kernel):
    imp = import_traces(write(tmp_path, job(device="cuda", sizes_on_kernel=sizes_on_kernel)))
    assert imp.timelines[0].device == "cuda" and imp.host is None
    assert imp.profile.grad_total_bytes == sum(b for _, b in ready_grads())
    assert len(imp.joint) == STEPS and len(imp.joint[0].samples) == len(ROWS)
    assert imp.derived.link_fit.alpha_s * 1e6 == pytest.approx(ALPHA_US, rel=0.05)
    assert imp.derived.link_fit.busbw_gbps == pytest.approx(BUSBW_GBPS, rel=0.05)
    assert abs(imp.replay_error) < 0.05 and abs(imp.reproduction_error) < 1e-6


def one_gpu(tmp_path: Path, in_nelems: bool = True, twice: bool = False,
            records: bool = True) -> list[str]:
    """A one-GPU NCCL trace (issue 20): no NCCL kernel, the calls recorded on the host.
    ``twice``: every call recorded again inside its record (counted once); ``records=False``:
    no record_param_comms at all (the c10d::allreduce_ launches are read instead)."""
    (trace,) = job(world=1, device="cuda", kernels=False)
    if not records:
        trace["traceEvents"] = [e for e in trace["traceEvents"]
                                if e["name"] != "record_param_comms"]
    for e in list(trace["traceEvents"]):
        if e["name"] == "record_param_comms" and not in_nelems:
            del e["args"]["In msg nelems"]          # some builds record only Out msg nelems
        if e["name"] == "record_param_comms" and twice:
            trace["traceEvents"].append({**e, "ts": e["ts"] + 1, "dur": e["dur"] - 2})
    assert not any(e["name"].startswith("nccl") and e["cat"] == "kernel"
                   for e in trace["traceEvents"])
    return write(tmp_path, [trace])


@pytest.mark.parametrize("in_nelems, twice, records", [
    (True, False, True), (False, False, True), (True, True, True), (True, False, False)])
def test_one_gpu_trace_gives_sizes_and_ready_times_and_takes_the_link(tmp_path, in_nelems,
                                                                       twice, records):
    imp = import_traces(one_gpu(tmp_path, in_nelems, twice, records), link=get_link("ib-8xndr"))
    assert imp.link == get_link("ib-8xndr") and imp.link_given and imp.world_size == 1
    assert imp.profile.grad_total_bytes == sum(b for _, b in ready_grads())
    assert len(imp.joint) == STEPS and len(imp.joint[0].samples) == len(ROWS)
    # a layer's backward as traced: BWD_US plus its two AccumulateGrad nodes (50 µs each);
    # the first in backward order (last layer) also holds the GPU's gap before it
    traced = imp.derived.traced_profile
    assert [round(x.backward_s * 1e6) for x in traced.layers[:-1]] == [BWD_US + 100] * 5
    # its compute (issue 52): its kernels' time on the GPU, each op's kernel 2 µs shorter
    # than the op (hand_traces._op), the GPU's waits for the host between them left out
    assert [round(x.backward_s * 1e6) for x in imp.profile.layers] == \
        [BWD_US - 22 + 2 * (40 - 2)] * 6
    assert imp.traced.strategy.name == "ddp" and abs(imp.reproduction_error) < 1e-9


def test_one_gpu_command_needs_link_and_predicts_a_cluster(tmp_path, capsys):
    paths, out = one_gpu(tmp_path), tmp_path / "out"
    code, stdout, err = cli(capsys, "trace-import", *paths, "--out", str(out))
    assert code == 2 and "add --link PRESET|link.json" in err and err.count("\n") == 1
    assert stdout == "" and not out.exists()
    code, stdout, err = cli(capsys, "trace-import", *paths, "--out", str(out), "--link",
                            "nvlink-h100")
    assert code == 0, err
    assert "nvlink-h100 as given" in stdout and "--world-size N" in stdout
    assert load_link(out / "link.json").busbw_gbps == get_link("nvlink-h100").busbw_gbps
    code, stdout, _ = cli(capsys, "sweep", "--model", str(out / "profile.json"), "--link",
                          "nvlink-h100", "--world-size", "8", "--strategies", "ddp",
                          "--bucket-mb", "0.01,1")
    assert code == 0 and "ddp" in stdout


def test_link_on_a_multi_rank_trace_whose_sizes_pin_the_link_is_not_used(tmp_path, capsys):
    out = tmp_path / "o"
    code, _, err = cli(capsys, "trace-import", *write(tmp_path, job()), "--out", str(out),
                       "--link", "eth-100g")
    assert code == 0, err
    fit = json.loads((out / "summary.json").read_text())["link"]["fit"]
    assert fit["cannot_fit"] is None and fit["fallback"] is None
    assert load_link(out / "link.json").alpha_s * 1e6 == pytest.approx(ALPHA_US, rel=0.2)
