"""validate's report — table, summary, recommendation and verdict, JSON, files.

The pipeline (:mod:`realrun.validate.pipeline`) builds a :class:`ValidationReport`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from realrun.validate.settings import ValidateSettings
from simddp.compare import Comparison, format_table
from simddp.compare.metrics import ratio_interval
from simddp.host import Host
from simddp.io import link_to_json, profile_to_json, results_to_json, write_atomic
from simddp.link import Link
from simddp.profile import ModelProfile
from simddp.report.recommendation import recommendation_text
from simddp.result import Result
from simddp.sweeps import recommend



# How much slower than the measured best a recommendation may measure and still count as
# right: the validation target for regret (docs/VALIDATION.md).
MARGIN_PCT = 3.0


@dataclass
class ValidationReport:
    settings: ValidateSettings
    link: Link
    host: Host | None                # the DDP implementations' host costs (None: free)
    link_info: dict | None
    profile: ModelProfile
    profile_measured: dict | None
    predicted: list[Result]
    measured: list[Result]
    comparison: Comparison
    failures: list[str]
    timeline_config: str | None
    timeline_note: str
    compute_anchor: dict | None      # profile vs measured compute-only ms, and the factor
    probes: dict | None              # link fields set from the in-run probes, and medians
    load: tuple[float, float]        # 1-min load average before and after
    elapsed_s: float

    def verdict(self) -> dict:
        """simddp's recommendation and whether the measurement proves or refutes it."""
        rec = recommend(self.predicted)
        naive = next((r for r in self.predicted if r.strategy == "naive"), None)
        out = {"recommendation": recommendation_text(rec, naive), "proven": None, "text": ""}
        if rec is None:
            return out
        measured = [r for r in self.measured if r.strategy == rec.strategy
                    and r.bucket_mb is not None]
        at_rec = next((r for r in measured if abs(r.bucket_mb - rec.bucket_mb)
                       <= 1e-3 * rec.bucket_mb), None)
        if at_rec is None:
            out["text"] = (f"Not measured: {rec.strategy} at {rec.bucket_mb:g} MB did not run, "
                           "so the recommendation is neither proven nor refuted.")
            return out
        best = min(measured, key=lambda r: r.step_s)
        out.update(measured_best_mb=best.bucket_mb, margin_pct=MARGIN_PCT)
        if best is at_rec:
            out.update(proven=True, regret_pct=0.0, regret_ci_pct=None)
            out["text"] = (f"PROVEN: measured, {rec.strategy} at {rec.bucket_mb:g} MB is the "
                           f"fastest bucket size ({at_rec.step_ms:.2f} ms median).")
            return out
        regret, low, high = (ratio_interval(at_rec.steps_s, best.steps_s)
                             if at_rec.steps_s and best.steps_s else
                             (100 * (at_rec.step_s / best.step_s - 1),) * 3)
        out.update(regret_pct=regret, regret_ci_pct=[low, high])
        said = (f"the measured best is {best.bucket_mb:g} MB ({best.step_ms:.2f} ms); "
                f"{rec.bucket_mb:g} MB is {regret:.1f} % slower (95 % interval {low:+.1f} … "
                f"{high:+.1f} %, {at_rec.samples} steps each")
        if high <= MARGIN_PCT:
            out["proven"] = True
            out["text"] = (f"PROVEN within noise: {said}), inside the {MARGIN_PCT:g} % margin a "
                           "recommendation may cost.")
        elif low > MARGIN_PCT:
            out["proven"] = False
            out["text"] = (f"REFUTED: {said}): following the recommendation costs more than "
                           f"the {MARGIN_PCT:g} % margin.")
        else:
            out["proven"] = None
            out["text"] = (f"WITHIN NOISE: {said}), which straddles the {MARGIN_PCT:g} % "
                           "margin: at this many steps the bucket sizes cannot be told apart; "
                           "more --steps would decide.")
        return out

    def to_json(self) -> dict:
        doc = self.comparison.to_json()
        doc["summary"]["failures"] = list(self.failures)
        doc["validate"] = {
            "link": {"name": self.link.name, "alpha_us": self.link.alpha_s * 1e6,
                     "blocking_alpha_us": (None if self.link.blocking_alpha_s is None
                                           else self.link.blocking_alpha_s * 1e6),
                     "busbw_gbps": self.link.busbw_gbps,
                     "compute_slowdown": self.link.compute_slowdown,
                     "comm_slowdown": self.link.comm_slowdown,
                     "calibrated_here": self.link_info},
            "host_costs": None if self.host is None else {
                impl: {"copy_gbps": c.copy_gbps, "scale_gbps": c.scale_gbps,
                       "hook_us": c.hook_s * 1e6, "launch_us": c.launch_s * 1e6}
                for impl, c in self.host.implementations.items()},
            "profile": {"forward_ms": self.profile.forward_s * 1e3,
                        "backward_ms": self.profile.backward_s * 1e3,
                        "optimizer_ms": self.profile.optimizer_s * 1e3,
                        "tensors": self.profile.n_tensors,
                        "grad_mib": self.profile.grad_total_bytes / 2 ** 20},
            "compute_anchor": self.compute_anchor, "probes": self.probes,
            "verdict": self.verdict(), "timeline_config": self.timeline_config,
            "timeline_note": self.timeline_note, "load_before_after": list(self.load),
            "elapsed_s": round(self.elapsed_s, 1)}
        return doc

    def text(self) -> str:
        s, l = self.settings, self.link
        what = ("one --module micro-batch per rank" if s.module
                else f"batch {s.batch} x seq {s.seq}")
        lines = [f"# validate: {self.profile.name}, {what}, {s.precision}, {s.backend}, "
                 f"{s.world_size} ranks; link {l.name}: α {l.alpha_s * 1e6:.0f} µs"
                 + ("" if l.blocking_alpha_s is None else
                    f" (blocking {l.blocking_alpha_s * 1e6:.0f} µs)") + ", busbw "
                 f"{l.busbw_gbps:.3g} GB/s, contention compute x{l.compute_slowdown:.2f} "
                 f"comm x{l.comm_slowdown:.2f}",
                 f"# host costs: {host_line(self.host)}",
                 f"# profile: forward {self.profile.forward_s * 1e3:.2f} ms, backward "
                 f"{self.profile.backward_s * 1e3:.2f} ms, optimizer "
                 f"{self.profile.optimizer_s * 1e3:.2f} ms, {self.profile.n_tensors} tensors "
                 f"({self.profile.grad_total_bytes / 2 ** 20:.1f} MiB); load "
                 f"{self.load[0]:.2f} -> {self.load[1]:.2f}; {self.elapsed_s:.0f} s",
                 format_table(self.comparison)]
        pr = self.probes
        if pr is not None and pr["fields"]:
            def show(k: str, v: float) -> str:
                if k.endswith("_gbps"):
                    return f"{k[:-5]} {v:.3g} GB/s"
                if k.endswith("_slowdown"):
                    return f"{k} x{v:.2f}"
                return f"{k} {v * 1e6:.0f} µs"
            lines.insert(3, "# link from probes run alongside the strategies: "
                         + ", ".join(show(k, v) for k, v in pr["fields"].items())
                         + " (the calibration phase said: " + ", ".join(
                             "-" if v is None else show(k, v)
                             for k, v in pr["calibrated"].items()) + ")")
        a = self.compute_anchor
        if a is not None:
            lines.insert(3, f"# compute: {a['profile_ms']:.2f} ms per step in the profile phase,"
                         f" set to the compute-only median measured alongside the strategies, "
                         f"{a['measured_ms']:.2f} ms (x{a['factor']:.3f}); --profile-compute "
                         "keeps the profile's")
        for f in self.failures:
            lines.append(f"FAILED {f}")
        v = self.verdict()
        lines += ["", v["recommendation"]]
        if v["text"]:
            lines.append(v["text"])
        if self.timeline_note:
            lines.append(self.timeline_note)
        return "\n".join(lines)

    def write(self, out_dir: str) -> list[str]:
        """validate.json, compare.{json,csv}, predicted.json, measured.json, link.json, PNGs."""
        from simddp.compare.plots import write_compare_files  # matplotlib: only here
        paths = [str(p) for p in write_compare_files(self.comparison, out_dir,
                                                     timeline=self.timeline_config)]
        files = {"validate.json": self.to_json(),
                 "predicted.json": results_to_json(self.predicted),
                 "measured.json": results_to_json(self.measured),
                 "link.json": link_to_json(self.link),
                 "profile.json": {**profile_to_json(self.profile, host=self.host),
                                  "measured": self.profile_measured}}
        for name, doc in files.items():
            path = os.path.join(out_dir, name)
            write_atomic(path, json.dumps(doc, indent=1) + "\n")
            paths.append(path)
        return paths


def host_line(host: Host | None) -> str:
    """'realrun copies 2.1 GB/s, hooks 140 µs/gradient + 60 µs/launch; torch ...' or 'free'."""
    if host is None or host.free:
        return "free (not charged)"
    parts = []
    for impl, c in host.implementations.items():
        copies = "free" if c.copy_gbps is None else f"{c.copy_gbps:.2f} GB/s"
        parts.append(f"{impl}: copies {copies}, hooks {c.hook_s * 1e6:.0f} µs per gradient"
                     + (f" + {c.launch_s * 1e6:.0f} µs per launch" if c.launch_s else ""))
    return "; ".join(parts)
