"""Issue 63 items 2 and 5: what one picture shows agrees with itself and with the step.

- gantt.png's title said "exposed comm 34.91 ms" and its legend "compute waits for comm
  (28.1 ms)", with a backward bar longer than the profile's: the title now splits the
  exposed comm into the wait (hatched), host work and compute slowed while comm runs;
- compare_timeline.png had one legend for both panels (the predicted wait only), and its
  measured lane cut one collective in two where two ran at once;
- compare_scatter.png put compute-only's point and a cluster of eleven on one panel.

    python -m pytest tests/simddp/test_plots_agree.py -q      # no processes

Spans are hand-made on round numbers, or simulated on the small profile of
test_plot_layout.py (contention x1.8 while comm runs, so compute is slowed).
"""
from __future__ import annotations

import dataclasses

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from simddp import Layer, Link, ModelProfile, make_strategy, plan, simulate
from simddp.compare import compare_results
from simddp.compare.plots import plot_scatter, plot_timelines, scatter_groups
from simddp.inputs.contention import Contention
from simddp.inputs.link_file import LinkFile
from simddp.report.gantt import comm_rows, draw_gantt, exposed_parts, idle_gaps_s
from simddp.report.sweep_plot import gantt_figure
from simddp.result import COMM, COMPUTE, Result, Span

PROFILE = ModelProfile("mlp-8x1024", tuple(Layer(f"l{i}", (4 << 20,), 1e-3, 2.5e-3)
                                           for i in range(8)))
LINK = LinkFile(Link("vm-gloo-p2", 1.4e-3, 1.2), Contention(1.8, 1.9, source="link"))


def simulated(strategy: str, **kw) -> Result:
    return simulate(PROFILE, LINK, plan(PROFILE, make_strategy(strategy, **kw)), 2, record=True)


def numbers(text: str) -> set[str]:
    return {w.strip("();,") for w in text.split()}


@pytest.mark.parametrize("strategy, kw", [("ddp", {"bucket_mb": 4.0}), ("overlap", {}),
                                          ("naive", {}), ("fsdp", {})])
def test_the_exposed_comm_splits_into_what_the_gantt_draws(strategy, kw):
    r = simulated(strategy, **kw)
    parts = exposed_parts(r)
    assert parts is not None
    assert parts.waits_ms + parts.host_ms + parts.slowed_ms == pytest.approx(parts.exposed_ms)
    assert parts.compute_ms + parts.exposed_ms == pytest.approx(r.step_s * 1e3)
    # overlapped compute is slowed by the contention, naive's is not
    assert (parts.slowed_ms > 0) == (strategy != "naive")


def test_gantt_title_and_legend_give_the_same_wait_and_the_bars_their_drawn_time():
    r = simulated("ddp", bucket_mb=4.0)
    parts = exposed_parts(r)
    fig = gantt_figure(r)
    title = numbers(fig.axes[0].get_title())
    assert {f"{parts.exposed_ms:.2f}", f"{parts.waits_ms:.2f}", f"{parts.slowed_ms:.2f}",
            f"{parts.compute_ms:.2f}"} <= title
    (legend,) = fig.legends
    labels = {h.get_label(): h for h in legend.legend_handles}
    (hatched,) = [label for label, h in labels.items() if h.get_hatch()]
    assert f"{parts.waits_ms:.2f}" in numbers(hatched)
    backward_ms = sum(s.duration_s for s in r.spans if s.kind == "backward") * 1e3
    (entry,) = [label for label in labels if label.split()[0] == "backward"]
    assert f"{backward_ms:.1f}" in numbers(entry)
    # longer than the profile's backward alone, by what the title calls slowed
    assert backward_ms > sum(layer.backward_s for layer in PROFILE.layers) * 1e3


def test_fsdp_first_all_gather_is_waiting_too():
    r = simulated("fsdp")
    first = min(s.start_s for s in r.spans)
    assert min(s.start_s for s in r.spans if s.lane == COMPUTE) > first
    assert idle_gaps_s(r)[0][0] == first


def test_a_measured_step_is_not_split():
    spans = (Span(COMPUTE, "fwd", 0.0, 0.010, "forward"),
             Span(COMPUTE, "opt", 0.030, 0.035, "optimizer"))
    m = Result("m", "l", "ddp", 4.0, 2, 0.040, 0.010, 1, compute_s=0.030, source="measured",
               spans=spans, samples=10)
    assert exposed_parts(m) is None
    assert "10.00" in numbers(gantt_figure(m).axes[0].get_title())   # exposed, as before


