"""Re-predict finished validations with and without each piece of physics added to them.

    python bench/validate_ab.py                                   # every cell under out/grid
    python bench/validate_ab.py out/grid/mlp-loopback out/grid/tfm-2gbit

Reads DIR/profile.json, DIR/link.json, DIR/measured.json and DIR/validate.json written by
``python -m realrun validate --out DIR``. The measurements stay the same numbers; only the
simulator's inputs change:

- ``lone α``: one α–β line fitted to the calibration rows with relative residuals (every
  size; calibrate holds every 3rd out, so this differs slightly) — α of a lone all-reduce,
  one α for every plan, as ``--lone-alpha`` (and everything before 2026-11-22) predicted;
- ``seq α``: the link as saved — α of this model's all-reduces issued back to back (async
  for overlapping plans, blocking for the others), busbw fitted with that α held;
- ``+anchor``: the compute total set to the compute-only median measured alongside the
  strategies (the compute-only row then is an input, not scored), as ``realrun validate``
  does by default; without it the profile phase's totals are used (``--profile-compute``).

The wrapper's copy costs are charged in every variant (they were added before; their effect
is in docs/VALIDATION.md's earlier tables).
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from realrun.validate import COMPUTE_ONLY, ValidateSettings, predict  # noqa: E402
from realrun.validate_inputs import anchor_compute  # noqa: E402
from simddp.compare import compare_results  # noqa: E402
from simddp.io import load_link, load_profile, load_results  # noqa: E402

VARIANTS = (("lone α", "lone", False), ("seq α", "seq", False),
            ("lone α +anchor", "lone", True), ("seq α +anchor", "seq", True))


def summary(out_dir: str, alpha: str, anchor: bool) -> dict | None:
    path = os.path.join(out_dir, "profile.json")
    profile = load_profile(path)
    link = load_link(os.path.join(out_dir, "link.json"))
    measured = load_results(os.path.join(out_dir, "measured.json"))
    cal = json.load(open(os.path.join(out_dir, "validate.json")))["validate"]["link"]
    cal = cal.get("calibrated_here") or {}
    info = json.load(open(path)).get("measured") or {}
    k = info.get("rank_max_factor")
    if k and info.get("rank_max_applied", True):  # runs before 03:10 scaled by it: undo
        profile = profile.scaled(forward_s=profile.forward_s / k,
                                 backward_s=profile.backward_s / k,
                                 optimizer_s=profile.optimizer_s / k)
    if alpha == "seq" and link.blocking_alpha_s is None:
        return None  # calibrated before the sequence step existed
    if alpha == "lone" and cal.get("rows"):
        from calibrate.fit import fit_alpha_beta
        rows = cal["rows"]
        fit = fit_alpha_beta([r["size_bytes"] for r in rows],
                             [r["time_us"] / 1e6 for r in rows], measured[0].world_size)
        link = dataclasses.replace(link, alpha_s=fit.alpha_s, busbw_gbps=fit.busbw_gbps,
                                   pieces=(), blocking_alpha_s=None)
    inputs = frozenset()
    if anchor:
        profile, _ = anchor_compute(profile, measured)
        inputs = frozenset({COMPUTE_ONLY})
    strategies = tuple(sorted({r.strategy for r in measured} - {COMPUTE_ONLY}))
    mbs = tuple(sorted({r.bucket_mb for r in measured if r.bucket_mb is not None}))
    s = ValidateSettings(strategies=strategies, bucket_mbs=mbs, world_size=measured[0].world_size)
    return compare_results(predict(profile, link, s), measured, inputs=inputs).summary.to_json()


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
