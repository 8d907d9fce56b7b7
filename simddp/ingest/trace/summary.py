"""What a trace import found, as a dict (summary.json) and as text (the command's output).

    doc = summary(imp)                  # plain JSON-able dict, ms on the outside
    print(render_summary(doc, out_dir="out/trace"))

Steps, phases, the compute's basis (host-timed on CPU, less the profiler's cost; on CUDA
the kernels' time on the GPU, and how long the GPU sat idle waiting for the host),
gradients and their granularity, the collectives per step and their sizes, in-backward
versus after-backward all-reduces, the fitted link and contention, the host's launch cost,
and the traced configuration's step time: measured, re-simulated from the import (before
and after closing the link on it) and without the profiler's overhead.
"""
from __future__ import annotations

import statistics

from simddp.planning.strategy import MB

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
        "compute": _compute(imp),
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
                 "comm_slowdown": imp.contention.comm,
                 "compute_slowdown": imp.contention.compute,
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


def _compute(imp) -> dict:
    """Which clock the profile's compute comes from; on CUDA, the kernels' time per phase
    (median per step and rank), how they were tied to their launches, the GPU's own gap
    between kernels, and how long the GPU sat idle waiting for the host (ms)."""
    dev = imp.derived.device_phases
    if dev is None:
        return {"basis": "host", "why": "a CPU trace: each op's time on the thread that ran "
                                        "it, less the profiler's estimated cost per event"}
    works = [tl.work for tl in imp.timelines]
    tied = {how: sum(w.tied_by.get(how, 0) for w in works) for how in ("correlation", "flow")}
    untied = [works[0].untied_between(s.start_s, s.end_s) for s in
              (j.ranks[0] for j in imp.joint)]
    nccl = sum(1 for tl in imp.timelines for e in tl.trace.events
               if e.cat == "kernel" and e.name.lower().startswith("nccl"))
    step_s = statistics.median(j.ranks[0].step_s for j in imp.joint)
    return {"basis": "device",
            "why": "a CUDA trace: each phase's kernels' time on the GPU, tied to the host "
                   "ops that launched them; the GPU's waits for the host left out",
            "forward_ms": round(dev["forward_device_s"] * 1e3, 3),
            "backward_ms": round(dev["backward_device_s"] * 1e3, 3),
            "post_ms": round(dev["post_device_s"] * 1e3, 3),
            "total_ms": round(dev["device_s"] * 1e3, 3),
            "gpu_idle_for_host_ms": round(dev["host_idle_s"] * 1e3, 3),
            "gpu_idle_for_host_pct": round(100 * dev["host_idle_s"] / step_s, 1)
            if step_s > 0 else 0.0,
            "kernel_gap_us": round(statistics.median(w.gap_s for w in works) * 1e6, 3),
            "queued_gaps": sum(w.queued_gaps for w in works),
            "tied_by": tied,
            "untied_kernels_per_step": statistics.median(n for n, _ in untied),
            "untied_ms_per_step": round(statistics.median(t for _, t in untied) * 1e3, 3),
            "untied_kernels": sum(len(w.untied) for w in works),
            "nccl_kernels": nccl if imp.world_size == 1 else None}


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
    clock = " (on the GPU's clock, its waits included)" if doc["compute"]["basis"] == "device" \
        else ""
    lines = [
        f"trace-import: {len(doc['traces'])} rank trace(s), {doc['device']}, "
        f"{doc['backend'] or 'backend ?'}, world {doc['world_size']}; "
        f"{impl.get(doc['implementation'], doc['implementation'])}",
        f"steps: {doc['steps']['count']} on every rank ({labels[0]} .. {labels[-1]}); step "
        f"{st['measured']:.2f} ms median (p5 {st['measured_p5']:.2f}, p95 "
        f"{st['measured_p95']:.2f}), a step lasting as long as its slowest rank",
        f"phases, median per step and rank{clock}: forward {ph['forward']:.2f} ms, backward "
        f"{ph['backward']:.2f} ms, wait for all-reduces {ph['wait']:.2f} ms, after the "
        f"backward {ph['post']:.2f} ms (optimizer {ph['optimizer']:.2f} ms)",
        *_compute_lines(doc["compute"], pr),
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


def _compute_lines(cp: dict, pr: dict) -> list[str]:
    """The profiler's cost removed (host-timed), or the kernels' time and the GPU's wait for
    the host (device-timed)."""
    if cp["basis"] == "host":
        return [f"profiler: {pr['events_per_step']:.0f} events per step x "
                f"{pr['overhead_us_per_event']:.2f} µs = {pr['overhead_ms_per_step']:.2f} ms per "
                "step estimated and removed from compute",
                "compute: host-timed: each op's time on the thread that ran it (a CPU trace)"]
    how = ", ".join(f"{n} by {'args.correlation' if k == 'correlation' else 'ac2g flow'}"
                    for k, n in cp["tied_by"].items() if n)
    gap = (f"each kernel's start charged the GPU's own gap between queued kernels, "
           f"{cp['kernel_gap_us']:.1f} µs" if cp["queued_gaps"] else
           "no kernel was queued when the GPU went idle, so the GPU's own gap between "
           "kernels is unknown and taken as 0")
    lines = [f"compute: device-timed: the kernels' time on the GPU, tied to the host ops that "
             f"launched them ({how}): forward {cp['forward_ms']:.2f} + backward "
             f"{cp['backward_ms']:.2f} + after the backward {cp['post_ms']:.2f} = "
             f"{cp['total_ms']:.2f} ms per step ({gap})",
             f"GPU idle waiting for the host: {cp['gpu_idle_for_host_ms']:.2f} ms per step "
             f"({cp['gpu_idle_for_host_pct']:.0f} % of the traced step), left out of "
             "profile.json: the profiler slows the host, not the GPU (a job that waits for "
             "its host without the profiler too: pass --step-ms, its own step time)"]
    if cp["untied_kernels"]:
        lines.append(f"untied kernels: {cp['untied_kernels']} in the trace "
                     f"({cp['untied_kernels_per_step']:g} per step, "
                     f"{cp['untied_ms_per_step']:.2f} ms) name no launch in it (no "
                     "args.correlation of a runtime call, no ac2g flow): counted in the phase "
                     "they ran in on the GPU's clock")
    if cp["nccl_kernels"]:
        lines.append(f"NCCL kernels at one rank: {cp['nccl_kernels']} in the trace, not compute "
                     "(a one-rank collective moves nothing; the link is --link's)")
    return lines


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
