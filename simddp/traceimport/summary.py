"""What a trace import found, as a dict (summary.json) and as text (the command's output).

    doc = summary(imp)                  # plain JSON-able dict, ms on the outside
    print(render_summary(doc, out_dir="out/trace"))

Steps, phases, the profiler's cost, gradients and their granularity, the collectives per
step and their sizes, in-backward versus after-backward all-reduces, the fitted link and
contention, the host's launch cost, and the traced configuration's step time: measured,
re-simulated from the import (before and after closing the link on it) and without the
profiler's overhead.
"""
from __future__ import annotations

import statistics

from simddp.strategy import MB

GRANULARITY_WHY = {
    "parameter": "one tensor per AccumulateGrad event, sized from its recorded shape; any "
                 "bucket size regroups them as torch DDP's bucket rule would",
    "bucket": "the trace records no per-parameter shapes, so each traced all-reduce is one "
              "tensor: larger buckets merge them as DDP would, smaller ones cannot be split",
}


def summary(imp) -> dict:
    """The import of ``imp`` (a TraceImport) as a JSON-able dict; times in ms."""
    d, tl0 = imp.derived, imp.timelines[0]
    first = imp.joint[0].ranks[0]
    samples = [s for j in imp.joint for s in j.samples]
    per_step = len(first.syncs)
    in_bwd = statistics.median(sum(s.in_backward for s in j.samples) for j in imp.joint)
    others = {}
    for c in first.others:
        others[c.kind] = others.get(c.kind, 0) + 1
    fit, cfit = d.link_fit, d.compute_fit
    ms = {k: round(v * 1e3, 3) for k, v in d.phases.items() if k.endswith("_s")}
    return {
        "traces": [{"path": tl.trace.path, "rank": tl.trace.rank, "device": tl.device,
                    "events": len(tl.trace.events)} for tl in imp.timelines],
        "world_size": imp.world_size, "device": tl0.device, "backend": tl0.trace.backend,
        "implementation": tl0.implementation,
        "steps": {"count": len(imp.joint), "labels": [j.label for j in imp.joint]},
        "phases_ms": {k[:-2]: v for k, v in ms.items()},
        "profiler": {"events_per_step": d.phases["events_per_step"],
                     "overhead_us_per_event": round(d.overhead_s * 1e6, 3),
                     "overhead_ms_per_step": round(d.overhead_s * d.phases["events_per_step"]
                                                   * 1e3, 3)},
        "gradients": {"tensors": len(d.grad_bytes), "bytes": sum(d.grad_bytes),
                      "segments": len(d.segment_grads), "granularity": imp.granularity,
                      "why": GRANULARITY_WHY[imp.granularity]},
        "collectives": {
            "gradient_allreduces_per_step": per_step,
            "sizes_bytes": [c.nbytes for c in first.syncs],
            "issued_during_backward": in_bwd, "issued_after_backward": per_step - in_bwd,
            "service_ms_median": round(statistics.median(s.service_s for s in samples) * 1e3, 3),
            "other_per_step": others},
        "traced": _traced(imp.traced),
        "link": {"given": imp.link_given, "name": imp.link.name,
                 "alpha_us": round(imp.link.alpha_s * 1e6, 3),
                 "busbw_gbps": round(imp.link.busbw_gbps, 6),
                 "comm_slowdown": imp.link.comm_slowdown,
                 "compute_slowdown": imp.link.compute_slowdown,
                 "sizes_separable": fit.sizes_separable,
                 "alpha_given_us": round(fit.alpha_s * 1e6, 3) if fit.alpha_given else None,
                 "comm_slowdown_measured": fit.slowdown_measured,
                 "compute_slowdown_measured": cfit.measured,
                 "replay_median_abs_error": round(fit.median_abs_error, 4),
                 "fitted_sizes_bytes": [min(c.nbytes for c in first.syncs),
                                        max(c.nbytes for c in first.syncs)],
                 "comm_scale": round(imp.comm_scale, 4)},
        "host": None if imp.host is None else {
            impl: {"launch_us": round(c.launch_s * 1e6, 3)}
            for impl, c in imp.host.implementations.items()},
        "step_ms": _step_ms(imp),
        "notes": list(imp.notes),
    }


