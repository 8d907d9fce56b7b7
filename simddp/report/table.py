"""Terminal output: plain-text tables and number formats.

Tables are plain text (no colour, no box drawing) so they read the same in a terminal, a CI
log and a pasted issue — the nccl-tests habit of columns users can ``grep`` and ``awk``::

    >>> print(render_table(["strategy", "step ms"], [["naive", "113.10"], ["ddp", "73.08"]]))
    strategy  step ms
    --------  -------
    naive      113.10
    ddp         73.08

Numbers are right-aligned, text left-aligned (a cell is "a number" if it parses as one after
stripping a trailing ``×``, ``%`` or unit).
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.inputs.profile import ModelProfile

MIB = 2**20
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*(×|%|ms|s|MB|MiB)?"
                     r"( \([\d.]+–[\d.]+\))?$")  # optional range: "73.40 (70.10–78.00)"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
                 title: str | None = None) -> str:
    """Columns padded to their widest cell; numeric columns right-aligned."""
    cols = len(headers)
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(headers[i])] + [len(r[i]) for r in cells]) for i in range(cols)]
    numeric = [bool(cells) and all(_NUMBER.match(r[i]) or r[i] in ("-", "") for r in cells)
               for i in range(cols)]

    def line(row: Sequence[str]) -> str:
        parts = [row[i].rjust(widths[i]) if numeric[i] else row[i].ljust(widths[i])
                 for i in range(cols)]
        return "  ".join(parts).rstrip()

    out = [title] if title else []
    out += [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def fmt_ms(seconds: float | None, digits: int = 2) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.{digits}f}"


def fmt_range(range_s: tuple[float, float] | None, digits: int = 2) -> str:
    """A prediction range in ms, "70.10–78.00"; "-" for none."""
    return "-" if range_s is None else \
        f"{fmt_ms(range_s[0], digits)}–{fmt_ms(range_s[1], digits)}"


def fmt_mb(bucket_mb: float | None) -> str:
    """A bucket size as the user typed it: 25, 2.5, 1000; '-' for strategies without buckets.
    Sizes come back from whole bytes, so print the shortest decimal within 1.5 bytes of it.

        >>> fmt_mb(104857 / 2**20), fmt_mb(0.099999), fmt_mb(25.0), fmt_mb(0.25), fmt_mb(None)
        ('0.1', '0.1', '25', '0.25', '-')
    """
    if bucket_mb is None:
        return "-"
    for digits in range(7):
        typed = round(bucket_mb, digits)
        if typed > 0 and abs(typed - bucket_mb) * MIB < 1.5:
            return f"{typed:g}"
    return f"{bucket_mb:.6g}"


def fmt_speedup(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}×"


def fmt_sig(x: float) -> str:
    """Three significant digits, whole numbers from 100 up.

        >>> fmt_sig(0.838879), fmt_sig(11.0), fmt_sig(40.0), fmt_sig(1806.4), fmt_sig(0.0)
        ('0.839', '11', '40', '1806', '0')
    """
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


# Where a prediction's contention came from, as the header says it (simddp/predict/resolve.py).
CONTENTION_FROM = {"link": "measured by calibrate, in the link file",
                   "model": "measured with this model, in its profile",
                   "published": "published GPU figures, not measured: arXiv 2507.03114",
                   "given": "given with --contention", "": "none measured or assumed"}


def contention_line(contention) -> str:
    """The header's line: the contention every row runs under, where it came from, and the
    switch that changes it.

        >>> from simddp.inputs.contention import Contention
        >>> contention_line(Contention())
        'contention: none (none measured or assumed; --contention to change)'
    """
    what = (f"compute x{round(contention.compute, 3):g}, collectives "
            f"x{round(contention.comm, 3):g} while both run" if contention.active else "none")
    return f"contention: {what} ({CONTENTION_FROM[contention.source]}; --contention to change)"


def setup_line(profile: ModelProfile, link: Link | LinkFile, world_size: int) -> str:
    """One line naming everything a prediction depends on (a link file's Gloo host effects
    included)."""
    found = as_link_file(link)
    link, host = found.link, found.host
    link_law = (f"α {fmt_sig(link.alpha_s * 1e6)} µs, busbw {fmt_sig(link.busbw_gbps)} GB/s"
                if not link.pieces
                else f"piecewise α–β fit ({len(link.pieces)} pieces)")
    if host is not None and host.burst_bytes is not None:
        link_law += f", shaped with a {host.burst_bytes / 1e3:.0f} kB token bucket"
    if host is not None and host.idle_wake_s:
        link_law += f", {fmt_sig(host.idle_wake_s * 1e3)} ms wake after compute"
    return (f"model {profile.name}: {profile.n_tensors} gradient tensors, "
            f"{profile.grad_total_bytes / MIB:.1f} MiB of gradients, forward "
            f"{fmt_ms(profile.forward_s, 1)} ms, backward {fmt_ms(profile.backward_s, 1)} ms, "
            f"optimizer {fmt_ms(profile.optimizer_s, 1)} ms | link {link.name}: {link_law}, "
            f"{world_size} ranks")


def host_line(host) -> str:
    """What a :class:`simddp.inputs.host.Host` charges, on one line ("free" for none)::

        realrun: copies 6.71 GB/s, hooks 88 µs per gradient + 109 µs per launch; torch: ...
    """
    if host is None or host.free:
        return "free (not charged)"
    parts = [] if host.contention is None else [
        f"contention measured with this model: compute x{host.contention[0]:.2f}, all-reduce "
        f"x{host.contention[1]:.2f} (instead of the link's)"]
    if parts and host.contention_spread is not None:
        (c0, m0), (c1, m1) = host.contention_spread
        parts[0] += f", p10–p90 x{c0:.2f}–x{c1:.2f} and x{m0:.2f}–x{m1:.2f}"
    if host.compute_after_comm not in (None, 1.0):
        parts.append(f"compute x{host.compute_after_comm:.2f} in steps that communicate "
                     "(forward, backward, optimizer; measured after the model's all-reduces)")
    for impl, c in host.implementations.items():
        copies = "free" if c.copy_gbps is None else f"{c.copy_gbps:.2f} GB/s"
        parts.append(f"{impl}: copies {copies}, hooks {c.hook_s * 1e6:.0f} µs per gradient"
                     + (f" + {c.launch_s * 1e6:.0f} µs per launch" if c.launch_s else "")
                     + (f" ({c.hook_after_backward_s * 1e6:.0f} µs launched after the "
                        "backward)" if c.hook_after_backward_s is not None else "")
                     + (f", {c.gather_s * 1e6:.0f} µs per all-gather and "
                        f"{c.scatter_s * 1e6:.0f} µs per reduce-scatter"
                        if c.gather_s or c.scatter_s else "")
                     + (", collectives block compute" if c.blocking_collectives else ""))
    return "; ".join(parts)
