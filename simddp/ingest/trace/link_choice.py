"""Which link a multi-rank trace gives: the one fitted to it where its sizes pin α and busbw
down within physical bounds, else an honest "cannot fit" and the link the user named (or a
preset), with busbw from the trace's own time where that stays within bounds.

    choice = choose_link(replay_steps, samples, world_size=8, device="cuda")
    choice.fit            # the LinkFit the import uses (α, busbw, comm slowdown, residuals)
    choice.line           # the least-squares line and its standard errors (bounds.line_fit)
    choice.cannot_fit     # None, or "cannot fit a link from 3 all-reduces per step in ..."
    choice.fallback       # None, or the link file used instead ("--link X" / "preset X")

The replay fit (simddp.ingest.trace.fit) reproduces when each all-reduce ended; a step it
replays well can still hold an α or a busbw no library achieves. So before its α and busbw
are kept, the line through each all-reduce's time on the communication lane must pin them
down (simddp.ingest.trace.bounds.unpinned) and both the line and the replay must keep the
bounds (bounds.out_of_bounds). Otherwise the trace still says how long its all-reduces took
at their sizes: α is taken from the fallback link and busbw fitted to that time; where even
that breaks a bound, the fallback's busbw is kept too.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from simddp.cost import bytes_s
from simddp.cost.factors import ALL_REDUCE

from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.ingest.trace.bounds import (LineFit, busbw_max_gbps, contention_caps, line_fit,
                                        out_of_bounds, unpinned)
from simddp.ingest.trace.fit import (BUSBW_RANGE_GBPS, LinkFit, ReplayStep, fit_link,
                                     replay_residuals)

# The preset a trace's link falls back to when it cannot be fitted and no --link was given:
# the one backend-alike preset for Gloo, simddp's default link for NCCL.
CPU_FALLBACK, GPU_FALLBACK = "eth-10g", "eth-100g"


@dataclass(frozen=True)
class LinkChoice:
    fit: LinkFit                   # what the import uses
    line: LineFit                  # the line through single all-reduces, with its errors
    per_step: int                  # gradient all-reduces per step
    cannot_fit: str | None = None  # why the trace's sizes or bounds do not give a link
    fallback: str | None = None    # "--link NAME" or "preset NAME", where one was used
    notes: tuple[str, ...] = field(default_factory=tuple)


def choose_link(steps: list[ReplayStep], sizes: list[int], service_s: list[float],
                world_size: int, device: str, per_step: int, alpha_s: float | None = None,
                fallback: LinkFile | None = None) -> LinkChoice:
    """The link of a multi-rank trace (module text). ``sizes``/``service_s``: every traced
    gradient all-reduce's bytes and its time on the lane; ``alpha_s``: α given (--alpha-us);
    ``fallback``: --link, used only where the trace cannot give the link."""
    comm_cap = contention_caps(device)[1]
    line = line_fit(sizes, service_s, world_size)
    notes: list[str] = []
    if alpha_s is not None:   # α given: only busbw and the slowdown are the trace's
        fit = fit_link(steps, world_size, alpha_s, max_slowdown=comm_cap)
        fit, said = _bounded_busbw(fit, steps, world_size, None, device)
        return LinkChoice(fit, line, per_step, None, None, tuple(notes + said))
    why = unpinned(line) or out_of_bounds(line.alpha_s, line.busbw_gbps, device)
    if why is None:
        fit = fit_link(steps, world_size, max_slowdown=comm_cap)
        why = out_of_bounds(fit.alpha_s, fit.busbw_gbps, device)
        if why is not None:
            why = f"the replay's {why}"
        else:
            return LinkChoice(fit, line, per_step)
    cannot = (f"cannot fit a link from {per_step} all-reduce{'s' if per_step != 1 else ''} "
              f"per step in {line.size_text()}: {why}")
    given = fallback is not None
    if fallback is None:
        from simddp.presets.links import get_link
        fallback = as_link_file(get_link(CPU_FALLBACK if device == "cpu" else GPU_FALLBACK))
    name = f"--link {fallback.link.name}" if given else f"preset {fallback.link.name}"
    # What the trace still says is how long its all-reduces took at their sizes: that time
    # gives the term that dominates there under the fallback's law, the fallback the other.
    # A comm slowdown beside compute would be as unknown (it trades with α): none is fitted.
    f_alpha, f_busbw = fallback.link.alpha_s, fallback.link.busbw_gbps
    size = sorted(sizes)[len(sizes) // 2]
    if f_alpha >= bytes_s(ALL_REDUCE, size, world_size, f_busbw):
        fit = fit_link(steps, world_size, max_slowdown=1.0, busbw_gbps=f_busbw)
        fit, said = replace(fit, slowdown_measured=False), []
        why = out_of_bounds(fit.alpha_s, None, device)
        if why is not None:
            fit = replace(fit, alpha_s=f_alpha, residuals=replay_residuals(
                steps, world_size, f_alpha, f_busbw, 1.0))
            said = [f"α from the traced time breaks a bound ({why}); {name}'s α kept"]
        else:
            notes.append(f"busbw {f_busbw:.3g} GB/s from {name}; α {fit.alpha_s * 1e6:.0f} µs "
                         f"from the traced all-reduces' time at that busbw (α dominates there)")
    else:
        fit = replace(fit_link(steps, world_size, f_alpha, max_slowdown=1.0),
                      slowdown_measured=False)
        fit, said = _bounded_busbw(fit, steps, world_size, fallback, device)
        if not said:
            notes.append(f"α {f_alpha * 1e6:.0f} µs from {name}; busbw {fit.busbw_gbps:.3g} "
                         "GB/s from the traced all-reduces' time at that α (the bytes dominate "
                         "there)")
    return LinkChoice(fit, line, per_step, cannot, name, tuple(notes + said))


def _bounded_busbw(fit: LinkFit, steps: list[ReplayStep], world_size: int,
                   fallback: LinkFile | None, device: str) -> tuple[LinkFit, list[str]]:
    """``fit`` with a busbw within bounds: the fallback's (or the bound) where the trace's
    time gives more than any link achieves, or hit the fit's search limit."""
    bmax = busbw_max_gbps()
    if fit.busbw_gbps <= bmax and fit.busbw_gbps < 0.999 * BUSBW_RANGE_GBPS[1]:
        return fit, []
    keep = fallback.link.busbw_gbps if fallback is not None else bmax
    what = (f"{fallback.link.name}'s {keep:.3g} GB/s kept" if fallback is not None
            else f"held at {keep:.0f} GB/s")
    said = (f"busbw from the traced time is {fit.busbw_gbps:.4g} GB/s, above any link "
            f"({out_of_bounds(0.0, fit.busbw_gbps, device) or 'the search limit'}); {what}")
    return replace(fit, busbw_gbps=keep, residuals=replay_residuals(
        steps, world_size, fit.alpha_s, keep, fit.comm_slowdown)), [said]