def _traced(traced) -> dict:
    """The configuration the trace ran (a TracedConfig)."""
    strategy = traced.strategy
    return {"strategy": strategy.name, "implementation": strategy.implementation,
            "bucket_mb": strategy.bucket_mb,
            "first_bucket_mb": None if strategy.first_bucket_bytes is None
            else round(strategy.first_bucket_bytes / MB, 6),
            "bucket_mb_range": None if traced.bucket_mb_range is None
            else [round(x, 6) for x in traced.bucket_mb_range],
            "bucket_rule_reproduces": traced.rule_reproduces,
            "collectives": len(traced.plan.collectives)}


def _step_ms(imp) -> dict:
    """The traced step measured, replayed, re-simulated and predicted (ms)."""
    return {"measured": round(imp.measured_step_s * 1e3, 3),
            "measured_p5": round(imp.measured_p5_s * 1e3, 3),
            "measured_p95": round(imp.measured_p95_s * 1e3, 3),
            "replayed": round(imp.replayed_step_s * 1e3, 3),
            "replay_error_pct": round(imp.replay_error * 100, 2),
            "resimulated": round(imp.resimulated.step_s * 1e3, 3),
            "error_pct": round(imp.reproduction_error * 100, 2),
            "without_profiler": round(imp.without_profiler.step_s * 1e3, 3),
            "step_anchor": None if imp.step_anchor_s is None
            else round(imp.step_anchor_s * 1e3, 3),
            "compute_scale": round(imp.compute_scale, 4)}


def render_summary(doc: dict, out_dir: str | None = None) -> str:
    """The summary as the lines ``python -m simddp trace-import`` prints."""
    ph, st, co, gr = doc["phases_ms"], doc["step_ms"], doc["collectives"], doc["gradients"]
    tr, ln, pr = doc["traced"], doc["link"], doc["profiler"]
    impl = {"torch": "torch DistributedDataParallel",
            "realrun": "realrun.DDP (or another wrapper; not torch's reducer)"}
    labels = doc["steps"]["labels"]
    sizes = ", ".join(f"{n / MB:.3g}" for n in co["sizes_bytes"][:12])
    more = " ..." if len(co["sizes_bytes"]) > 12 else ""
    other = ", ".join(f"{k} x{v}" for k, v in co["other_per_step"].items()) or "none"
    bucket = _bucket_text(tr)
    lines = [
        f"trace-import: {len(doc['traces'])} rank trace(s), {doc['device']}, "
        f"{doc['backend'] or 'backend ?'}, world {doc['world_size']}; "
        f"{impl.get(doc['implementation'], doc['implementation'])}",
        f"steps: {doc['steps']['count']} on every rank ({labels[0]} .. {labels[-1]}); step "
        f"{st['measured']:.2f} ms median (p5 {st['measured_p5']:.2f}, p95 "
        f"{st['measured_p95']:.2f}), a step lasting as long as its slowest rank",
        f"phases, median per step and rank: forward {ph['forward']:.2f} ms, backward "
        f"{ph['backward']:.2f} ms, wait for all-reduces {ph['wait']:.2f} ms, after the "
        f"backward {ph['post']:.2f} ms (optimizer {ph['optimizer']:.2f} ms)",
        f"profiler: {pr['events_per_step']:.0f} events per step x "
        f"{pr['overhead_us_per_event']:.2f} µs = {pr['overhead_ms_per_step']:.2f} ms per step "
        "estimated and removed from compute",
        f"gradients: {gr['tensors']} tensors, {gr['bytes']} bytes ({gr['bytes'] / MB:.3g} MiB) "
        f"in {gr['segments']} backward segments; granularity {gr['granularity']}: {gr['why']}",
        f"collectives per step: {co['gradient_allreduces_per_step']} gradient all-reduces of "
        f"{sizes}{more} MiB; {co['issued_during_backward']:g} issued during the backward, "
        f"{co['issued_after_backward']:g} after; other collectives: {other}",
        f"traced configuration: {tr['strategy']}{bucket}; simddp's bucket rule gives the "
        f"traced buckets: {'yes' if tr['bucket_rule_reproduces'] else 'no'}",
        _link_line(ln),
    ]
    return "\n".join(lines + _ending(doc, out_dir))


