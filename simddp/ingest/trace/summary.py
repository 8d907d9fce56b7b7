"""What a trace import found, as a dict (summary.json) and as text (the command's output).

    doc = summary(imp)                  # plain JSON-able dict, ms on the outside
    print(render_summary(doc, out_dir="out/trace"))

Steps, phases, the compute's basis (host-timed on CPU, less the profiler's cost; on CUDA
the kernels' time on the GPU, and how long the GPU sat idle waiting for the host),
gradients and their granularity, the collectives per step and their sizes, in-backward
versus after-backward all-reduces, the fitted link and contention, the host's launch cost,
and the traced configuration's step time: measured, re-simulated from the import (before
and after closing the link on it) and without the profiler's overhead. The link's line
(its standard errors, residual and sizes) and, where the trace could not give a link, why
and what was used instead; other collectives and the time they took. An FSDP2 import has
its own (:func:`sharded_summary`): units, calls per kind, each kind's law, FSDP2's host
costs.
"""
from __future__ import annotations

import statistics

from simddp.kinds import TORCH_FSDP
from simddp.planning.strategy import MB
from simddp.ingest.trace.rank_timeline import kind_name

GRANULARITY_WHY = {
    "parameter": "one tensor per AccumulateGrad event, sized from its recorded shape; any "
                 "bucket size regroups them as torch DDP's bucket rule would",
    "bucket": "the trace records no per-parameter shapes, so each traced all-reduce is one "
              "tensor: larger buckets merge them as DDP would, smaller ones cannot be split",
}


def summary(imp) -> dict:
    """The import of ``imp`` (a TraceImport) as a JSON-able dict; times in ms."""
    if imp.sharded is not None:
        return sharded_summary(imp)
    d, tl0 = imp.derived, imp.timelines[0]
    first = imp.joint[0].ranks[0]
    samples = [s for j in imp.joint for s in j.samples]
    per_step = len(first.syncs)
    in_bwd = statistics.median(sum(s.in_backward for s in j.samples) for j in imp.joint)
    others = {}
    for c in first.others:
        others[kind_name(c.kind)] = others.get(kind_name(c.kind), 0) + 1
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
            "other_per_step": others,
            "other_exposed_ms": round(d.phases.get("others_s", 0.0) * 1e3, 3)},
        "traced": _traced(imp.traced),
        "link": {"given": imp.link_given, "name": imp.link.name,
                 "alpha_us": round(imp.link.alpha_s * 1e6, 3),
                 "busbw_gbps": round(imp.link.busbw_gbps, 6),
                 "comm_slowdown": imp.contention.comm,
                 "compute_slowdown": imp.contention.compute,
                 "sizes_separable": fit.sizes_separable,
                 "alpha_given_us": round(fit.alpha_s * 1e6, 3)
                 if fit.alpha_given and (d.choice is None or d.choice.fallback is None) else None,
                 "comm_slowdown_measured": fit.slowdown_measured,
                 "compute_slowdown_measured": cfit.measured,
                 "replay_median_abs_error": round(fit.median_abs_error, 4),
                 "fitted_sizes_bytes": [min(c.nbytes for c in first.syncs),
                                        max(c.nbytes for c in first.syncs)],
                 "comm_scale": round(imp.comm_scale, 4),
                 "fit": _fit(d.choice), "contention_note": d.contention_note},
        "host": None if imp.host is None else {
            impl: {"launch_us": round(c.launch_s * 1e6, 3)}
            for impl, c in imp.host.implementations.items()},
        "step_ms": _step_ms(imp),
        "notes": list(imp.notes),
    }


def _fit(choice) -> dict | None:
    """How the link was chosen: the line through single all-reduces and its standard errors,
    and, where the trace cannot give a link, why and what was used instead."""
    if choice is None:
        return None
    line = choice.line
    return {"cannot_fit": choice.cannot_fit, "fallback": choice.fallback,
            "notes": list(choice.notes), "per_step": choice.per_step,
            "line": {"alpha_us": round(line.alpha_s * 1e6, 3),
                     "alpha_se_us": round(line.alpha_se_s * 1e6, 3)
                     if line.alpha_se_s != float("inf") else None,
                     "busbw_gbps": None if line.busbw_gbps is None else round(line.busbw_gbps, 6),
                     "busbw_rel_se": round(line.beta_rel_se, 4)
                     if line.beta_rel_se != float("inf") else None,
                     "residual": round(line.residual, 4), "count": line.count,
                     "sizes": line.sizes, "range_bytes": [line.min_bytes, line.max_bytes]}}


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
            "collectives": len(traced.plan.collectives),
            "accum_steps": strategy.accum_steps}


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


