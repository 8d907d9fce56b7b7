"""Chrome traces and plots of a step, predicted and measured.

The toy: 2 layers, 1 ms forward and 2 ms backward each, one 1e6-byte gradient each, on 2
ranks over a link where it takes 1 ms. With ``overlap`` the step reads::

    compute: forward 0–2 | l1 bwd 2–4 | l0 bwd 4–6 | (waits 6–7) | optimizer 7–8
    comm:                          all-reduce t1 4–5 |  t0 6–7
"""
from __future__ import annotations

import json
from dataclasses import replace

import matplotlib.image
import pytest

from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.inputs.link import Link
from simddp.inputs.resolved import Inputs
from simddp.planning.plans import plan
from simddp.report.gantt import idle_gaps_s
from simddp.report.sweep_plot import figure_png, gantt_figure, save_png, sweep_figure
from simddp.inputs.profile import Layer, ModelProfile
from simddp.result import load_results, results_to_json
from simddp.result import COMM, COMPUTE, Result
from simddp.planning.strategy import make_strategy
from simddp.predict.sweep import sweep
from simddp.predict.recommend import recommend
from simddp.report.trace import save_trace, trace_events

TOY = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 1e-3, 2e-3) for i in range(2)), 1e-3)
LINK = Link("unit", 0.0, 1.0)  # 1e6 bytes at p=2: 2·(1/2)·1e6 / 1e9 = 1 ms
INPUTS = Inputs(TOY, LINK, 2)  # the bare engine: no contention


def toy_result(strategy: str = "overlap", **kw) -> Result:
    return simulate(plan(TOY, make_strategy(strategy, **kw)), INPUTS)


# --- trace ---------------------------------------------------------------------------------

def test_trace_has_two_named_tracks_and_one_complete_event_per_span(tmp_path):
    result = toy_result()
    save_trace(tmp_path / "t.json", result)
    doc = json.loads((tmp_path / "t.json").read_text())
    events = doc["traceEvents"]
    meta = [e for e in events if e["ph"] == "M"]
    threads = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert sorted(threads) == [1, 2]
    assert threads[1].startswith("compute") and threads[2].startswith("comm")
    assert [e["name"] for e in meta].count("process_name") == 1
    spans = [(e["tid"], e["name"], e["cat"], round(e["ts"], 6), round(e["dur"], 6))
             for e in events if e["ph"] == "X"]
    assert sorted(spans) == sorted([
        (1, "forward", "forward", 0.0, 2000.0), (1, "l1 bwd", "backward", 2000.0, 2000.0),
        (1, "l0 bwd", "backward", 4000.0, 2000.0), (1, "optimizer", "optimizer", 7000.0, 1000.0),
        (2, "grad1", "all-reduce", 4000.0, 1000.0), (2, "grad0", "all-reduce", 6000.0, 1000.0)])
    assert all({"ph", "ts", "dur", "pid", "tid", "name"} <= set(e)
               for e in events if e["ph"] == "X")
    assert doc["otherData"]["step_ms"] == pytest.approx(8.0)


