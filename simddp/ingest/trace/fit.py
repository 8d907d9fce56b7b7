"""The two small fits of a trace import: the link's α–β law with its contention, and how
much slower compute runs while a collective is in flight.

    fit = fit_link(steps, world_size=2)       # ReplayStep: ready, bytes, end, backward
    fit.alpha_s, fit.busbw_gbps, fit.comm_slowdown
    slow = fit_compute_slowdown(groups)       # {signature: [(seconds, share of comm), ...]}

**Link**: the engine serves all-reduces one at a time: each starts when ready and the
previous one is done, and takes ``α + b·n/busbw`` seconds of work (b = 2(p−1)/p, the
ring's bytes per byte), done ``comm_slowdown`` times slower while compute runs beside it.
:func:`fit_link` replays every traced step's all-reduces that way — their ready times, sizes
and the ranks' backward as traced — and picks the α, busbw and slowdown whose replayed end
times are closest to the traced ones: least absolute deviations in seconds, a median-like
fit, since a loaded host stalls some steps' all-reduces far beyond any typical step.
Fitting ends rather than single durations keeps Gloo's two worker threads honest: when two
all-reduces run at once, which one the lane "served" first is arbitrary, when they end is
not. The search is a coarse grid whose five best points each seed a search that zooms in
eight times (numpy; simddp may not import calibrate's scipy fit). What the trace cannot
tell is not guessed: with all sizes within 1.5× of each other α and busbw are not
separable, so α = 0 and every second is bandwidth, unless α is given (``alpha_s``, the CLI's
``--alpha-us``: calibrate's α of the same cluster), when only busbw and the slowdown are
fitted; with no all-reduce both beside the backward and after it, the slowdown is not
measured and is 1.

**Compute**: backward segments that ran the same autograd nodes on gradients of the same
shapes do the same work, so where such segments ran sometimes with the communication lane
busy (share f) and sometimes not, ``seconds = base·(1 + (c−1)·f)`` gives the slowdown c
(:func:`fit_compute_slowdown`). Transformers repeat their blocks, so a trace of one has
such pairs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simddp.cost import bytes_s
from simddp.cost.factors import ALL_REDUCE, GB, bus_factor

SIZE_CONTRAST = 1.5      # max/min bytes needed to tell α from bandwidth
SHARE_CONTRAST = 0.5     # max − min share of overlap needed to tell a slowdown
BUSBW_RANGE_GBPS = (1e-3, 1e4)   # from a slow WAN to beyond NVLink
MAX_SLOWDOWN = 6.0
_REFINE = 8
_SEEDS = 5
_POINTS = (11, 21, 31)   # slowdown, α, log10 busbw


@dataclass(frozen=True)
class ReplayStep:
    """One traced step's gradient all-reduces, in seconds on one clock: ``ready`` (issued on
    every rank), ``nbytes``, ``end`` (as traced), and the ranks' backward ``busy`` span."""

    ready_s: tuple[float, ...]
    nbytes: tuple[int, ...]
    end_s: tuple[float, ...]
    busy: tuple[float, float]


@dataclass(frozen=True)
class LinkFit:
    alpha_s: float
    busbw_gbps: float
    comm_slowdown: float
    sizes_separable: bool     # α and busbw told apart (sizes varied enough)
    slowdown_measured: bool   # all-reduces both beside the backward and after it
    residuals: tuple[float, ...]   # per step: (replayed − traced) end of its last all-reduce,
                                   # over the traced time from first ready to that end
    alpha_given: bool = False      # α as given (--alpha-us), not fitted

    @property
    def median_abs_error(self) -> float:
        return float(np.median(np.abs(self.residuals))) if self.residuals else 0.0