def sharded_summary(imp) -> dict:
    """An FSDP2 trace's import as a JSON-able dict; times in ms."""
    sh, d, tl0 = imp.sharded, imp.derived, imp.timelines[0]
    ms = {k[:-2]: round(v * 1e3, 3) for k, v in sh.phases.items()}
    events = statistics.median(
        s.lead_events + s.optimizer_events + sum(u.forward_events + u.backward_events
                                                 for u in s.units) + sum(c.events for c in s.calls)
        for per_rank in sh.steps for s in per_rank)
    costs = imp.host.implementations[TORCH_FSDP]
    return {
        "sharded": True,
        "traces": [{"path": tl.trace.path, "rank": tl.trace.rank, "device": tl.device,
                    "events": len(tl.trace.events)} for tl in imp.timelines],
        "world_size": imp.world_size, "device": tl0.device, "backend": tl0.trace.backend,
        "implementation": TORCH_FSDP,
        "steps": {"count": len(sh.steps), "labels": [s[0].label for s in sh.steps]},
        "phases_ms": ms,
        "profiler": {"events_per_step": events,
                     "overhead_us_per_event": round(d.overhead_s * 1e6, 3),
                     "overhead_ms_per_step": round(d.overhead_s * events * 1e3, 3)},
        "gradients": {"tensors": len(d.grad_bytes), "bytes": sum(d.grad_bytes),
                      "segments": len(sh.units), "granularity": "unit",
                      "why": "one layer per traced FSDP2 unit, with the gradients its backward "
                             "made ready; larger units group them as FSDP2 would, smaller ones "
                             "cannot be split"},
        "units": [{"name": n, "bytes": b} for n, b in zip(sh.units, sh.unit_bytes)],
        "collectives": {"per_step": sh.calls_per_step,
                        "sizes_bytes": [min(sh.unit_bytes), max(sh.unit_bytes)]},
        "traced": {"strategy": sh.strategy, "implementation": TORCH_FSDP, "units": len(sh.units),
                   "plan_reproduces": imp.traced.rule_reproduces,
                   "collectives": len(imp.traced.plan.collectives)},
        "link": {"given": False, "name": imp.link.name,
                 "alpha_us": round(imp.link.alpha_s * 1e6, 3),
                 "busbw_gbps": round(imp.link.busbw_gbps, 6),
                 "all_reduce_from": sh.all_reduce_from,
                 "kinds": {law.kind: {
                     "alpha_us": round(imp.link.kind_fits[law.kind].alpha_s * 1e6, 3),
                     "busbw_gbps": round(imp.link.kind_fits[law.kind].busbw_gbps, 6),
                     "cannot_fit": law.cannot_fit, "fallback": law.fallback,
                     "line": {"alpha_us": round(law.line.alpha_s * 1e6, 3),
                              "alpha_se_us": _finite_or_none(law.line.alpha_se_s * 1e6),
                              "busbw_gbps": law.line.busbw_gbps,
                              "busbw_rel_se": _finite_or_none(law.line.beta_rel_se),
                              "residual": round(law.line.residual, 4),
                              "count": law.line.count, "sizes": law.line.sizes,
                              "range_bytes": [law.line.min_bytes, law.line.max_bytes]}}
                     for law in sh.laws},
                 "comm_scale": round(imp.comm_scale, 4)},
        "host": {TORCH_FSDP: {"gather_us": round(costs.gather_s * 1e6, 3),
                          "scatter_us": round(costs.scatter_s * 1e6, 3),
                          "copy_gbps": costs.copy_gbps,
                          "blocking_collectives": costs.blocking_collectives}},
        "step_ms": _step_ms(imp),
        "notes": list(imp.notes),
    }


def _finite_or_none(x: float) -> float | None:
    return None if x == float("inf") else round(x, 4)


