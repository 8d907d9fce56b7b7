"""A hybrid job's trace (issue 61): data-parallel all-reduces beside model-parallel all_to_all
on 8 ranks (tests/simddp/hybrid_trace_fixtures.py). The link a trace gives stays within what
any collective library achieves, or the import says it cannot fit one and uses another; the
all_to_all's time is kept as measured; a trace with collectives but no all-reduce is refused
naming them. No torch.
"""
from __future__ import annotations

import json
import re

import pytest

from simddp.inputs.io import load_link
from simddp.ingest.trace import import_traces
from simddp.ingest.trace.bounds import ALPHA_MAX_S, busbw_max_gbps
from simddp.presets import get_link
from tests.simddp.hand_traces import cli, write
from tests.simddp.hybrid_trace_fixtures import A2A_US, DENSE, EMB_US, STEPS, hybrid_job


def test_the_issues_hybrid_trace_imports_with_a_bounded_link(tmp_path, capsys):
    out = tmp_path / "o"
    code, _, err = cli(capsys, "trace-import", *write(tmp_path, hybrid_job()), "--out", str(out))
    assert code == 0, err
    link = load_link(out / "link.json")
    assert link.alpha_s <= ALPHA_MAX_S and link.busbw_gbps <= busbw_max_gbps()
    doc = json.loads((out / "summary.json").read_text())
    fit = doc["link"]["fit"]
    # the trace's own line is the issue's: a large α, a busbw beyond any link
    assert fit["line"]["alpha_us"] > 1000 and fit["line"]["busbw_gbps"] > busbw_max_gbps()
    assert fit["cannot_fit"] is not None and fit["fallback"] == "preset eth-100g"
    assert fit["line"]["range_bytes"] == [min(doc["collectives"]["sizes_bytes"]),
                                          max(doc["collectives"]["sizes_bytes"])]
    # α is the preset's (scaled by the closure), busbw the trace's time at that α
    assert link.alpha_s == pytest.approx(get_link("eth-100g").alpha_s * doc["link"]["comm_scale"],
                                         rel=1e-3)
    assert doc["link"]["comm_slowdown"] == 1.0 and not doc["link"]["comm_slowdown_measured"]
    assert doc["steps"]["count"] == STEPS
    assert doc["collectives"]["gradient_allreduces_per_step"] == 3


def test_the_all_to_all_is_kept_as_measured(tmp_path):
    imp = import_traces(write(tmp_path, hybrid_job()))
    others = imp.joint[0].ranks[0].others
    assert sorted({c.kind for c in others}) == ["alltoall"] and len(others) == 2
    # the forward's all_to_all holds the dense forward up; the backward's runs beside the
    # last all-reduce, whose wait the engine charges itself
    assert imp.derived.phases["others_s"] == pytest.approx(A2A_US * 1e-6, rel=0.02)
    forward_us = EMB_US + A2A_US + sum(f for _, _, f, _ in DENSE)
    assert imp.profile.forward_s == pytest.approx(forward_us * 1e-6, rel=0.02)
    assert abs(imp.reproduction_error) < 0.01
    assert imp.without_profiler.step_s == pytest.approx(imp.measured_step_s, rel=0.02)


def test_link_given_is_the_fallback_where_the_trace_cannot_fit_one(tmp_path, capsys):
    out = tmp_path / "o"
    code, _, err = cli(capsys, "trace-import", *write(tmp_path, hybrid_job()), "--out", str(out),
                       "--link", "ib-8xndr")
    assert code == 0, err
    doc = json.loads((out / "summary.json").read_text())["link"]
    assert doc["fit"]["fallback"] == "--link ib-8xndr"
    assert load_link(out / "link.json").alpha_s == pytest.approx(
        get_link("ib-8xndr").alpha_s * doc["comm_scale"], rel=1e-3)


def test_generic_nccl_kernels_take_their_kind_from_the_call_that_launched_them(tmp_path):
    traces = hybrid_job()
    for trace in traces:        # RCCL's names, and no Collective name on the kernel
        for e in trace["traceEvents"]:
            if e["cat"] == "kernel" and e["name"].startswith("nccl"):
                e["name"] = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"
                e["args"].pop("Collective name", None)
    imp = import_traces(write(tmp_path, traces))
    assert [len(s.syncs) for s in imp.joint[0].ranks] == [3] * len(traces)
    assert {c.kind for c in imp.joint[0].ranks[0].others} == {"alltoall"}


def test_collectives_without_all_reduce_kernels_are_refused_naming_them(tmp_path, capsys):
    out = tmp_path / "o"
    code, stdout, err = cli(capsys, "trace-import", *write(tmp_path, hybrid_job(
        all_reduce_kernels=False)), "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and stdout == "" and not out.exists()
    assert re.findall(r"(\w+) ×(\d+)", err) == [("all_to_all", str(2 * STEPS)),
                                                 ("all_reduce", str(3 * STEPS))]


def test_an_fsdp2_trace_on_cuda_is_refused_naming_its_collectives(tmp_path, capsys):
    traces = hybrid_job()
    for trace in traces:        # FSDP2's range around the first unit's all-gather
        trace["traceEvents"].append({"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1,
                                     "name": "FSDP::pre_forward (dense)", "ts": 1010.0,
                                     "dur": 5.0, "args": {}})
    out = tmp_path / "o"
    code, _, err = cli(capsys, "trace-import", *write(tmp_path, traces), "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and not out.exists()
    assert re.findall(r"(\w+) ×(\d+)", err) == [("all_to_all", str(2 * STEPS)),
                                                 ("all_reduce", str(3 * STEPS))]