OVERLAPPING = (Span(COMPUTE, "backward", 0.0, 0.002, "backward"),
               Span(COMM, "bucket 0", 0.001, 0.005, "all-reduce"),
               Span(COMM, "bucket 1", 0.002, 0.004, "all-reduce"),    # ran beside bucket 0
               Span(COMM, "bucket 2", 0.005, 0.006, "all-reduce"),
               Span(COMPUTE, "optimizer", 0.006, 0.007, "optimizer"))


def comm_bars(ax) -> list:
    """(x0, x1, y0, y1) of every bar drawn on the comm lane (y below 0.5)."""
    out = []
    for c in ax.collections:
        for path in c.get_paths():
            xs, ys = path.vertices[:, 0], path.vertices[:, 1]
            if ys.max() < 0.5 and c.get_hatch() is None:
                out.append((xs.min(), xs.max(), ys.min(), ys.max()))
    return out


def test_collectives_that_ran_at_once_are_one_bar_each_stacked():
    r = Result("m", "l", "ddp", 1.0, 2, 0.007, 0.003, 3, source="measured", spans=OVERLAPPING,
               samples=10)
    assert comm_rows(r) == {1: 0, 2: 1, 3: 0}
    ax = Figure().add_subplot()
    handles = draw_gantt(ax, r)
    bars = comm_bars(ax)
    assert len(bars) == 3                                   # three collectives, three bars
    assert not [(a, b) for i, a in enumerate(bars) for b in bars[i + 1:]
                if a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]]
    assert "(3," in [w for h in handles for w in h.get_label().split()]      # the count


def test_each_timeline_panel_has_its_own_legend_and_its_own_wait():
    p = simulated("ddp", bucket_mb=4.0)
    m = dataclasses.replace(p, source="measured", samples=30, spans=tuple(
        Span(s.lane, s.label, 1.5 * s.start_s, 1.5 * s.end_s, s.kind) for s in p.spans))
    fig = plot_timelines(p, m)
    FigureCanvasAgg(fig).draw()
    waits = []
    for ax, r in zip(fig.axes, (p, m)):
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        (wait,) = [label for label in labels if label.split()[0] == "compute"]
        ms = sum(b - a for a, b in idle_gaps_s(r)) * 1e3
        assert f"{ms:.2f}" in numbers(wait)
        waits.append(ms)
    assert waits[1] == pytest.approx(1.5 * waits[0])       # the measured panel's own
    assert not fig.legends


def row(strategy, bucket_mb, step_ms, measured_ms) -> tuple[Result, Result]:
    p = Result("m", "l", strategy, bucket_mb, 2, step_ms / 1e3, 0.0, 1)
    m = dataclasses.replace(p, source="measured", step_s=measured_ms / 1e3, samples=20,
                            step_p5_s=measured_ms / 1e3 * 0.8, step_p95_s=measured_ms / 1e3 * 1.2)
    return p, m


def test_scatter_gives_far_apart_steps_their_own_panel_scaled_to_its_points():
    # compute-only at 27 ms, eleven configurations at 55-70 ms: one panel left them a corner
    pairs = [row("compute-only", None, 27.0, 25.5), row("naive", None, 70.5, 63.4)]
    pairs += [row(s, mb, 55 + k + 0.5 * i, 57 + k) for i, s in enumerate(("ddp", "bucketed"))
              for k, mb in enumerate((1.0, 4.0, 10.0, 40.0, 100.0))]
    c = compare_results([p for p, _ in pairs], [m for _, m in pairs])
    assert [len(g) for g in scatter_groups(c.rows)] == [1, 11]
    fig = plot_scatter(c)
    FigureCanvasAgg(fig).draw()
    main, side = fig.axes
    lo, hi = main.get_xlim()
    assert 50 < lo < 55 and 70.5 < hi < 76            # from the points, not from compute-only
    assert main.get_ylim() == (lo, hi)
    assert side.get_xlim()[0] < 25.5 < 27.0 < side.get_xlim()[1]
    # labelled ticks in the main panel: more than two, plain numbers
    ticks = [t.get_text() for t in main.get_xticklabels() if t.get_text()]
    assert len(ticks) >= 4 and all(t.replace(".", "").isdigit() for t in ticks)
    assert main.get_legend().get_window_extent().y1 < main.get_window_extent().y0   # under it