def _bucket_text(tr: dict) -> str:
    """' at 25 MB (the buckets need a cap in (12, 30] MB)': the traced bucket cap."""
    rng = tr["bucket_mb_range"]
    bucket = "" if tr["bucket_mb"] is None else f" at {tr['bucket_mb']:g} MB"
    first = ", first bucket 1 MiB" if tr["first_bucket_mb"] == 1.0 else ""
    if rng is not None and rng[1] == float("inf"):
        bucket += (f" (any cap above {rng[0]:.4g} MB gives the traced buckets{first}: 25 MB "
                   "assumed; pass --bucket-mb)")
    elif rng is not None:
        bucket += f" (the buckets need a cap in ({rng[0]:.4g}, {rng[1]:.4g}] MB{first})"
    return bucket


def _ending(doc: dict, out_dir: str | None) -> list[str]:
    """Host, the traced step against its re-simulation, notes, and the command to predict."""
    st, ln, tr = doc["step_ms"], doc["link"], doc["traced"]
    lines = []
    if doc["host"]:
        lines.append("host: " + "; ".join(f"{impl_} {c['launch_us']:.0f} µs per launch"
                                          for impl_, c in doc["host"].items()))
    how = ("one rank: its all-reduces took no time" if ln["given"] else
           f"the link as fitted to the all-reduces' ends gave {st['replayed']:.2f} ms, "
           f"{st['replay_error_pct']:+.1f} %, its costs then x{ln['comm_scale']:.3f}")
    lines.append(f"traced step: measured {st['measured']:.2f} ms; re-simulated "
                 f"{st['resimulated']:.2f} ms ({st['error_pct']:+.1f} %; {how})")
    if st["step_anchor"] is None:
        lines.append(f"without the profiler's overhead (profile.json): "
                     f"{st['without_profiler']:.2f} ms per step predicted")
    else:
        lines.append(f"with --step-ms {st['step_anchor']:g}: compute x{st['compute_scale']:.3f} "
                     f"of the overhead-corrected trace (profile.json)")
    lines += [f"note: {n}" for n in doc["notes"]]
    if out_dir is not None:
        mb = tr["bucket_mb"] or 25
        sizes_mb = ",".join(f"{x:g}" for x in sorted({mb / 4, mb, mb * 4, mb * 16}))
        lines.append(f"predict: python -m simddp sweep --model {out_dir}/profile.json --link "
                     f"{out_dir}/link.json --strategies {tr['strategy']} --bucket-mb {sizes_mb}"
                     + (" --world-size N (your cluster's ranks)" if ln["given"] else ""))
    return lines


def _link_line(ln: dict) -> str:
    if ln["given"]:
        return (f"link: {ln['name']} as given (α {ln['alpha_us']:.0f} µs, busbw "
                f"{ln['busbw_gbps']:.3g} GB/s), not measured: a one-rank trace's all-reduces "
                "move nothing over a network; link.json is that link")
    given = ln.get("alpha_given_us")
    alpha = "" if given is None else f" (--alpha-us {given:g}, scaled with the rest)"
    return (f"link: α {ln['alpha_us']:.0f} µs{alpha}, busbw {ln['busbw_gbps']:.3g} GB/s, "
            f"fitted on all-reduces of {ln['fitted_sizes_bytes'][0] / MB:.3g}–"
            f"{ln['fitted_sizes_bytes'][1] / MB:.3g} MiB (buckets far outside extrapolate); "
            f"all-reduces x{ln['comm_slowdown']:.2f} slower beside compute"
            f"{'' if ln['comm_slowdown_measured'] else ' (not measured)'}, compute "
            f"x{ln['compute_slowdown']:.2f} slower beside them"
            f"{'' if ln['compute_slowdown_measured'] else ' (not measured)'}"
            + ("" if ln["sizes_separable"] or given is not None
               else "; sizes too alike to tell α from bandwidth: α = 0, so other bucket "
                    "sizes differ only by overlap (give --alpha-us: calibrate's α)"))
