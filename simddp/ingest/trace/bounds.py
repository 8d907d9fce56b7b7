"""What a link fitted to a trace may say: whether the sizes pin α and busbw down, and the
physical bounds any collective library stays within.

    line = line_fit(sizes_bytes, seconds, world_size)     # α, busbw and their standard errors
    why = unpinned(line)                                 # None, or why the sizes cannot tell
    bad = out_of_bounds(alpha_s, busbw_gbps, device)      # None, or the bound it breaks

A re-simulated step that matches the trace is no evidence the link is right: a line through
a few all-reduces of like sizes can put α anywhere and still replay the step. So the fit must
earn its two numbers: at least :data:`MIN_SIZES` distinct sizes spanning :data:`MIN_SPAN`×,
a bandwidth term known to :data:`MAX_REL_SE` (one standard error of an ordinary least-squares
line through each all-reduce's time on the lane), α known to :data:`MAX_ALPHA_SE_S`; and it
must stay within what collective libraries achieve:

- **α ≤ 1 ms** (:data:`ALPHA_MAX_S`). NCCL's own cost model (NVIDIA/nccl
  src/graph/tuning.cc) charges a base latency of 6.6–17 µs per call plus 0.5–3.4 µs per ring
  step over NVLink or PCIe and 2.7–9.6 µs per step over the network: tens of µs at 8 ranks,
  a few hundred at 16 nodes on the ring's slowest protocol. A Gloo trace on a CPU host may go
  to :data:`CPU_ALPHA_MAX_S`: there a waited-for call costs 0.4–2.4 ms and now and then one
  4 ms scheduler tick more (docs/FINDINGS.md#blocking-alpha); the summary says so.
- **busbw ≤ 1.5 × the fastest preset link** (:func:`busbw_max_gbps`; simddp/presets/links.py,
  each preset citing its published figure).
- **Contention** (:func:`contention_caps`): on a GPU, 1.5 × the highest published figures,
  compute ×1.40 (arXiv 2507.03114) and comm ×2.22 (derived from arXiv 2412.14335;
  simddp/inputs/contention.py); on a CPU host, whose cores Gloo's threads and compute share,
  the fit's own caps (compute ×4, comm ×6).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simddp.cost import GB
from simddp.cost.factors import kind_factor
from simddp.inputs.contention import GPU_COMM_MEAN, GPU_COMPUTE_MAX
from simddp.planning.strategy import MB

ALPHA_MAX_S = 1e-3
CPU_ALPHA_MAX_S = 5e-3
MARGIN = 1.5                 # how far past the fastest published figure a fit may go
MIN_SIZES = 3                # distinct sizes: two give a line with no residual to judge it by
MIN_SPAN = 2.0               # max / min size
MAX_REL_SE = 0.25            # one standard error of the bandwidth term, relative
MAX_ALPHA_SE_S = 250e-6      # one standard error of α
CPU_CAPS = (4.0, 6.0)        # (compute, comm): the fit's own search limits on a CPU host
GPU_CAPS = (round(MARGIN * GPU_COMPUTE_MAX, 2), round(MARGIN * GPU_COMM_MEAN, 2))


def busbw_max_gbps() -> float:
    """1.5 × the fastest preset link's busbw (GB/s), and that preset's name."""
    return MARGIN * _fastest()[1]


def _fastest() -> tuple[str, float]:
    from simddp.presets.links import LINKS
    name = max(LINKS, key=lambda n: LINKS[n].busbw_gbps)
    return name, LINKS[name].busbw_gbps


def alpha_max_s(device: str) -> float:
    """The largest α a link fitted to a trace of ``device`` ("cpu" or "cuda") may hold."""
    return CPU_ALPHA_MAX_S if device == "cpu" else ALPHA_MAX_S


def contention_caps(device: str) -> tuple[float, float]:
    """(compute, comm) slowdowns a trace of ``device`` may imply (the module text)."""
    return CPU_CAPS if device == "cpu" else GPU_CAPS


@dataclass(frozen=True)
class LineFit:
    """An ordinary least-squares line ``time = α + f·n/busbw`` through single collectives,
    with its standard errors: what the sizes can tell."""

    alpha_s: float
    busbw_gbps: float | None     # None: the time does not grow with the size
    alpha_se_s: float
    beta_rel_se: float           # SE of the bandwidth term over the term (inf: not measured)
    residual: float              # median |residual| over the median time
    count: int                   # collectives
    sizes: int                   # distinct sizes
    min_bytes: int
    max_bytes: int

    @property
    def span(self) -> float:
        return self.max_bytes / self.min_bytes if self.min_bytes else float("inf")

    def size_text(self) -> str:
        """'1–173 MiB' (or one size: '4 MiB')."""
        lo, hi = self.min_bytes / MB, self.max_bytes / MB
        return f"{lo:.3g} MiB" if lo == hi else f"{lo:.3g}–{hi:.3g} MiB"


def line_fit(nbytes, seconds, world_size: int, kind: str = "all_reduce") -> LineFit:
    """The least-squares line through (bytes, seconds) of single collectives of ``kind``."""
    n = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    x = kind_factor(kind, world_size) * n / GB      # seconds per (1/busbw in GB/s)
    distinct = len(set(n.tolist()))
    lo, hi = int(n.min()), int(n.max())
    if distinct < 2 or len(n) < 3:
        return LineFit(float(np.median(t)), None, float("inf"), float("inf"),
                       _residual(t, np.full_like(t, np.median(t))), len(n), distinct, lo, hi)
    design = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(design, t, rcond=None)
    fitted = design @ coef
    dof = max(1, len(t) - 2)
    sigma2 = float(np.sum((t - fitted) ** 2)) / dof
    cov = sigma2 * np.linalg.pinv(design.T @ design)
    alpha, beta = float(coef[0]), float(coef[1])
    se_alpha, se_beta = float(np.sqrt(max(cov[0, 0], 0.0))), float(np.sqrt(max(cov[1, 1], 0.0)))
    busbw = 1.0 / beta if beta > 0 else None
    rel = se_beta / beta if beta > 0 else float("inf")
    return LineFit(alpha, busbw, se_alpha, rel, _residual(t, fitted), len(n), distinct, lo, hi)


def _residual(t: np.ndarray, fitted: np.ndarray) -> float:
    med = float(np.median(t))
    return float(np.median(np.abs(t - fitted))) / med if med > 0 else 0.0


def unpinned(line: LineFit) -> str | None:
    """Why the sizes cannot pin α and busbw down (None: they can)."""
    if line.sizes < MIN_SIZES:
        return f"{line.sizes} distinct size{'s' if line.sizes != 1 else ''}, {MIN_SIZES} needed"
    if line.span < MIN_SPAN:
        return f"the sizes span {line.span:.2g}×, {MIN_SPAN:g}× needed"
    if line.busbw_gbps is None:
        return "their time does not grow with their size"
    if line.beta_rel_se > MAX_REL_SE:
        return (f"the bandwidth term is known to ±{line.beta_rel_se * 100:.0f} % (one standard "
                f"error; ±{MAX_REL_SE * 100:.0f} % needed)")
    if line.alpha_se_s > MAX_ALPHA_SE_S:
        return (f"α is known to ±{line.alpha_se_s * 1e6:.0f} µs (one standard error; "
                f"±{MAX_ALPHA_SE_S * 1e6:.0f} µs needed)")
    return None


def out_of_bounds(alpha_s: float, busbw_gbps: float | None, device: str) -> str | None:
    """The physical bound a link breaks (None: it keeps them all)."""
    amax = alpha_max_s(device)
    if alpha_s > amax:
        return (f"α {alpha_s * 1e6:.0f} µs is above {amax * 1e3:g} ms ("
                + ("NCCL's cost model, src/graph/tuning.cc: tens of µs per call)"
                   if device != "cpu" else "Gloo on a CPU host, docs/FINDINGS.md#blocking-alpha)"))
    bmax = busbw_max_gbps()
    if busbw_gbps is not None and busbw_gbps > bmax:
        name, bw = _fastest()
        return (f"busbw {busbw_gbps:.4g} GB/s is above {bmax:.0f} GB/s ({MARGIN:g} × {name}'s "
                f"{bw:.0f} GB/s, the fastest preset link)")
    return None


def above_nccl_alpha(alpha_s: float, device: str) -> str | None:
    """Why a CPU trace's α above NCCL's 1 ms bound is kept (None: it is not above it)."""
    if device != "cpu" or alpha_s <= ALPHA_MAX_S:
        return None
    return (f"α {alpha_s * 1e6:.0f} µs is above NCCL's {ALPHA_MAX_S * 1e3:g} ms, kept: Gloo on "
            "a CPU host, where a waited-for call costs 0.4–2.4 ms and now and then one 4 ms "
            "scheduler tick more (docs/FINDINGS.md#blocking-alpha)")


def clamp_contention(compute: float, comm: float, device: str
                     ) -> tuple[float, float, str | None]:
    """(compute, comm) within :func:`contention_caps`, and why they were clamped (or None)."""
    caps = contention_caps(device)
    where = "a GPU: 1.5 × the published highs" if device != "cpu" else "a CPU host: the fit's caps"
    said = []
    out = []
    for name, value, cap in (("compute", compute, caps[0]), ("comm", comm, caps[1])):
        if value > cap:
            said.append(f"{name} ×{value:.2f} implied, clamped to ×{cap:g}")
        out.append(min(value, cap))
    if not said:
        return compute, comm, None
    return out[0], out[1], f"{'; '.join(said)} ({where}, simddp/ingest/trace/bounds.py)"