def fit_link(steps: list[ReplayStep], world_size: int, alpha_s: float | None = None,
             max_slowdown: float = MAX_SLOWDOWN, busbw_gbps: float | None = None) -> LinkFit:
    """α, busbw and comm_slowdown whose replay of ``steps`` ends closest to the trace;
    ``alpha_s``: α as given (only busbw and the slowdown are fitted); ``busbw_gbps``: busbw
    as given (only α and the slowdown); ``max_slowdown``: the largest comm slowdown searched
    (simddp.ingest.trace.bounds.contention_caps)."""
    sizes = np.concatenate([np.asarray(s.nbytes, dtype=float) for s in steps])
    separable = bool(sizes.max() >= SIZE_CONTRAST * sizes.min())
    shares = np.concatenate([_beside(s) for s in steps])
    measured = bool(shares.max() - shares.min() >= SHARE_CONTRAST)
    factor = bus_factor(world_size) / GB     # seconds per byte at 1 GB/s of busbw
    span = float(np.median([s.end_s[-1] - s.ready_s[0] for s in steps]))
    # Axes: slowdown, α, log10(busbw). The coarse grid's best few points each seed a
    # search that zooms to ±2 grid steps around its best point, eight times.
    lo = np.array([1.0, 0.0, np.log10(BUSBW_RANGE_GBPS[0])])
    hi = np.array([max_slowdown if measured else 1.0, span if separable else 0.0,
                   np.log10(BUSBW_RANGE_GBPS[1])])
    if alpha_s is not None:
        lo[1] = hi[1] = alpha_s
    if busbw_gbps is not None:
        lo[1], hi[1] = 0.0, span     # α then takes what the bytes do not
        lo[2] = hi[2] = np.log10(busbw_gbps)
    loss, grid = _grid(steps, factor, lo, hi)
    order = np.argsort(loss, axis=None)[:_SEEDS]
    seeds = [tuple(g[i] for g in grid) for i in (np.unravel_index(k, loss.shape) for k in order)]
    best = min((_zoom(steps, factor, lo, hi, seed) for seed in seeds), key=lambda x: x[0])[1]
    s_best, alpha_best, bw_best = (float(x) for x in best)
    busbw = min(10.0 ** bw_best, BUSBW_RANGE_GBPS[1])
    return LinkFit(alpha_best, busbw, round(s_best, 3), separable, measured,
                   replay_residuals(steps, world_size, alpha_best, busbw, s_best),
                   alpha_given=alpha_s is not None)


def replay_residuals(steps: list[ReplayStep], world_size: int, alpha_s: float,
                     busbw_gbps: float, slowdown: float) -> tuple[float, ...]:
    """Per step: (replayed − traced) end of its last all-reduce on this law, over the traced
    time from its first ready to that end."""
    beta = bytes_s(ALL_REDUCE, 1.0, world_size, busbw_gbps)   # seconds per byte
    resid = []
    for st in steps:
        end = _replay(st, np.array([[[slowdown]]]), np.array([[[alpha_s]]]),
                      np.array([[[beta]]]))[-1].item()
        resid.append((end - st.end_s[-1]) / max(st.end_s[-1] - st.ready_s[0], 1e-9))
    return tuple(resid)


def _grid(steps: list[ReplayStep], factor: float, lo: np.ndarray, hi: np.ndarray):
    """Summed |replayed − traced end| on a grid over (slowdown, α, log10 busbw)."""
    axes = [np.linspace(a, b, n) if b > a else np.array([a]) for a, b, n in zip(lo, hi, _POINTS)]
    grid = np.meshgrid(*axes, indexing="ij")
    s, alpha, log_bw = grid
    beta = factor / 10.0 ** log_bw
    loss = sum(np.sum(np.abs(_replay(st, s, alpha, beta)
                             - np.asarray(st.end_s)[:, None, None, None]), axis=0)
               for st in steps)
    return loss, grid


