"""python -m simddp compare: matching, metrics on round numbers, JSON, plots (bad input:
test_compare_input.py).

Results are built in code; every expected number is worked out by hand in the comment beside it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re

import matplotlib.image
import pytest

from simddp.cli.main import main
from simddp.compare import (Comparison, compare_results, config_label, format_table,
                            pick_timeline)
from simddp.compare.drift import net_of_compute, net_text
from simddp.compare.metrics import rank_average, spearman
from simddp.compare.plots import (BUCKETS_PNG, CSV_NAME, JSON_NAME, SCATTER_PNG, TIMELINE_PNG,
                                  write_compare_files, write_compare_plots)
from simddp.errors import InputError
from simddp.inputs.io import save_json
from simddp.result import results_to_json
from simddp.result import Result, Span
from simddp.planning.strategy import MB

ALL_OUTPUTS = {SCATTER_PNG, BUCKETS_PNG, TIMELINE_PNG, JSON_NAME, CSV_NAME}


def res(strategy, bucket_mb, step_ms, source="predicted", *, accum=1, model="toy", world=2,
        spread=None, spans=()):
    """A Result in ms; ``spread`` = (p5_ms, p95_ms) for measurements."""
    p5, p95 = (None, None) if spread is None else (spread[0] / 1e3, spread[1] / 1e3)
    return Result(model=model, link="eth" if source == "predicted" else "gloo", strategy=strategy,
                  bucket_mb=bucket_mb, world_size=world, step_s=step_ms / 1e3, exposed_comm_s=0.0,
                  collectives=1, accum_steps=accum, source=source, step_p5_s=p5, step_p95_s=p95,
                  samples=20 if source == "measured" else 0, spans=spans)


def meas(strategy, bucket_mb, step_ms, **kw):
    kw.setdefault("spread", (step_ms * 0.9, step_ms * 1.2))
    return res(strategy, bucket_mb, step_ms, "measured", **kw)


def timeline(scale):
    """forward 0-2, backward 2-6, comm 3-7, optimizer 7-8 ms, times ``scale``, from t0 = 5 s."""
    t = [(s[0], s[1], 5 + s[2] * scale / 1e3, 5 + s[3] * scale / 1e3, s[4]) for s in (
        ("compute", "forward", 0, 2, "forward"), ("compute", "l1 bwd", 2, 4, "backward"),
        ("compute", "l0 bwd", 4, 6, "backward"), ("comm", "bucket0", 3, 5, "all-reduce"),
        ("comm", "bucket1", 5, 7, "all-reduce"), ("compute", "optimizer", 7, 8, "optimizer"))]
    return tuple(Span(*s) for s in t)


def grid():
    """naive; bucketed at 1, 10, 100 MB; ddp at 10 MB. Hand-computed in test_metrics."""
    predicted = [res("naive", None, 90), res("bucketed", 1, 120), res("bucketed", 10, 100),
                 res("bucketed", 100, 110, spans=timeline(1.0)), res("ddp", 10, 50),
                 res("ddp", 25, 60)]   # ddp:25 was predicted but not measured
    measured = [meas("naive", None, 100), meas("bucketed", 1, 160), meas("bucketed", 10, 125),
                meas("bucketed", 100, 100, spans=timeline(1.1)), meas("ddp", 10, 50)]
    return predicted, measured


def write_pair(tmp_path, predicted, measured):
    p, m = tmp_path / "pred.json", tmp_path / "meas.json"
    save_json(p, results_to_json(predicted))
    save_json(m, results_to_json(measured))
    return str(p), str(m)


# --- metrics on round numbers ----------------------------------------------------------------

def test_metrics():
    c = compare_results(*grid())
    # table order: naive, bucketed by size, ddp
    assert [r.label for r in c.rows] == ["naive", "bucketed:1", "bucketed:10", "bucketed:100",
                                         "ddp:10"]
    # (pred - meas) / meas: 90/100 -> -10, 120/160 -> -25, 100/125 -> -20, 110/100 -> +10, 0
    assert [round(r.error_pct, 9) for r in c.rows] == [-10.0, -25.0, -20.0, 10.0, 0.0]
    s = c.summary
    assert math.isclose(s.median_ape, 10.0) and math.isclose(s.max_ape, 25.0)  # of 10,25,20,10,0
    # predicted 90,120,100,110,50 -> ranks 2,5,3,4,1; measured 100,160,125,100,50 -> 2.5,5,4,2.5,1
    # deviations from 3: [-1, 2, 0, 1, -2] and [-.5, 2, 1, -.5, -2]: 8 / sqrt(10 * 9.5)
    assert math.isclose(s.spearman, 8 / math.sqrt(10 * 9.5))
    assert list(s.spearman_by_strategy) == ["bucketed"]  # ddp has 1 config, naive 1
    # bucketed: predicted 120, 100, 110 -> 10 MB; measured 160, 125, 100 -> 100 MB;
    # regret = 125 / 100 - 1 = 25 %
    assert (s.bucket_strategy, s.predicted_best_bucket_mb, s.measured_best_bucket_mb) == \
        ("bucketed", 10, 100)
    assert math.isclose(s.regret, 25.0)
    assert (s.configs, s.unmeasured_predictions, s.model, s.world_size) == (5, 1, "toy", 2)
    assert (s.predicted_link, s.measured_link) == ("eth", "gloo")


def test_spearman_hand_computed():
    assert math.isclose(spearman([1, 2, 3, 4], [1, 3, 2, 4]), 0.8)   # 1 - 6·2 / (4·15)
    assert math.isclose(spearman([1, 2, 3], [30, 20, 10]), -1.0)
    # ties: ranks [1, 2.5, 2.5, 4] vs [1, 2, 3, 4]: cov 4.5 / sqrt(4.5 · 5) = sqrt(0.9)
    assert math.isclose(spearman([1, 2, 2, 3], [1, 2, 3, 4]), math.sqrt(0.9))
    assert spearman([5, 5, 5], [1, 2, 3]) is None     # undefined, not a fake 0
    assert spearman([1], [2]) is None
    assert list(rank_average([10, 20, 20, 30])) == [1, 2.5, 2.5, 4]
    assert list(rank_average([3, 1, 3, 3])) == [3, 1, 3, 3]


def test_best_bucket_of_the_recommended_strategy_and_none_without_buckets():
    only_ddp = compare_results([res("ddp", 1, 10), res("ddp", 25, 8)],
                               [meas("ddp", 1, 9), meas("ddp", 25, 12)])
    s = only_ddp.summary
    # predicted best 25 MB (8 ms) measures 12 ms; measured best 1 MB at 9 ms: 12/9 - 1
    assert (s.bucket_strategy, s.predicted_best_bucket_mb, s.measured_best_bucket_mb) == \
        ("ddp", 25, 1)
    assert math.isclose(s.regret, (12 / 9 - 1) * 100)
    none = compare_results([res("naive", None, 10), res("flat", None, 12)],
                           [meas("naive", None, 11), meas("flat", None, 11)]).summary
    assert (none.bucket_strategy, none.predicted_best_bucket_mb, none.regret) == (None, None, None)
    assert none.spearman is None    # measured ties everywhere: ρ undefined


def test_matching_tolerates_float_bucket_sizes():
    stored = int(0.1 * MB) / MB     # what a sweep writes for 0.1 MB: 0.0999994...
    c = compare_results([res("ddp", stored, 10), res("ddp", 25.0, 9), res("ddp", 26.0, 9)],
                        [meas("ddp", 0.1, 10), meas("ddp", 25.0000001, 9)])
    assert [(r.bucket_mb, r.predicted_s) for r in c.rows] == [(0.1, 0.010), (25.0000001, 0.009)]
    assert c.summary.unmeasured_predictions == 1
    with pytest.raises(InputError, match=r"measured config ddp:25\.5 has no prediction"):
        compare_results([res("ddp", 25.0, 9), res("ddp", 26.0, 9)], [meas("ddp", 25.5, 9)])
    # accumulation steps are part of the configuration
    with pytest.raises(InputError, match=r"no_sync:25 \(accum 4\) has no prediction"):
        compare_results([res("no_sync", 25, 9, accum=2)], [meas("no_sync", 25, 9, accum=4)])


def test_pick_timeline():
    c = compare_results(*grid())
    p, m = pick_timeline(c)       # default: the measured-best bucketed config
    assert (p.config, m.config) == (("bucketed", 100, 1), ("bucketed", 100, 1))
    p, m = pick_timeline(c, "ddp:25")   # predicted, never measured
    assert (p.config, m) == (("ddp", 25, 1), None)
    assert pick_timeline(c, "naive")[1].strategy == "naive"
    for bad in ("ddp:7", "ddp:x", "ddp:-1", "nope"):
        with pytest.raises(InputError, match="--timeline-config"):
            pick_timeline(c, bad)
    assert config_label("no_sync", 25.0, 4) == "no_sync:25 (accum 4)"


def test_text_table_and_csv():
    c = compare_results(*grid())
    text = format_table(c)
    table = [line.split() for line in text.splitlines()[1:len(c.rows) + 2]]
    assert ["bucketed", "10", "1", "100.00", "125.00", "150.00", "-20.0", "20"] in table
    assert c.summary.regret == pytest.approx(25.0) and c.summary.unmeasured_predictions == 1
    (best,) = [line for line in text.splitlines() if "regret" in line]
    assert "25.0" in best.split()
    lines = c.to_csv().splitlines()
    assert lines[0].startswith("strategy,bucket_mb,accum_steps,predicted_ms,measured_ms")
    assert lines[0].endswith(",input,halves_apart_pct,predicted_low_ms,predicted_high_ms,"
                             "in_range")
    assert lines[1] == "naive,,1,90,100,90,120,-10,20,false,,,," and len(lines) == 6


# --- command line ------------------------------------------------------------------------------

def test_json_output_is_one_document(tmp_path, capsys):
    p, m = write_pair(tmp_path, *grid())
    assert main(["compare", "--predicted", p, "--measured", m, "--format", "json"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert set(doc) == {"rows", "summary", "timeline_fidelity", "overlap",
                        "net_of_compute", "instance_gap_pct", "cpu_note", "halves"} \
        and out.err == ""
    assert doc["instance_gap_pct"] is None      # a bench file without its twin's distance
    assert {"median_ape", "max_ape", "spearman", "predicted_best_bucket_mb",
            "measured_best_bucket_mb", "regret"} <= set(doc["summary"])
    assert set(doc["rows"][0]) == {"strategy", "bucket_mb", "accum_steps", "predicted_ms",
                                   "measured_ms", "measured_p5_ms", "measured_p95_ms",
                                   "error_pct", "samples", "input", "predicted_range_ms",
                                   "in_range", "halves_apart_pct"}
    assert doc["rows"][2]["predicted_ms"] == pytest.approx(100.0)
    assert doc["summary"]["regret"] == pytest.approx(25.0)


def test_out_writes_plots_json_csv(tmp_path, capsys):
    p, m = write_pair(tmp_path, *grid())
    out = tmp_path / "cmp"
    assert main(["compare", "--predicted", p, "--measured", m, "--out", str(out),
                 "--format", "json"]) == 0
    stdout = capsys.readouterr().out
    assert {f.name for f in out.iterdir()} == ALL_OUTPUTS    # no temporary files left behind
    assert json.loads((out / JSON_NAME).read_text()) == json.loads(stdout)
    for name in (SCATTER_PNG, BUCKETS_PNG, TIMELINE_PNG):
        image = matplotlib.image.imread(out / name)
        assert image.shape[0] > 300 and image.shape[1] > 600


def test_plots_without_spans_buckets_or_a_second_config(tmp_path):
    # one bucket-less config, nothing measured has spans: every plot still renders
    c = compare_results([res("naive", None, 90, spans=timeline(1.0))], [meas("naive", None, 100)])
    paths = write_compare_plots(c, tmp_path / "a")
    assert {p.name for p in paths} == {SCATTER_PNG, BUCKETS_PNG, TIMELINE_PNG}
    assert all(matplotlib.image.imread(p).size for p in paths)
    # accumulation gets its own panel; a timeline of a predicted-only config
    predicted, measured = grid()
    predicted += [res("no_sync", 10, 300, accum=4), res("no_sync", 100, 280, accum=4)]
    measured += [meas("no_sync", 10, 320, accum=4)]
    paths = write_compare_files(compare_results(predicted, measured), tmp_path / "b", "ddp:25")
    assert {p.name for p in paths} == ALL_OUTPUTS


def test_library_api_is_a_dataclass():
    c = compare_results(*grid())
    assert isinstance(c, Comparison) and len(c.rows) == 5 and len(c.predicted) == 6


def test_realrun_bench_naming_and_compute_only_baseline():
    # a preset's prediction is named model@device,bXsY; realrun bench names the module and
    # always measures "compute-only", which a sweep does not list but every prediction carries
    predicted = [dataclasses.replace(res("naive", None, 90, model="toy@a100,b8s1024"),
                                     compute_s=0.060),
                 dataclasses.replace(res("ddp", 25, 70, model="toy@a100,b8s1024"),
                                     compute_s=0.060)]
    c = compare_results(predicted, [meas("compute-only", None, 50), meas("naive", None, 100),
                                    meas("ddp", 25, 70)])
    assert [(r.label, round(r.error_pct, 9)) for r in c.rows] == \
        [("compute-only", 20.0), ("naive", -10.0), ("ddp:25", 0.0)]   # 60 vs 50 ms: +20 %
    assert c.summary.unmeasured_predictions == 0
    assert c.summary.model == "toy@a100,b8s1024 / toy"
    assert c.summary.configs == 3 and c.summary.max_ape == pytest.approx(20.0)
    # realrun validate builds the predictions' compute from compute-only: an input, tabled
    # and marked but not scored (max APE is naive's 10 %, over 2 configs)
    anchored = compare_results(predicted, [meas("compute-only", None, 50),
                                           meas("naive", None, 100), meas("ddp", 25, 70)],
                               inputs=frozenset({"compute-only"}))
    assert [r.is_input for r in anchored.rows] == [True, False, False]
    assert anchored.summary.configs == 2 and anchored.summary.max_ape == pytest.approx(10.0)
    assert anchored.to_json()["rows"][0]["input"] is True
    text = format_table(anchored)
    assert text.splitlines()[2].split()[:1] == ["compute-only"]
    assert "input" in text.splitlines()[2].split()               # marked in the table
    assert [line for line in text.splitlines()[3:] if "compute-only" in line] != []  # and said
    with pytest.raises(InputError, match="compute-only has no prediction"):
        compare_results([res("naive", None, 90)], [meas("compute-only", None, 50)])  # compute_s 0
    with pytest.raises(InputError, match="model differs"):
        compare_results([res("naive", None, 90, model="toy2@a100")], [meas("naive", None, 90)])


def test_errors_net_of_the_compute_only_miss():
    """Hand-computed: compute predicted 60 ms, measured 50 (+10 ms, +20 %); net of it naive
    is 90 − 10 = 80 against 100 (−20 %), ddp 70 − 10 = 60 against 70 (−14.3 %), and no_sync
    at accum 4 computes 4 times: 200 − 40 = 160 against 150 (+6.7 %)."""
    predicted = [dataclasses.replace(res(s, mb, ms), compute_s=0.060, accum_steps=k)
                 for s, mb, ms, k in (("naive", None, 90, 1), ("ddp", 25, 70, 1),
                                      ("no_sync", 25, 200, 4))]
    measured = [meas("compute-only", None, 50), meas("naive", None, 100), meas("ddp", 25, 70),
                dataclasses.replace(meas("no_sync", 25, 150), accum_steps=4)]
    doc = compare_results(predicted, measured).to_json()["net_of_compute"]
    assert doc["compute_miss_ms"] == pytest.approx(10.0)
    assert doc["compute_error_pct"] == pytest.approx(20.0)
    assert [(r["config"], round(r["net_error_pct"], 2)) for r in doc["rows"]] == \
        [("naive", -20.0), ("ddp:25", -14.29), ("no_sync:25 (accum 4)", 6.67)]
    assert doc["max_config"] == "naive" and doc["max_ape"] == pytest.approx(20.0)
    assert doc["median_ape"] == pytest.approx(100 / 7)
    c = compare_results(predicted, measured)
    net = net_text(net_of_compute(c.rows))          # the report prints the same numbers
    assert len(net) == 2 and all(line in format_table(c).splitlines() for line in net)
    numbers = [re.findall(r"[-+]?\d+\.\d+", line) for line in net]
    assert numbers == [["10.00", "+20.0"], ["14.3", "20.0", "-20.0"]]   # miss; median, max
    # an input (realrun validate) or no compute-only row: nothing to take out
    anchored = compare_results(predicted, measured, inputs=frozenset({"compute-only"}))
    assert anchored.to_json()["net_of_compute"] is None
    assert not any(line in format_table(anchored).splitlines() for line in net)
    assert compare_results(predicted, measured[1:]).to_json()["net_of_compute"] is None


def test_measured_steps_give_the_regret_an_interval():
    """Steps in the measured file (realrun bench writes them) -> a paired bootstrap interval."""
    def r(src, mb, step_s, steps=()):
        return Result("toy", "eth", "bucketed", mb, 2, step_s, 0.0, 1, source=src,
                      steps_s=steps)
    fast = tuple(0.100 + 0.001 * (i % 3) for i in range(20))
    slow = tuple(0.110 + 0.001 * (i % 3) for i in range(20))
    c = compare_results([r("predicted", 10, 0.09), r("predicted", 25, 0.08)],
                        [r("measured", 10, 0.101, fast), r("measured", 25, 0.111, slow)])
    low, high = c.summary.regret_ci
    assert low < c.summary.regret < high and low > 5
    interval = [f"{low:+.1f}", f"{high:+.1f}"]       # printed beside the regret
    (best,) = [line for line in format_table(c).splitlines() if "regret" in line]
    assert all(end in best for end in interval)
    assert results_to_json([r("measured", 10, 0.101, fast)])["results"][0]["steps_s"][:2] == \
        [0.100, 0.101]


# --- ranges, timeline fidelity -------------------------------------------------------------------

def test_ranges_count_and_steer_the_predicted_best():
    # bucketed:1 is the point best (100 ms) but 30 % behind 10 MB when comm-bound; 10 MB never
    # more than 2 % behind: the predicted best is the robust 10 MB, as simddp sweep recommends.
    def ranged(mb, ms, comm_bound_ms):
        return dataclasses.replace(res("bucketed", mb, ms),
                                   scenarios_s={"low": ms * 0.9e-3, "comm_bound": comm_bound_ms / 1e3})
    predicted = [ranged(1, 100, 130), ranged(10, 102, 100)]
    measured = [meas("bucketed", 1, 105), meas("bucketed", 10, 90)]  # 90 is outside 91.8-102
    c = compare_results(predicted, measured)
    assert c.summary.predicted_best_bucket_mb == 10 and c.summary.regret == 0
    assert [r.in_range for r in c.rows] == [True, False]
    assert (c.summary.with_range, c.summary.in_range) == (2, 1)
    assert c.to_json()["summary"]["in_range"] == 1
