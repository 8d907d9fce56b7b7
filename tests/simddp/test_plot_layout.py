"""Issue 23, item 6: every legend, title, label and tick label lies inside its figure, legends
stay off the data, labels do not overlap, each swept bucket size has its tick label, and
the step-end line of a measured timeline is where its spans end.

    python -m pytest tests/simddp/test_plot_layout.py -q      # no processes, ~10 s

How: draw the canvas, then compare each artist's window extent (pixels) with the figure's.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from simddp import Layer, Link, ModelProfile, make_strategy
from simddp.compare import compare_results
from simddp.compare.plots import plot_buckets, plot_scatter, plot_timelines
from simddp.inputs.contention import Contention
from simddp.inputs.link_file import LinkFile
from simddp.report.gantt import step_end_ms
from simddp.report.sweep_plot import gantt_figure, sweep_figure
from simddp.result import Result, Span
from simddp.predict.sweep import sweep
from simddp.predict.recommend import recommend

PROFILE = ModelProfile("mlp-8x1024", tuple(Layer(f"l{i}", (4 << 20,), 1e-3, 2.5e-3)
                                           for i in range(8)), compute_spread=(0.7, 1.2))
LINK = LinkFile(Link("vm-gloo-p2", 1.4e-3, 1.2, time_spread=(0.3, 2.0)),
                Contention(1.8, 1.9, source="link"))
MBS = (1.0, 4.0, 10.0, 40.0)
STRATEGIES = ["naive", "flat", "overlap", "bucketed", "ddp", "no_sync"]


def texts(fig):
    """(what, artist) of every visible piece of text and every legend in ``fig``."""
    out = [("legend", lg) for lg in fig.legends]
    out += [("figure text", t) for t in fig.texts]
    if fig._suptitle is not None:
        out.append(("suptitle", fig._suptitle))
    for ax in fig.axes:
        if ax.get_legend() is not None:
            out.append(("legend", ax.get_legend()))
        out += [("title", t) for t in (ax.title, ax._left_title, ax._right_title)]
        out += [("axis label", ax.xaxis.label), ("axis label", ax.yaxis.label)]
        out += [("text", t) for t in ax.texts]
        for axis in (ax.xaxis, ax.yaxis):  # ticks outside the view are never drawn
            lo, hi = sorted(axis.get_view_interval())
            out += [("tick label", label) for tick in axis.get_major_ticks()
                    + axis.get_minor_ticks() if lo * (1 - 1e-9) <= tick.get_loc() <= hi * (1 + 1e-9)
                    for label in (tick.label1, tick.label2)]
    return [(w, a) for w, a in out
            if a.get_visible() and (w == "legend" or a.get_text().strip())]


def outside(fig) -> list[str]:
    """What sticks out of the figure by more than a pixel, as 'what: text'."""
    FigureCanvasAgg(fig).draw()
    box = fig.bbox
    bad = []
    for what, artist in texts(fig):
        e = artist.get_window_extent()
        if e.x0 < box.x0 - 1 or e.x1 > box.x1 + 1 or e.y0 < box.y0 - 1 or e.y1 > box.y1 + 1:
            name = "legend" if what == "legend" else artist.get_text()
            bad.append(f"{what}: {name!r} at x {e.x0:.0f}..{e.x1:.0f}, y {e.y0:.0f}..{e.y1:.0f}"
                       f" of {box.width:.0f}x{box.height:.0f}")
    return bad


def overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def results():
    return sweep(PROFILE, LINK, 2, STRATEGIES, MBS, ranges=True, record=True)


def test_sweep_figure_labels_every_size_and_keeps_legend_and_star_clear():
    rs = results()
    rec = recommend(rs, PROFILE)
    fig = sweep_figure(rs, (rec.strategy, rec.bucket_mb))
    assert outside(fig) == []
    ax = fig.axes[0]
    shown = {t.get_text() for t in ax.get_xticklabels() if t.get_visible()}
    assert {"1", "4", "10", "40"} <= shown
    legend = ax.get_legend().get_window_extent()
    assert not overlaps(legend, ax.bbox)                       # beside the panel, not on it
    star = next(l for l in ax.get_lines() if l.get_marker() == "*")
    x, y = ax.transData.transform((star.get_xdata()[0], star.get_ydata()[0]))
    assert ax.bbox.x0 < x < ax.bbox.x1 and ax.bbox.y0 < y < ax.bbox.y1
    assert star.get_zorder() > max(l.get_zorder() for l in ax.get_lines() if l is not star)
    # no band of a bucket-less strategy spans the panel: only the bucket curves' bands
    spans = [p for p in ax.patches if p.get_width() >= 0.99 and p.get_height() > 0]
    assert not [c for c in ax.collections if c.get_transform().contains_branch(ax.transAxes)
                and type(c).__name__ == "PolyCollection"] and not spans


def test_compare_figures_stay_inside_and_scatter_labels_do_not_overlap():
    predicted = results()
    measured = []
    for i, r in enumerate(p for p in predicted if p.strategy != "no_sync"
                          and p.strategy != "sync_each"):
        steps = r.step_s * (1.05 + 0.1 * np.random.default_rng(i).standard_normal(20))
        measured.append(dataclasses.replace(
            r, source="measured", step_s=float(np.median(steps)), steps_s=tuple(steps),
            step_p5_s=float(np.percentile(steps, 5)), step_p95_s=float(np.percentile(steps, 95)),
            samples=20, scenarios_s=None, spans=()))
    c = compare_results(predicted, measured, profile=PROFILE)
    for fig in (plot_scatter(c), plot_buckets(c)):
        assert outside(fig) == []
    # the bucket MB is the point's marker, named in the legend: no label on the points to
    # overlap (issue 53 item 5: the labels of a cluster piled up; test_plots_readable.py)
    scatter = plot_scatter(c)
    FigureCanvasAgg(scatter).draw()
    assert len(scatter.axes[0].texts) == 0
    legend = [t.get_text() for t in scatter.axes[0].get_legend().get_texts()]
    assert {f"{mb:g} MB" for mb in MBS} <= set(legend)


@pytest.mark.parametrize("with_measured", [False, True])
def test_timeline_legend_fits_even_one_panel(with_measured):
    p = next(r for r in results() if r.strategy == "ddp" and r.bucket_mb == 4.0)
    m = None
    if with_measured:
        spans = tuple(Span(s.lane, s.label, 5.0 + 1.2 * s.start_s, 5.0 + 1.2 * s.end_s, s.kind)
                      for s in p.spans)
        m = dataclasses.replace(p, source="measured", spans=spans, samples=30)
    fig = plot_timelines(p, m)
    assert outside(fig) == []
    for ax in fig.axes:       # each panel its own legend, under it
        assert "forward" in [t.get_text() for t in ax.get_legend().get_texts()]
        assert ax.get_legend().get_window_extent().y1 < ax.get_window_extent().y0


def test_measured_step_end_is_where_its_spans_end():
    # validate's measured panel: the median of the bench (59.3 ms) against one clocked step
    # of its own, whose spans run to 71 ms: the line goes at 71, the label names both
    spans = (Span("compute", "forward", 10.0, 10.020, "forward"),
             Span("compute", "optimizer", 10.060, 10.071, "optimizer"))
    m = Result("m", "l", "ddp", 4.0, 2, 0.0593, 0.0, 8, source="measured", spans=spans,
               samples=30)
    assert step_end_ms(m) == (71.0, "this step ends 71.0 ms (median 59.3 ms) ")
    fig = gantt_figure(m)
    assert outside(fig) == []
    line = next(l for l in fig.axes[0].get_lines() if l.get_linestyle() == ":")
    assert line.get_xdata()[0] == pytest.approx(71.0)
    predicted = dataclasses.replace(m, source="predicted", step_s=0.071)
    assert step_end_ms(predicted)[0] == pytest.approx(71.0)


def test_calibrate_figures_stay_inside_and_name_the_busbw_unit():
    from calibrate.analysis import analyse
    from calibrate.plots import figures
    from calibrate.settings import CalibrateSettings
    from tests.calibrate.test_kinds import _ranks
    world = analyse(CalibrateSettings(world_sizes=(2,), sequence_count=8, contention=False,
                                      progress=False), 2, _ranks())
    for name, fig in figures([world]).items():
        assert outside(fig) == [], name
    legend = figures([world])["allreduce_time.png"].axes[0].get_legend()
    assert any("busbw" in t.get_text() and "GB/s" in t.get_text()
               for t in legend.get_texts())


def test_many_swept_sizes_get_tick_labels_that_do_not_collide():
    mbs = [0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 200, 500, 1000]
    fig = sweep_figure(sweep(PROFILE, LINK, 2, ["naive", "bucketed"], mbs, ranges=True))
    assert outside(fig) == []
    labels = [t.get_window_extent() for t in fig.axes[0].get_xticklabels()
              if t.get_visible() and t.get_text()]
    assert len(labels) >= 5
    assert not [(i, j) for i in range(len(labels)) for j in range(i)
                if overlaps(labels[i], labels[j])]
