"""Re-predict finished validations with and without each piece of physics added to them.

    python bench/validate_ab.py                                   # every cell under out/grid
    python bench/validate_ab.py out/grid/mlp-loopback out/grid/tfm-2gbit

Reads DIR/profile.json, DIR/link.json, DIR/measured.json and DIR/validate.json written by
``python -m realrun validate --out DIR``. The measurements stay the same numbers; only the
simulator's inputs change:

Cumulative, one piece at a time:

- ``before``: one α–β line fitted to the calibration rows with relative residuals (every
  size; calibrate holds every 3rd out, so this differs slightly) — a lone all-reduce's α for
  every plan — no hook costs, the profile phase's compute: the simulator as this issue's
  previous runs predicted (``--lone-alpha --profile-compute``, hooks off);
- ``+seq α``: the calibration phase's α — this model's all-reduces issued back to back
  (async for overlapping plans, blocking for the others), busbw fitted with that α held;
- ``+hooks``: plus the host costs per gradient and per launch (each implementation's
  ``hook_s`` and ``launch_s``, simddp.inputs.host) from the profile phase;
- ``+anchor``: plus the compute total set to the compute-only median measured alongside the
  strategies (that row then is an input, not scored);
- ``+probes``: α, blocking α, busbw and the host costs from the probes run in the same rounds
  as the strategies (realrun/workflows/validate/probes.py) instead of the calibration and
  profile phases — what ``realrun validate`` predicts;
- ``anchor only``: ``before`` with the anchor, to separate the physics from the anchor.

The wrapper's copy costs are charged in every variant (added earlier; their effect is in
docs/results/2026-11-22-validation-grid.md).
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from realrun.launch.world import WorldConfig  # noqa: E402
from realrun.workflows.validate import (ValidateSettings, predict,  # noqa: E402
                                       scale_to_compute_only)
from simddp.compare import compare_results  # noqa: E402
from simddp.inputs.host import Host, HostCosts  # noqa: E402
from simddp.inputs.io import load_host, load_link, load_profile  # noqa: E402
from simddp.result import load_results  # noqa: E402
from simddp.result import COMPUTE_ONLY  # noqa: E402

VARIANTS = (("before", "lone", False, False), ("+seq α", "seq", False, False),
            ("+hooks", "seq", True, False), ("+anchor", "seq", True, True),
            ("+probes", "probes", True, True), ("anchor only", "lone", False, True))


def without_hooks(host: Host | None) -> Host | None:
    """The same copies, no hook or launch costs."""
    if host is None:
        return None
    return Host(host.name, {impl: dataclasses.replace(c, hook_s=0.0, launch_s=0.0)
                            for impl, c in host.implementations.items()}, host.source)


def summary(out_dir: str, alpha: str, hooks: bool, anchor: bool) -> dict | None:
    path = os.path.join(out_dir, "profile.json")
    profile = load_profile(path)
    link_path = os.path.join(out_dir, "link.json")
    link = load_link(link_path)
    # runs since 2026-11-23 keep the host costs in the profile, older ones in the link
    host = load_host(path) or load_host(link_path)
    measured = load_results(os.path.join(out_dir, "measured.json"))
    doc = json.load(open(os.path.join(out_dir, "validate.json")))["validate"]
    cal = doc["link"].get("calibrated_here") or {}
    probes = doc.get("probes")
    if alpha == "probes" and not (probes and probes["fields"]):
        return None
    if alpha != "probes" and probes:  # back to the calibration and profile phases' values
        link = dataclasses.replace(link, **{k: v for k, v in probes["calibrated"].items()
                                            if k in {f.name for f in dataclasses.fields(link)}})
        if probes.get("host_before"):
            host = Host("profile phase", {impl: HostCosts(**c)
                                          for impl, c in probes["host_before"].items()})
    info = json.load(open(path)).get("measured") or {}
    k = info.get("rank_max_factor")
    if k and info.get("rank_max_applied", True):  # runs before 03:10 scaled by it: undo
        profile = profile.scaled(forward_s=profile.forward_s / k,
                                 backward_s=profile.backward_s / k,
                                 optimizer_s=profile.optimizer_s / k)
    if (alpha == "seq" and link.blocking_alpha_s is None) or (hooks and host is None):
        return None  # measured before that piece existed
    if not hooks:
        host = without_hooks(host)
    if alpha == "lone" and cal.get("rows"):
        from calibrate.fit import fit_alpha_beta
        rows = cal["rows"]
        fit = fit_alpha_beta([r["size_bytes"] for r in rows],
                             [r["time_us"] / 1e6 for r in rows], measured[0].world_size)
        link = dataclasses.replace(link, alpha_s=fit.alpha_s, busbw_gbps=fit.busbw_gbps,
                                   pieces=(), blocking_alpha_s=None)
    inputs = frozenset()
    if anchor:
        profile, _ = scale_to_compute_only(profile, measured)
        inputs = frozenset({COMPUTE_ONLY})
    strategies = tuple(sorted({r.strategy for r in measured} - {COMPUTE_ONLY}))
    mbs = tuple(sorted({r.bucket_mb for r in measured if r.bucket_mb is not None}))
    s = ValidateSettings(strategies=strategies, bucket_mbs=mbs,
                         world=WorldConfig(world_size=measured[0].world_size))
    return compare_results(predict(profile, link, host, s), measured,
                           inputs=inputs).summary.to_json()


def main(dirs: list[str]) -> None:
    print(f"{'cell':<16}{'simulator':<16}{'median APE':>11}{'max APE':>9}{'rho':>7}"
          f"{'pred best':>10}{'meas best':>10}{'regret %':>9}")
    for d in dirs:
        for name, *flags in VARIANTS:
            s = summary(d, *flags)
            if s is None:
                continue
            rho = "-" if s["spearman"] is None else f"{s['spearman']:.3f}"
            print(f"{os.path.basename(d.rstrip('/')):<16}{name:<16}"
                  f"{s['median_ape']:>11.1f}{s['max_ape']:>9.1f}{rho:>7}"
                  f"{s['predicted_best_bucket_mb']!s:>10}{s['measured_best_bucket_mb']!s:>10}"
                  f"{s['regret']:>9.1f}")


if __name__ == "__main__":
    main(sys.argv[1:] or [os.path.join("out/grid", c) for c in sorted(os.listdir("out/grid"))])
