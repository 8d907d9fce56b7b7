"""validate's report — table, summary, recommendation and verdict, JSON, files.

The pipeline (:mod:`realrun.workflows.validate.pipeline`) builds a :class:`ValidationReport`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace

from realrun.workflows.validate.settings import ValidateSettings
from simddp.compare import Comparison, compare_results, format_table
from simddp.compare.verdict import verdict
from simddp.rig.cpu_share import section_note
from simddp.inputs.host import Host
from simddp.inputs.io import link_to_json, profile_to_json, write_atomic
from simddp.result import results_to_json
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.inputs.resolved import NONE
from simddp.inputs.profile import ModelProfile
from simddp.report.table import host_line
from simddp.predict.layouts import sizes_text
from simddp.result import COMPUTE_ONLY, Result
from simddp.planning.strategy import SHARDED


@dataclass(frozen=True)
class Prediction:
    """One prediction of every configuration: its inputs, results and comparison."""

    label: str                       # "before running" or "anchored"
    link_file: LinkFile              # the link and what was measured beside it
    host: Host | None                # the DDP implementations' host costs (None: free)
    profile: ModelProfile
    predicted: list[Result]
    comparison: Comparison
    scored_out: frozenset = frozenset()  # measured rows used as inputs (not scored)
    compute_anchor: dict | None = None   # profile vs measured compute-only ms, and the factor
    probes: dict | None = None           # link fields set from the in-run probes, and medians

    def rescored(self, measured: list[Result]) -> "Prediction":
        """The same prediction compared with ``measured`` (after spans were added)."""
        return replace(self, comparison=compare_results(
            self.predicted, measured, inputs=self.scored_out, profile=self.profile)
            .split_halves(self.comparison.turn_steps))

    @property
    def link(self) -> Link:
        return self.link_file.link

    def inputs_json(self) -> dict:
        l, gloo = self.link, self.link_file.host
        contention = self.link_file.contention or NONE
        return {
            "link": {"name": l.name, "alpha_us": l.alpha_s * 1e6,
                     "blocking_alpha_us": (None if gloo is None or gloo.blocking_alpha_s is None
                                           else gloo.blocking_alpha_s * 1e6),
                     "idle_wake_ms": (None if gloo is None or gloo.idle_wake_s is None
                                      else gloo.idle_wake_s * 1e3),
                     "busbw_gbps": l.busbw_gbps, "compute_slowdown": contention.compute,
                     "comm_slowdown": contention.comm, "time_spread": l.time_spread},
            "host_costs": None if self.host is None else {
                "contention": self.host.contention, **{
                    impl: {"copy_gbps": c.copy_gbps, "scale_gbps": c.scale_gbps,
                           "hook_us": c.hook_s * 1e6, "launch_us": c.launch_s * 1e6,
                           "gather_us": c.gather_s * 1e6, "scatter_us": c.scatter_s * 1e6,
                           "blocking_collectives": c.blocking_collectives}
                    for impl, c in self.host.implementations.items()}},
            "profile": {"forward_ms": self.profile.forward_s * 1e3,
                        "backward_ms": self.profile.backward_s * 1e3,
                        "optimizer_ms": self.profile.optimizer_s * 1e3,
                        "tensors": self.profile.n_tensors,
                        "grad_mib": self.profile.grad_total_bytes / 2 ** 20,
                        "compute_spread": self.profile.compute_spread},
            "compute_anchor": self.compute_anchor, "probes": self.probes}


def caveats(settings: ValidateSettings) -> list[str]:
    """Known gaps between simddp's model and what this validation runs, one line each.

    >>> caveats(ValidateSettings(strategies=("ddp",)))
    []
    >>> len(caveats(ValidateSettings(strategies=("ddp", "zero2"), comm_hooks=("fp16",))))
    2
    """
    out = []
    if settings.backend == "gloo" and any(s in SHARDED for s in settings.strategies):
        out.append("caveat: fsdp/zero2 on Gloo: FSDP2's host work and blocking collectives are "
                   "measured with the profile and charged (realrun/fsdp_host_costs.py); a "
                   "waited-for reduce-scatter or all-gather is charged its kind's waited-for α "
                   "(calibrate measures it; an older link's: the all-reduce's wait "
                   "added to the kind's α, which over-charges many small calls: "
                   "docs/FINDINGS.md#blocking-alpha)")
    if settings.backend == "gloo" and settings.comm_hooks:
        out.append("caveat: comm hooks on CPU: Gloo's fp16 sum and PowerSGD's matmuls are "
                   "slower than simddp's byte counts say, and PowerSGD runs bucket by bucket "
                   "on Gloo (docs/REALRUN.md); expect under-prediction")
    return out


@dataclass
class ValidationReport:
    """The prediction made before the runs (``before``: the summary, recommendation and
    verdict), the anchored one (``anchored``, reported second), and the measurements."""

    settings: ValidateSettings
    link_info: dict | None           # what the calibration phase measured (None: --link)
    profile_measured: dict | None
    measured: list[Result]
    before: Prediction
    anchored: Prediction | None
    failures: list[str]
    timeline_config: str | None
    timeline_note: str
    load: tuple[float, float]        # 1-min load average before and after
    elapsed_s: float

    # The prediction made before running is the report's: these name its parts.
    link = property(lambda self: self.before.link)
    link_file = property(lambda self: self.before.link_file)
    host = property(lambda self: self.before.host)
    profile = property(lambda self: self.before.profile)
    predicted = property(lambda self: self.before.predicted)
    comparison = property(lambda self: self.before.comparison)
    # the profile's ranks ran the runs too: their CPUs' caution (simddp/rig/cpu_share.py)
    cpu_note = property(lambda self: section_note(self.profile_measured))

    def verdict(self) -> dict:
        """simddp's recommendation and whether the measurement proves or refutes it
        (simddp/compare/verdict.py), judged against the rows' split halves (the bench's
        turns); sizes that make the same buckets are one."""
        return verdict(self.predicted, self.measured, self.profile,
                       self.comparison.turn_steps)

    def to_json(self) -> dict:
        """``summary`` and ``rows``: the prediction made before running; ``anchored``: the
        one with in-run inputs (its own rows, summary and inputs); ``validate``: the rest."""
        doc = self.comparison.to_json(self.timeline_config)
        doc["cpu_note"] = self.cpu_note or None
        doc["summary"]["failures"] = list(self.failures)
        a = self.anchored
        doc["anchored"] = None if a is None else {
            **a.comparison.to_json(self.timeline_config), "inputs": a.inputs_json()}
        doc["validate"] = {
            **self.before.inputs_json(), "calibrated_here": self.link_info,
            "verdict": self.verdict(), "timeline_config": self.timeline_config,
            "timeline_note": self.timeline_note, "load_before_after": list(self.load),
            "elapsed_s": round(self.elapsed_s, 1), "caveats": caveats(self.settings)}
        return doc

    def text(self, out_dir: str | None = None) -> str:
        """The report: a short summary first (the verdict, the error figures, the best
        configuration, where the files went: ``out_dir``), then the details — the inputs
        predicted from, the table and its summary, the anchored prediction, the
        recommendation as ``simddp sweep`` words it, notes and caveats."""
        s = self.settings
        what = ("one --module micro-batch per rank" if s.module
                else f"batch {s.batch} x seq {s.seq}")
        head = (f"# validate: {self.profile.name}, {what}, {s.precision}, {s.backend}, "
                f"{s.world_size} ranks; {self.load[0]:.2f} -> {self.load[1]:.2f} load; "
                f"{self.elapsed_s:.0f} s")
        return "\n".join([head, *self.summary_lines(out_dir), "", "details:",
                          *self.detail_lines()])

    def summary_lines(self, out_dir: str | None = None) -> list[str]:
        """A few lines a person reads first: the verdict with its margin and spread, the
        prediction's errors, the recommended against the measured-best configuration,
        failures, and where the files went."""
        v, c = self.verdict(), self.comparison
        sm = c.summary
        scored = [r for r in c.rows if not r.is_input]
        worst = max(scored, key=lambda r: abs(r.error_pct))
        rho = "n/a" if sm.spearman is None else f"{sm.spearman:.3f}"
        errors = (f"  prediction made before the runs: |error| median {sm.median_ape:.1f} %, "
                  f"max {sm.max_ape:.1f} % ({worst.label}), Spearman rho {rho} over "
                  f"{sm.configs} configs"
                  + ("" if not sm.with_range else
                     f"; {sm.in_range} of {sm.with_range} measured medians inside their "
                     "predicted range"))
        if self.anchored is not None:
            a = self.anchored.comparison.summary
            errors += (f"; anchored: median {a.median_ape:.1f} %, max {a.max_ape:.1f} %")
        lines = ["summary:", f"  verdict: {v['text'] or 'none (nothing recommended)'}",
                 errors]
        best = self.best_lines()
        lines += [f"  {line}" for line in best]
        if self.failures:
            lines.append(f"  FAILED: {len(self.failures)} configuration(s), named below")
        if out_dir is not None:
            lines.append(f"  files: {out_dir}/ (validate.json, compare.json and .csv, the "
                         "compare PNGs, predicted, measured, link and profile JSON)")
        return lines

    def best_lines(self) -> list[str]:
        """The recommended configuration and what it measured, against the measured-best
        bucket of its strategy (as the verdict pools them) and the fastest configuration
        measured."""
        v, c = self.verdict(), self.comparison
        out = []
        if "recommended_ms" in v:
            mbs = v["same_layout_mb"]
            pooled = " pooled" if len(mbs) > 1 else ""
            best_pooled = " pooled" if len(v["measured_best_mbs"]) > 1 else ""
            out.append(f"recommended: {v['recommended_strategy']} at {sizes_text(mbs)}, "
                       f"measured {v['recommended_ms']:.2f} ms{pooled}; measured best "
                       f"bucket: {sizes_text(v['measured_best_mbs'])}, "
                       f"{v['measured_best_ms']:.2f} ms{best_pooled}")
        real = [r for r in c.rows if not r.is_input and r.strategy != COMPUTE_ONLY]
        if real:
            fastest = min(real, key=lambda r: r.measured_s)
            out.append(f"fastest configuration measured: {fastest.label}, "
                       f"{fastest.measured_s * 1e3:.2f} ms median")
        return out

    def detail_lines(self) -> list[str]:
        l, gloo = self.link, self.link_file.host
        contention = self.link_file.contention or NONE
        spread = self.profile.compute_spread
        lines = ["# prediction made BEFORE the runs, from the calibration and the profile "
                 "alone (what calibrate + realrun profile + simddp sweep give a user):",
                 f"#   link {l.name}: α {l.alpha_s * 1e6:.0f} µs"
                 + ("" if gloo is None or gloo.blocking_alpha_s is None else
                    f" (blocking {gloo.blocking_alpha_s * 1e6:.0f} µs)")
                 + ("" if gloo is None or not gloo.idle_wake_s else
                    f", wake after compute {gloo.idle_wake_s * 1e3:.2f} ms") + ", busbw "
                 f"{l.busbw_gbps:.3g} GB/s, contention compute x{contention.compute:.2f} "
                 f"comm x{contention.comm:.2f}",
                 *link_warnings(l),
                 f"#   host costs: {host_line(self.host)}",
                 f"#   profile: forward {self.profile.forward_s * 1e3:.2f} ms, backward "
                 f"{self.profile.backward_s * 1e3:.2f} ms, optimizer "
                 f"{self.profile.optimizer_s * 1e3:.2f} ms, {self.profile.n_tensors} tensors "
                 f"({self.profile.grad_total_bytes / 2 ** 20:.1f} MiB)"
                 + ("" if spread is None else
                    f", compute spread x{spread[0]:.2f}–x{spread[1]:.2f}"),
                 *([f"#   note: measured with {self.cpu_note}"] if self.cpu_note else []),
                 format_table(self.comparison, self.timeline_config)]
        if self.anchored is not None:
            lines += ["", anchored_text(self.anchored)]
        for f in self.failures:
            lines.append(f"FAILED {f}")
        lines += ["", "# simddp's recommendation, from the prediction made before the runs "
                  "(simddp sweep's words: its times are predicted; the verdict above is "
                  "the measurement's):", self.verdict()["recommendation"]]
        if self.timeline_note:
            lines.append(self.timeline_note)
        lines += caveats(self.settings)
        return lines

    def write(self, out_dir: str) -> list[str]:
        """validate.json, compare.{json,csv}, predicted.json (before running),
        anchored_predicted.json, measured.json, link.json, profile.json, PNGs."""
        from simddp.compare.plots import write_compare_files  # matplotlib: only here
        paths = [str(p) for p in write_compare_files(self.comparison, out_dir,
                                                     timeline=self.timeline_config)]
        files = {"validate.json": self.to_json(),
                 "predicted.json": results_to_json(self.predicted),
                 **({} if self.anchored is None else
                    {"anchored_predicted.json": results_to_json(self.anchored.predicted)}),
                 "measured.json": results_to_json(self.measured),
                 "link.json": link_to_json(self.link_file),
                 "profile.json": {**profile_to_json(self.profile, host=self.host),
                                  "measured": self.profile_measured}}
        for name, doc in files.items():
            path = os.path.join(out_dir, name)
            write_atomic(path, json.dumps(doc, indent=1) + "\n")
            paths.append(path)
        return paths


def link_warnings(link: Link) -> list[str]:
    """One line when calibrate flagged the link's fit as degenerate (calibrate.fit.fit_problems
    writes "DEGENERATE FIT: ..." into the link's source), so the prediction is read as such;
    a note when busbw came from the lone fit.

    >>> bad = Link("l", 1e-3, 1.0, source="x; DEGENERATE FIT: link: busbw at its bound")
    >>> link_warnings(bad)[0][:66]
    '#   WARNING: the link fit is degenerate (link: busbw at its bound)'
    >>> link_warnings(Link("l", 1e-3, 1.0, source="x; busbw from the lone fit: no slope"))[0][:40]
    '#   note: busbw from the lone all-reduce'
    """
    out = []
    if "busbw from the lone fit" in link.source:  # calibrate/analysis.py, a small model's sweep
        out.append("#   note: busbw from the lone all-reduces' fit: no slope fits under the "
                   "step's α on these sizes")
    _, found, what = link.source.partition("DEGENERATE FIT: ")
    return out + [f"#   WARNING: the link fit is degenerate ({what}): predictions built on it "
                  "are suspect"] if found else out


def anchored_text(a: Prediction) -> str:
    """The anchored prediction in a few lines: how it scores and which inputs it changed."""
    sm = a.comparison.summary
    rho = "n/a" if sm.spearman is None else f"{sm.spearman:.3f}"
    lines = [f"# anchored prediction (inputs measured alongside the runs, for diagnosis): "
             f"|error| median {sm.median_ape:.1f} %, max {sm.max_ape:.1f} %, Spearman rho "
             f"{rho}" + ("" if sm.regret is None else
                         f", best bucket predicted {sm.predicted_best_bucket_mb:g} MB vs "
                         f"measured {sm.measured_best_bucket_mb:g} MB, regret "
                         f"{sm.regret:.1f} %")]
    pr = a.probes
    if pr is not None and pr["fields"]:
        def show(k: str, v: float) -> str:
            if k.endswith("_gbps"):
                return f"{k[:-5]} {v:.3g} GB/s"
            if k.endswith("_slowdown"):
                return f"{k} x{v:.2f}"
            return f"{k} {v * 1e6:.0f} µs"
        lines.append("#   link from probes run alongside the strategies: "
                     + ", ".join(show(k, v) for k, v in pr["fields"].items())
                     + " (before running: " + ", ".join(
                         "-" if v is None else show(k, v)
                         for k, v in pr["calibrated"].items()) + ")")
    c = a.compute_anchor
    if c is not None:
        lines.append(f"#   compute: {c['profile_ms']:.2f} ms per step in the profile, set to the "
                     f"compute-only median measured alongside the strategies, "
                     f"{c['measured_ms']:.2f} ms (x{c['factor']:.3f})")
    return "\n".join(lines)
