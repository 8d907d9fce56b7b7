"""Issue 53 item 5: calibrate's busbw plot tells the collective kinds apart by colour (it drew
every kind in the same blue, told apart only by marker direction), with its legend inside
the axes and units on both axes.

    python -m pytest tests/calibrate/test_report_plots.py -q      # no processes, < 10 s
"""
from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex

from calibrate.analysis import analyse
from calibrate.plots import figures
from calibrate.settings import CalibrateSettings
from tests.calibrate.test_kinds import _ranks
from tests.simddp.test_plot_layout import outside


def _busbw_figure():
    world = analyse(CalibrateSettings(world_sizes=(2,), sequence_count=8, contention=False,
                                      progress=False), 2, _ranks())
    assert set(world.kinds) == {"reduce_scatter", "all_gather"}
    return figures([world], wire_gbps=0.25)["allreduce_busbw.png"]


def test_each_kind_has_its_own_colour():
    ax = _busbw_figure().axes[0]
    colour = {line.get_label(): to_hex(line.get_color()) for line in ax.get_lines()}
    measured = {name: colour[f"{name} measured"]
                for name in ("all-reduce", "reduce-scatter", "all-gather")}
    assert len(set(measured.values())) == 3, measured
    for name, c in measured.items():   # its link-file line in the same colour
        (fit,) = [label for label in colour if label.startswith(f"{name} link file")]
        assert colour[fit] == c


def test_legend_inside_the_axes_and_units_on_both():
    fig = _busbw_figure()
    ax = fig.axes[0]
    FigureCanvasAgg(fig).draw()
    legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert box.x0 <= legend.x0 and legend.x1 <= box.x1
    assert box.y0 <= legend.y0 and legend.y1 <= box.y1
    assert outside(fig) == []
    assert "(bytes" in ax.get_xlabel() and "(GB/s" in ax.get_ylabel()
