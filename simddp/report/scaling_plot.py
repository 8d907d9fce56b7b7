"""The scaling picture: efficiency and per-GPU throughput against GPUs, a line per strategy.

Two panels side by side over the same log2 axis of GPU counts, each count labelled: the
scaling efficiency (per-GPU throughput over the strategy's own at the smallest count, %) and
the tokens (or samples) per second per GPU. A strategy has its colour on every plot
(simddp/planning/registry.py)::

    png = scale_png(answer)          # bytes, written atomically by the caller
"""
from __future__ import annotations

import io
import textwrap

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from simddp.predict.scaling import ScaleAnswer
from simddp.report.scaling_text import unit_of
from simddp.report.style import STRATEGY_COLOURS

MARKERS = ("o", "s", "^", "D", "v")


def scale_figure(a: ScaleAnswer) -> Figure:
    s = a.setup
    # fixed margins: a constrained layout took half the drawing time, and nothing here varies
    # in size but the title, wrapped to at most two lines
    fig = Figure(figsize=(11, 4.8))
    FigureCanvasAgg(fig)
    eff, rate = fig.subplots(1, 2)
    counts = sorted({r.gpus for r in a.rows})
    for i, name in enumerate(dict.fromkeys(r.strategy for r in a.rows)):
        rows = [r for r in a.rows if r.strategy == name]
        colour = STRATEGY_COLOURS.get(name, "#333333")
        x = [r.gpus for r in rows]
        # a marker each, so a strategy drawn on another (fsdp and hsdp in one node) shows
        style = dict(color=colour, label=name, marker=MARKERS[i % len(MARKERS)],
                     markersize=7 - 1.5 * (i % 3), lw=1.6)
        eff.plot(x, [100 * r.efficiency for r in rows], **style)
        rate.plot(x, [r.samples_per_s_per_gpu if r.tokens_per_s_per_gpu is None
                      else r.tokens_per_s_per_gpu for r in rows], **style)
    top = max(100 * r.efficiency for r in a.rows)
    eff.set_ylim(0, max(105, top * 1.05))
    eff.axhline(100, color="#999999", lw=0.8, ls=":")
    eff.set_ylabel(f"scaling efficiency (%), per GPU vs {counts[0]} GPUs")
    eff.set_title("scaling efficiency", fontsize=10)
    rate.set_ylim(0, 1.12 * max(r.samples_per_s_per_gpu if r.tokens_per_s_per_gpu is None
                                else r.tokens_per_s_per_gpu for r in a.rows))
    rate.set_ylabel(f"{unit_of(s)}/s per GPU")
    rate.set_title(f"{unit_of(s)} per second per GPU", fontsize=10)
    rate.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    for ax in (eff, rate):
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(n) for n in counts])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"GPUs ({s.gpus_per_node} a node)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, frameon=True, framealpha=0.9, loc="lower left")
    mode = "weak scaling" if s.weak else f"strong scaling, global batch {s.global_batch}"
    per = f"micro-batch {s.micro_batch}" + ("" if s.seq is None else f" × {s.seq}")
    title = (f"{s.model.split('@')[0]} on {s.device or 'its profile'}, {per}, {mode}; "
             f"{s.intra_link} in a node, {s.inter_link} between nodes")
    fig.suptitle(textwrap.shorten(title, 2 * 130, placeholder=" …") if len(title) > 260
                 else textwrap.fill(title, 130), fontsize=10)
    fig.subplots_adjust(left=0.065, right=0.985, bottom=0.11, top=0.84, wspace=0.2)
    return fig


def scale_png(a: ScaleAnswer, dpi: int = 120) -> bytes:
    buf = io.BytesIO()
    scale_figure(a).savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
