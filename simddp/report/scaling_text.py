"""A scaling answer as a person reads it: the setup, one table (a row per strategy and GPU
count), and where each strategy ends up at the largest count.

Everything renders a :class:`simddp.predict.scaling.ScaleAnswer`, as its ``to_json`` renders
it as data: the two cannot disagree.
"""
from __future__ import annotations

from simddp.predict.scaling import ScaleAnswer, ScaleRow, ScaleSetup
from simddp.report.table import contention_line, fmt_sig, render_table


def scale_text(a: ScaleAnswer) -> str:
    """What ``simddp scale`` prints."""
    s = a.setup
    lines = [setup_line(s), cluster_line(s), contention_line(s.contention)]
    lines += [f"{name}: {note}" for name, note in s.strategies.items()]
    lines += ["", render_table(
        ["strategy", "GPUs", "nodes", "accum", "step ms", f"{unit_of(s)}/s/GPU",
         "efficiency", "exposed comm ms"], [_cells(r) for r in a.rows])]
    lines.append(largest_line(a))
    return "\n".join(lines)


def unit_of(s: ScaleSetup) -> str:
    """What throughput counts: tokens for a model with a sequence, else samples."""
    return "samples" if s.seq is None else "tokens"


def setup_line(s: ScaleSetup) -> str:
    per = f"micro-batch {s.micro_batch}" + ("" if s.seq is None else f" × {s.seq} tokens")
    if s.weak:
        mode = (f"weak scaling (the per-GPU batch fixed, {s.accum_steps} micro-step"
                f"{'s' if s.accum_steps > 1 else ''} per optimizer step)")
    else:
        mode = (f"strong scaling (a global batch of {s.global_batch} samples fixed, the "
                "accumulation steps follow)")
    grads = s.grad_dtype or "fp32"
    return (f"scale: model {s.model} ({s.params / 1e6:.1f} M parameters) on "
            f"{s.device or 'its profile'}, {per}, {mode}; gradients reduced in {grads}")


def cluster_line(s: ScaleSetup) -> str:
    return (f"cluster: up to {s.gpus_per_node} GPUs a node on {s.intra_link}; between nodes "
            f"{s.inter_link} (α {fmt_sig(s.inter_alpha_us)} µs, busbw "
            f"{fmt_sig(s.inter_busbw_gbps)} GB/s); a collective over every GPU is one ring "
            "paced by the link between nodes (docs/TOPOLOGY.md)")


def _cells(r: ScaleRow) -> list[str]:
    rate = r.samples_per_s_per_gpu if r.tokens_per_s_per_gpu is None else r.tokens_per_s_per_gpu
    return [r.strategy, str(r.gpus), str(r.nodes), str(r.accum_steps), f"{r.step_ms:.2f}",
            fmt_sig(rate), f"{r.efficiency:.1%}", f"{r.exposed_comm_ms:.2f}"]


def largest_line(a: ScaleAnswer) -> str:
    """Each strategy's efficiency at the largest count, and the fastest there."""
    top = max(r.gpus for r in a.rows)
    base = min(r.gpus for r in a.rows)
    at_top = [r for r in a.rows if r.gpus == top]
    best = max(at_top, key=lambda r: r.samples_per_s_per_gpu)
    rate = best.samples_per_s_per_gpu if best.tokens_per_s_per_gpu is None else best.tokens_per_s_per_gpu
    kept = ", ".join(f"{r.strategy} {r.efficiency:.1%}" for r in at_top)
    return (f"at {top} GPUs, per-GPU throughput against {base} GPUs: {kept}; the fastest "
            f"there: {best.strategy} ({fmt_sig(rate)} {unit_of(a.setup)}/s per GPU)")