def render_sharded(doc: dict, out_dir: str | None = None) -> str:
    """An FSDP2 import's summary as the lines the command prints."""
    ph, st, ln, tr = doc["phases_ms"], doc["step_ms"], doc["link"], doc["traced"]
    pr, gr, co = doc["profiler"], doc["gradients"], doc["collectives"]
    host = doc["host"][TORCH_FSDP]
    labels = doc["steps"]["labels"]
    calls = ", ".join(f"{v} {k.replace('_', '-')}s" for k, v in co["per_step"].items())
    lines = [
        f"trace-import: {len(doc['traces'])} rank trace(s), {doc['device']}, "
        f"{doc['backend'] or 'backend ?'}, world {doc['world_size']}; torch FSDP2 (fully_shard)",
        f"steps: {doc['steps']['count']} on every rank ({labels[0]} .. {labels[-1]}); step "
        f"{st['measured']:.2f} ms median (p5 {st['measured_p5']:.2f}, p95 "
        f"{st['measured_p95']:.2f}), a step lasting as long as its slowest rank",
        f"phases, median per step and rank: compute {ph['compute']:.2f} ms (optimizer "
        f"{ph['optimizer']:.2f} ms, on 1/{doc['world_size']} shards), FSDP2's host work "
        f"{ph['host']:.2f} ms, waiting for its collectives {ph['wait']:.2f} ms (their time on "
        f"the lane, all ranks joined: {ph['service']:.2f} ms)",
        f"profiler: {pr['events_per_step']:.0f} events per step x "
        f"{pr['overhead_us_per_event']:.2f} µs = {pr['overhead_ms_per_step']:.2f} ms per step "
        "estimated and removed from compute and host work",
        f"units: {tr['units']} ({gr['tensors']} tensors, {gr['bytes'] / MB:.3g} MiB, "
        f"{co['sizes_bytes'][0] / MB:.3g}–{co['sizes_bytes'][1] / MB:.3g} MiB a unit); "
        f"granularity unit: {gr['why']}",
        f"collectives per step: {calls}",
        f"traced configuration: {tr['strategy']} ({tr['units']} units); simddp's plan issues "
        f"the traced collectives: {'yes' if tr['plan_reproduces'] else 'no'}",
    ]
    for kind, law in ln["kinds"].items():
        line = law["line"]
        se = "" if line["alpha_se_us"] is None else f" ± {line['alpha_se_us']:.0f}"
        bw = ("no bandwidth term" if line["busbw_gbps"] is None
              else f"busbw {line['busbw_gbps']:.3g} GB/s"
              + ("" if line["busbw_rel_se"] is None else f" ± {line['busbw_rel_se'] * 100:.0f} %"))
        lines.append(f"link {kind}: α {law['alpha_us']:.0f} µs, busbw {law['busbw_gbps']:.3g} "
                     f"GB/s; a least-squares line through {line['count']} calls "
                     f"({line['sizes']} sizes, {line['range_bytes'][0] / MB:.3g}–"
                     f"{line['range_bytes'][1] / MB:.3g} MiB): α {line['alpha_us']:.0f}{se} µs, "
                     f"{bw} (one standard error), residual {line['residual'] * 100:.0f} %")
        if law["cannot_fit"]:
            lines.append(f"link {kind}: {law['cannot_fit']}; the traced time gives one term, "
                         f"{law['fallback']} the other (pass --link PRESET|link.json)")
    lines.append(f"link all_reduce (the DDP alternative): α {ln['alpha_us']:.0f} µs, busbw "
                 f"{ln['busbw_gbps']:.3g} GB/s, {ln['all_reduce_from']}")
    copy = ("copies free (their bytes do not show)" if host["copy_gbps"] is None
            else f"copies at {host['copy_gbps']:.3g} GB/s")
    lines.append(f"host (fsdp): {host['gather_us']:.0f} µs per all-gather, "
                 f"{host['scatter_us']:.0f} µs per reduce-scatter, {copy}; collectives "
                 + ("hold the training thread" if host["blocking_collectives"]
                    else "run beside compute"))
    lines.append(f"traced step: measured {st['measured']:.2f} ms; re-simulated "
                 f"{st['resimulated']:.2f} ms ({st['error_pct']:+.1f} %; the link as fitted "
                 f"gave {st['replayed']:.2f} ms, {st['replay_error_pct']:+.1f} %, its costs then "
                 f"x{ln['comm_scale']:.3f})")
    if st["step_anchor"] is None:
        lines.append(f"without the profiler's overhead (profile.json): "
                     f"{st['without_profiler']:.2f} ms per step predicted")
    else:
        lines.append(f"with --step-ms {st['step_anchor']:g}: compute x{st['compute_scale']:.3f} "
                     "of the overhead-corrected trace (profile.json)")
    lines += [f"note: {n}" for n in doc["notes"]]
    if out_dir is not None:
        lines.append(f"predict: python -m simddp sweep --model {out_dir}/profile.json --link "
                     f"{out_dir}/link.json --world-size "
                     f"{doc['world_size']} --strategies fsdp,zero2,ddp --bucket-mb 25 "
                     "--shard-unit-mb 1")
    return "\n".join(lines)


