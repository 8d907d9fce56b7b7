"""Published runs at scale as data (tests/data/published-scale/) and the anchor method of
bench/published_scale.py (issue 62 item 5). The error figures are measured, in
docs/BENCHMARKS.md ("Published runs at scale"); here only that the data loads, the rows pair
with their anchors, and an anchor predicts itself exactly."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from simddp.presets.hf_config import from_spec

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("published_scale",
                                                  ROOT / "bench" / "published_scale.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod      # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_every_table_row_loads_and_the_anchored_rows_pair_with_8_gpus(bench):
    rows = bench.foundry_rows()
    assert len(rows) == 216
    pairs = bench.pairs(rows)
    assert len(pairs) == 18
    for anchor, row in pairs:
        assert anchor["# GPUs"] == "8" and int(row["# GPUs"]) > 8
        assert bench.settings(anchor) == bench.settings(row)


def test_each_anchored_model_spec_has_the_rows_parameter_count(bench):
    for anchor, row in bench.pairs():
        arch = from_spec(bench.mpt_spec(row["Model"], int(row["SeqLen (T)"])))
        assert arch.n_params == int(row["NumParams"]) == int(anchor["NumParams"])


def test_the_anchor_method_reproduces_its_anchor_row(bench):
    anchor_row = next(a for a, r in bench.pairs() if a["Model"] == "125m")
    anchor = bench.job_of(anchor_row)
    profile = bench.anchored(anchor)
    got = bench.predicted_tokens(anchor, profile, 8)
    assert got.accum_steps == int(anchor_row["GradAccum"]) and got.gpus == 8
    assert got.tokens_per_s_per_gpu == pytest.approx(float(anchor_row["Throughput (T/s/GPU)"]),
                                                 rel=1e-6)


def test_the_comm_bound_runs_load_with_their_own_link_and_anchor(bench):
    d = bench.baskerville()
    two = bench.bench_link(d, 2, 1)     # 708 M bf16 elements in 2·1·1350.4 MiB / 21.67 GiB/s
    assert two.busbw_gbps == pytest.approx(1.416e9 / (2 * 1350.4 / (21.67 * 1024)) / 1e9,
                                           rel=1e-4)
    assert bench.bench_link(d, 2, 2).name.startswith("post-ring")
    assert from_spec(bench.GPT2_LARGE).n_params == 708_720_640   # the post's "~708M"
    rows = bench.predict_baskerville() + bench.predict_ethernet()
    assert len(rows) == 4 and all(r["predicted_ms"] > 0 and r["measured_ms"] > 0 for r in rows)
    ethernet = rows[-1]
    assert ethernet["measured_ms"] == 234 + 106
