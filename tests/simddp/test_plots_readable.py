"""Issue 53 item 5: the sweep and compare pictures a new user opened.

- sweep.png was a 2160x540 strip whose prediction bands ran to the top of the panel and
  squashed the curves; with 16 and 25 MB both swept, 25 MB had no tick label;
- compare's scatter printed each point's bucket MB beside it, and a cluster of a dozen
  configurations within a few ms piled the labels on each other.

    python -m pytest tests/simddp/test_plots_readable.py -q      # no processes, ~15 s

Rows are made by hand (round numbers, no simulation), so the layout is tested, not a preset.
"""
from __future__ import annotations

import dataclasses
import functools

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection

from simddp.compare import compare_results
from simddp.compare.plots import bucket_markers, plot_buckets, plot_scatter
from simddp.report.sweep_plot import sweep_figure, y_window_ms
from simddp.result import Result

SIZES_MB = (1.0, 10.0, 16.0, 25.0, 100.0, 1000.0)
# ddp's curve over 1045-1115 ms with ranges 25 % above it, naive 55 %: transformer-xl on
# ib-hdr x16's shape, where the bands had taken three quarters of the panel
DDP_MS = {1.0: 1050, 10.0: 1047, 16.0: 1047, 25.0: 1046, 100.0: 1045, 1000.0: 1115}


def row(strategy, bucket_mb, step_ms, high_ms=None, accum_steps=1, **kw) -> Result:
    scenarios = None if high_ms is None else {"high": high_ms / 1e3}
    return Result("m", "l", strategy, bucket_mb, 16, step_ms / 1e3, 0.0, 1,
                  accum_steps=accum_steps, scenarios_s=scenarios, **kw)


def swept() -> list[Result]:
    rows = [row("ddp", mb, ms, ms * 1.25) for mb, ms in DDP_MS.items()]
    rows += [row("naive", None, 1622, 1700), row("overlap", None, 1052, 1280)]
    rows += [row("no_sync", mb, 4 * ms - 550, 4 * ms * 1.1, accum_steps=4)
             for mb, ms in DDP_MS.items()]
    return rows


def drawn(fig):
    FigureCanvasAgg(fig).draw()
    return fig


@functools.cache
def swept_figure():
    """sweep_figure(swept()), drawn once for the tests that only look at it."""
    return drawn(sweep_figure(swept()))


def tick_labels(ax) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]


def overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_sweep_png_is_a_readable_shape_not_a_strip():
    fig = sweep_figure(swept())
    width_in, height_in = fig.get_size_inches()
    assert len(fig.axes) == 2                       # per step, and per optimizer step
    assert width_in <= 10.5 and 1.0 <= width_in / height_in * 2 <= 3.0   # each panel
    assert all(ax.get_ylabel().endswith("(ms)") for ax in fig.axes)
    assert all("MB" in ax.get_xlabel() for ax in fig.axes)


def test_every_swept_size_has_its_tick_label_and_none_touch():
    fig = swept_figure()
    for ax in fig.axes:
        assert tick_labels(ax) == ["1", "10", "16", "25", "100", "1000"]
        boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
        assert not [(a, b) for a, b in zip(boxes, boxes[1:]) if overlaps(a, b)]


def test_crowded_sizes_are_all_labelled_tilted_apart():
    sizes = (0.25, 0.5, 1, 2, 5, 10, 16, 20, 25, 50, 100, 200, 500, 1000)
    fig = drawn(sweep_figure([row("ddp", mb, 100 + mb / 100, 120) for mb in sizes]))
    ax = fig.axes[0]
    assert tick_labels(ax) == [f"{mb:g}" for mb in sizes]
    boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
    assert not [(a, b) for a, b in zip(boxes, boxes[1:]) if overlaps(a, b)]


def range_bars(ax) -> list:
    """The (x, y) ends of the prediction-range bars in the strip beside ``ax``."""
    (strip,) = ax.child_axes
    return [seg for c in strip.collections for seg in c.get_segments()]