def render_summary(doc: dict, out_dir: str | None = None) -> str:
    """The summary as the lines ``python -m simddp trace-import`` prints."""
    if doc.get("sharded"):
        return render_sharded(doc, out_dir)
    ph, st, co, gr = doc["phases_ms"], doc["step_ms"], doc["collectives"], doc["gradients"]
    tr, ln, pr = doc["traced"], doc["link"], doc["profiler"]
    impl = {"torch": "torch DistributedDataParallel",
            "realrun": "realrun.DDP (or another wrapper; not torch's reducer)"}
    labels = doc["steps"]["labels"]
    sizes = ", ".join(f"{n / MB:.3g}" for n in co["sizes_bytes"][:12])
    more = " ..." if len(co["sizes_bytes"]) > 12 else ""
    other = ", ".join(f"{k} x{v}" for k, v in co["other_per_step"].items()) or "none"
    if co["other_per_step"]:
        exposed = co.get("other_exposed_ms", 0.0)
        other += (f" ({exposed:.2f} ms of the {st['measured']:.2f} ms step with the compute lane "
                  f"idle beside them, {100 * exposed / st['measured']:.0f} %: kept as measured "
                  "in the phases they ran in; the prediction does not re-simulate them)"
                  if st["measured"] > 0 else "")
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
        f"traced configuration: {tr['strategy']}{_accum_text(tr)}{bucket}; simddp's bucket "
        "rule gives the "
        f"traced buckets: {'yes' if tr['bucket_rule_reproduces'] else 'no'}",
        _link_line(ln),
        *_fit_lines(ln),
    ]
    return "\n".join(lines + _ending(doc, out_dir))


def _fit_lines(ln: dict) -> list[str]:
    """The line the link stands on (its errors, residual and sizes), what the trace could not
    give and what was used instead, and any bound that held a figure back."""
    fit = ln.get("fit")
    if not fit:
        return []
    line, lines = fit["line"], []
    size = (f"{line['range_bytes'][0] / MB:.3g}–{line['range_bytes'][1] / MB:.3g} MiB"
            if line["range_bytes"][0] != line["range_bytes"][1]
            else f"{line['range_bytes'][0] / MB:.3g} MiB")
    errors = "" if line["alpha_se_us"] is None else f" ± {line['alpha_se_us']:.0f}"
    bw = ("no bandwidth term (the time does not grow with the size)"
          if line["busbw_gbps"] is None else
          f"busbw {line['busbw_gbps']:.3g} GB/s"
          + ("" if line["busbw_rel_se"] is None else f" ± {line['busbw_rel_se'] * 100:.0f} %"))
    se = " (± one standard error)" if line["alpha_se_us"] is not None else ""
    lines.append(f"link fit: a least-squares line through {line['count']} all-reduces "
                 f"({line['sizes']} sizes, {size}): α {line['alpha_us']:.0f}{errors} µs, {bw}"
                 f"{se}, residual {line['residual'] * 100:.0f} % of the median "
                 f"time; the replay's median residual {ln['replay_median_abs_error'] * 100:.1f} %")
    if fit["cannot_fit"]:
        lines.append(f"link: {fit['cannot_fit']}; using {fit['fallback']} (pass --link "
                     "PRESET|link.json for your cluster's)")
    lines += [f"note: {n}" for n in fit["notes"]]
    if ln.get("contention_note"):
        lines.append(f"note: {ln['contention_note']}")
    return lines


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


def _accum_text(tr: dict) -> str:
    """' (2 micro-steps a step, the first 1 under no_sync())': gradient accumulation."""
    k = tr.get("accum_steps", 1)
    return "" if k == 1 else (f" ({k} micro-steps a step, the first {k - 1} under no_sync(), "
                              "each read as the same forward and backward)")


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
        accum = tr.get("accum_steps", 1)
        lines.append(f"predict: python -m simddp sweep --model {out_dir}/profile.json --link "
                     f"{out_dir}/link.json --strategies {tr['strategy']} --bucket-mb {sizes_mb}"
                     + (f" --accum-steps {accum}" if accum > 1 else "")
                     + (" --world-size N (your cluster's ranks)" if ln["given"] else ""))
    return lines


def _link_line(ln: dict) -> str:
    if ln["given"]:
        return (f"link: {ln['name']} as given (α {ln['alpha_us']:.0f} µs, busbw "
                f"{ln['busbw_gbps']:.3g} GB/s), not measured: a one-rank trace's all-reduces "
                "move nothing over a network; link.json is that link")
    given = ln.get("alpha_given_us")
    alpha = "" if given is None else f" (--alpha-us {given:g}, scaled with the rest)"
    fallback = (ln.get("fit") or {}).get("fallback")
    if fallback and given is None:
        alpha = f" (from {fallback}, scaled with the rest)"
    how = "busbw from the time of" if fallback or given is not None else "fitted on"
    return (f"link: α {ln['alpha_us']:.0f} µs{alpha}, busbw {ln['busbw_gbps']:.3g} GB/s, "
            f"{how} all-reduces of {ln['fitted_sizes_bytes'][0] / MB:.3g}–"
            f"{ln['fitted_sizes_bytes'][1] / MB:.3g} MiB (buckets far outside extrapolate); "
            f"all-reduces x{ln['comm_slowdown']:.2f} slower beside compute"
            f"{'' if ln['comm_slowdown_measured'] else ' (not measured)'}, compute "
            f"x{ln['compute_slowdown']:.2f} slower beside them"
            f"{'' if ln['compute_slowdown_measured'] else ' (not measured)'}")