def _zoom(steps: list[ReplayStep], factor: float, lo: np.ndarray, hi: np.ndarray, seed):
    """(loss, point): the grid around ``seed`` zoomed to ±2 steps of its best point."""
    limit_lo, limit_hi = lo.copy(), hi.copy()
    width = np.array([(b - a) / (n - 1) if n > 1 else 0.0 for a, b, n in zip(lo, hi, _POINTS)])
    best, value = np.array(seed, dtype=float), float("inf")
    for _ in range(_REFINE):
        lo = np.maximum(limit_lo, best - 2 * width)
        hi = np.minimum(limit_hi, best + 2 * width)
        loss, grid = _grid(steps, factor, lo, hi)
        i = np.unravel_index(np.argmin(loss), loss.shape)
        best, value = np.array([g[i] for g in grid]), float(loss[i])
        width = np.array([(b - a) / (n - 1) if n > 1 else 0.0 for a, b, n in zip(lo, hi, _POINTS)])
    return value, best


def _replay(step: ReplayStep, s, alpha, beta) -> np.ndarray:
    """End of each all-reduce of ``step`` on the engine's lane, for every grid point:
    full speed before and after the backward span, 1/s of it during the span."""
    b0, b1 = step.busy
    prev = np.full(np.broadcast(s, alpha, beta).shape, -np.inf)
    ends = []
    for ready, n in zip(step.ready_s, step.nbytes):
        t = np.maximum(ready, prev)
        work = alpha + beta * n
        d = np.clip(b0 - t, 0.0, None)
        d = np.minimum(work, d)                    # before the backward: full speed
        t, work = t + d, work - d
        slow = np.minimum(work, np.clip(b1 - t, 0.0, None) / s)   # beside it: 1/s
        t, work = t + slow * s, work - slow
        prev = t + work                            # after it: full speed
        ends.append(prev)
    return np.stack(ends)


def _beside(step: ReplayStep) -> np.ndarray:
    """Share of each all-reduce's traced time (ready to end) within the backward span."""
    ready, end = np.asarray(step.ready_s), np.asarray(step.end_s)
    b0, b1 = step.busy
    inside = np.clip(np.minimum(end, b1) - np.maximum(ready, b0), 0.0, None)
    return inside / np.maximum(end - ready, 1e-9)


@dataclass(frozen=True)
class ComputeFit:
    slowdown: float
    measured: bool            # some repeated work ran both with and without comm beside it
    groups_used: int
    implied: float | None = None   # before the cap, where the cap bound it


def fit_compute_slowdown(groups: dict, cap: float = 4.0) -> ComputeFit:
    """``groups``: {key: [(seconds, share of time with the comm lane busy), ...]}, one key
    per kind of segment (same autograd nodes, same gradients).

    In a group with at least two segments run mostly alone (share ≤ 0.25) and two mostly
    beside a busy lane (share ≥ 0.75), ``median(beside) / median(alone) = 1 + (c−1)·Δshare``
    gives one estimate of c. Medians, because a loaded host stalls a segment now and then
    by far more than any slowdown. The estimates are combined by their median weighted by
    the group's seconds, capped at ``cap`` (simddp.ingest.trace.bounds.contention_caps);
    c = 1 when no group has both kinds (not measured)."""
    estimates = []
    for obs in groups.values():
        alone = [(d, f) for d, f in obs if f <= 0.25 and d > 0]
        beside = [(d, f) for d, f in obs if f >= 0.75 and d > 0]
        if len(alone) < 2 or len(beside) < 2:
            continue
        base = float(np.median([d for d, _ in alone]))
        ratio = float(np.median([d for d, _ in beside])) / base
        spread = np.mean([f for _, f in beside]) - np.mean([f for _, f in alone])
        c = float(max(1.0, 1.0 + (ratio - 1.0) / spread))
        estimates.append((c, base * len(obs)))
    if not estimates:
        return ComputeFit(1.0, False, 0)
    estimates.sort()
    half, acc = sum(w for _, w in estimates) / 2, 0.0
    chosen = estimates[-1][0]
    for c, w in estimates:
        acc += w
        if acc >= half:
            chosen = c
            break
    implied = round(chosen, 2)
    return ComputeFit(min(implied, cap), True, len(estimates),
                      implied if implied > cap else None)