def test_ranges_stay_in_the_strip_inside_the_axes_and_the_legend_says_where_they_were_cut():
    # issue 63 item 5: a band per curve filled the panel; the ranges are bars beside it
    fig = swept_figure()
    for ax in fig.axes:
        bottom, top = ax.get_ylim()
        assert not [c for c in ax.collections if isinstance(c, PolyCollection)]   # no bands
        bars = range_bars(ax)
        assert bars
        assert all(bottom - 1e-9 <= y <= top + 1e-9 for seg in bars for _, y in seg)
        legend = " ".join(t.get_text() for t in ax.get_legend().get_texts())
        assert "cut" in legend.split()
    # the highest range end, off the panel, is given in the legend
    assert "1394" in " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts()).split()


def test_the_curves_keep_most_of_the_panel():
    # ddp spans 1045-1115 ms; its ranges may add at most as much again above it
    bottom, top = y_window_ms([r for r in swept() if r.accum_steps == 1])
    assert (1115 - 1045) / (top - bottom) > 0.4
    assert bottom < 1045 and 1115 < top < 1394


def test_a_range_that_fits_is_shown_whole():
    # the curve spans 90-100 ms: a range 8 ms above it is within that span again
    rows = [row("ddp", mb, 100 - mb / 100, 108) for mb in SIZES_MB]
    bottom, top = y_window_ms(rows)
    assert bottom < 90 and top > 108


def test_strategies_without_buckets_are_columns_beside_the_curves_not_lines_across():
    # issue 63 item 5: lines across the panel, told apart by colour only, ran off its edges
    fig = swept_figure()
    ax = fig.axes[0]
    (strip,) = ax.child_axes
    assert not [line for line in ax.get_lines() if len(set(line.get_xdata())) == 1
                or list(line.get_xdata()) == [0, 1]]                    # no axhline, no axvline
    names = [t.get_text() for t in strip.get_xticklabels()]
    assert names[0] == "ddp 100 MB" and names[2] == "overlap"          # ddp's range at its best
    assert names[1].split()[0] == "naive" and "1622.0" in names[1]     # off the panel: its time
    # overlap's step is a short horizontal mark in its column, inside the panel
    (mark,) = [line for line in strip.get_lines() if line.get_marker() == "_"]
    assert list(mark.get_xdata()) == [2] and list(mark.get_ydata()) == [1052.0]
    frame = strip.get_window_extent()
    assert ax.get_window_extent().x1 < frame.x0                        # right of the curves


def test_the_star_is_on_its_own_curve_and_coinciding_curves_say_so():
    rows = [row("ddp", mb, ms) for mb, ms in DDP_MS.items()]
    rows += [row("bucketed", mb, ms + 0.1) for mb, ms in DDP_MS.items()]
    ax = drawn(sweep_figure(rows, ("ddp", 100.0))).axes[0]
    star = next(line for line in ax.get_lines() if line.get_marker() == "*")
    ddp = next(line for line in ax.get_lines() if line.get_label() == "ddp")
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (100.0, 1045.0)
    assert star.get_markeredgecolor() == ddp.get_color()
    bucketed = next(line for line in ax.get_lines() if line.get_label().startswith("bucketed"))
    assert bucketed.get_label() != "bucketed" and "ddp's" in bucketed.get_label().split()
    assert bucketed.get_zorder() > ddp.get_zorder()        # its open squares ring ddp's dots
    assert bucketed.get_linestyle() != ddp.get_linestyle()


def test_the_legend_is_under_the_panel_not_beside_it():
    fig = swept_figure()
    for ax in fig.axes:
        legend = ax.get_legend().get_window_extent()
        assert legend.y1 < ax.get_window_extent().y0
        assert legend.width <= fig.bbox.width