def test_trace_durations_match_the_spans_of_a_real_model():
    result = toy_result("ddp", bucket_mb=1)
    xs = [e for e in trace_events(result)["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(result.spans)
    for e, s in zip(xs, result.spans):
        assert e["tid"] == {COMPUTE: 1, COMM: 2}[s.lane]
        assert e["ts"] == pytest.approx(s.start_s * 1e6) and e["dur"] == pytest.approx(
            s.duration_s * 1e6)


def test_a_result_without_spans_cannot_be_traced():
    result = simulate(plan(TOY, make_strategy("naive")), INPUTS, record=False)
    with pytest.raises(InputError, match="no timeline"):
        trace_events(result)


def test_a_results_file_with_spans_without_a_kind_is_refused_saying_how_to_get_a_current_one(
        tmp_path):
    """Spans got their kind on 2026-11-23: an older results file is refused in one line."""
    doc = results_to_json([toy_result("ddp", bucket_mb=1)])
    for span in doc["results"][0]["spans"]:
        del span["kind"]
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as e:
        load_results(path)
    message = str(e.value)
    # one line: the file, what it lacks, and the two commands that write a current one
    assert len(message.splitlines()) == 1 and "sweep.json" in message and "kind" in message
    assert "simddp" in message and "realrun" in message and "--out" in message


def test_the_engine_names_each_span_kind_and_the_trace_uses_it():
    result = toy_result("ddp", bucket_mb=1)
    kinds = {(s.lane, s.kind) for s in result.spans}
    assert kinds == {(COMPUTE, "forward"), (COMPUTE, "backward"), (COMPUTE, "optimizer"),
                     (COMM, "all-reduce")}
    cats = {e["cat"] for e in trace_events(result)["traceEvents"] if e["ph"] == "X"}
    assert cats == {"forward", "backward", "optimizer", "all-reduce"}


# --- plots -----------------------------------------------------------------------------------

def test_idle_gaps_are_where_compute_waits_for_the_all_reduce():
    assert [(round(a * 1e3, 9), round(b * 1e3, 9)) for a, b in idle_gaps_s(toy_result())] == [
        (6.0, 7.0)]
    assert [(round(a * 1e3, 9), round(b * 1e3, 9)) for a, b in idle_gaps_s(toy_result("flat"))] \
        == [(6.0, 8.0)]


def test_gantt_png_renders_at_the_figure_size(tmp_path):
    fig = gantt_figure(toy_result())
    save_png(tmp_path / "g.png", fig, dpi=100)
    width, height = fig.get_size_inches() * 100
    img = matplotlib.image.imread(tmp_path / "g.png")
    assert img.shape == (round(height), round(width), 4)
    assert img[..., :3].std() > 0.05  # not a blank canvas


def test_gantt_of_a_measured_result_with_micro_steps():
    measured = replace(toy_result("no_sync", bucket_mb=25, accum_steps=3), source="measured",
                       step_p5_s=0.019, step_p95_s=0.023, samples=50)
    assert figure_png(gantt_figure(measured))[:8] == b"\x89PNG\r\n\x1a\n"


def test_gantt_without_spans_is_an_input_error():
    with pytest.raises(InputError, match="no timeline"):
        gantt_figure(simulate(plan(TOY, make_strategy("naive")), INPUTS, record=False))


def test_sweep_plot_draws_predicted_and_measured_with_spread(tmp_path):
    predicted = sweep(TOY, LINK, 2, ["naive", "flat", "overlap", "bucketed", "ddp", "no_sync"],
                      [0.5, 1, 2], accum_steps=2)
    measured = [replace(r, source="measured", step_s=r.step_s * 1.1,
                        step_p5_s=r.step_s * 1.05, step_p95_s=r.step_s * 1.2, samples=20)
                for r in predicted]
    rec = recommend(predicted)
    fig = sweep_figure(predicted + measured, (rec.strategy, rec.bucket_mb))
    assert len(fig.axes) == 2  # per step, and per optimizer step with accumulation
    labels = fig.axes[0].get_legend_handles_labels()[1]
    # ddp predicted and measured; naive (no buckets) and its measurement in the strip beside
    assert [label.split()[0] for label in labels].count("ddp") == 2 and "ddp" in labels
    (strip,) = fig.axes[0].child_axes
    columns = [t.get_text().split()[0] for t in strip.get_xticklabels()]
    assert columns.count("naive") == 2
    save_png(tmp_path / "s.png", fig, dpi=80)
    width, height = fig.get_size_inches() * 80
    assert matplotlib.image.imread(tmp_path / "s.png").shape == (round(height), round(width), 4)


def test_sweep_plot_of_bucketless_strategies_only():
    fig = sweep_figure(sweep(TOY, LINK, 2, ["naive", "overlap"], []))
    assert len(fig.axes) == 1 and len(figure_png(fig)) > 1000