def measured_from(predicted: list[Result]) -> list[Result]:
    """Measurements 5 % above the prediction, within a few ms of each other."""
    return [dataclasses.replace(r, source="measured", step_s=r.step_s * 1.05, samples=20,
                                step_p5_s=r.step_s, step_p95_s=r.step_s * 1.1,
                                scenarios_s=None, steps_s=(r.step_s * 1.05,) * 20)
            for r in predicted]


def test_compare_scatter_tells_buckets_apart_by_marker_not_by_labels_on_the_points():
    predicted = [row(s, mb, ms + 3 * k) for k, s in enumerate(("ddp", "bucketed"))
                 for mb, ms in DDP_MS.items()] + [row("naive", None, 1622)]
    c = compare_results(predicted, measured_from(predicted))
    fig = drawn(plot_scatter(c))
    ax = fig.axes[0]
    assert len(ax.texts) == 0                            # nothing printed on the points
    shapes = {line.get_marker() for line in ax.get_lines()
              if line.get_linestyle() == "None" and line.get_marker() != "_"}   # not caps
    assert len(shapes) == len(SIZES_MB) + 1              # one per size, and no buckets
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [f"{mb:g} MB" for mb in SIZES_MB] == [t for t in legend if t.endswith(" MB")]
    assert {"ddp", "bucketed", "naive"} <= set(legend)
    # the marker key ends the legend: the no-bucket marker, then one per size, in order
    key = ax.get_legend().legend_handles[-len(SIZES_MB) - 1:]
    assert [h.get_marker() for h in key] == list(bucket_markers([*SIZES_MB, None]).values())
    assert not key[0].get_label().endswith(" MB")


def test_compare_buckets_labels_every_measured_size():
    predicted = [row("ddp", mb, ms) for mb, ms in DDP_MS.items()]
    fig = drawn(plot_buckets(compare_results(predicted, measured_from(predicted))))
    assert tick_labels(fig.axes[-1]) == ["1", "10", "16", "25", "100", "1000"]


def test_bucket_markers_differ_per_size():
    markers = bucket_markers([25.0, 16.0, None, 1.0, 16.0])
    assert list(markers) == [None, 1.0, 16.0, 25.0]
    assert len(set(markers.values())) == 4


def test_a_line_off_the_panel_gets_no_bar_even_where_its_range_reaches_into_it():
    # overlap at 900 ms, far below ddp's curve, its range up to 1100 ms: a bar from the
    # panel's bottom up would hang without its line (and a negative error bar would raise)
    rows = [row("ddp", mb, ms, ms * 1.25) for mb, ms in DDP_MS.items()]
    fig = drawn(sweep_figure(rows + [row("overlap", None, 900, 1100)]))
    ax = fig.axes[0]
    assert ax.get_ylim()[0] > 900
    (strip,) = ax.child_axes
    note = strip.get_xticklabels()[-1].get_text()          # its column, named with its time
    assert note.split()[0] == "overlap" and "900.0" in note
    assert [seg[0][0] for seg in range_bars(ax)] == [0]    # ddp's range only, no overlap bar


def test_panels_drawn_on_a_callers_figure_get_apart_once_all_are_placed():
    # the notebook's picture: two draw_sweep panels side by side; a panel measured alone
    # before the second was added had its labels run together once the second shrank it
    from matplotlib.figure import Figure

    from simddp.report.sweep_plot import draw_sweep, keep_tick_labels_apart
    sizes = (0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 200, 500, 1000)
    fig = Figure(figsize=(16, 4.5), layout="constrained")
    for i in range(2):
        draw_sweep(fig.add_subplot(1, 2, i + 1), [row("ddp", mb, 100 + mb / 100) for mb in sizes])
    keep_tick_labels_apart(fig, fig.axes)
    for ax in fig.axes:
        assert tick_labels(ax) == [f"{mb:g}" for mb in sizes]
        boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
        assert not [(a, b) for a, b in zip(boxes, boxes[1:]) if overlaps(a, b)]
