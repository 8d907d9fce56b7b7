"""Re-predict finished validations with and without each added piece of physics.

    python bench/validate_ab.py                                   # every cell under out/grid
    python bench/validate_ab.py out/grid/mlp-loopback out/grid/tfm-2gbit

Reads DIR/profile.json, DIR/link.json, DIR/measured.json and DIR/validate.json written by
``python -m realrun validate --out DIR``. The measurements stay the same numbers; only the
simulator's inputs change, one piece at a time:

- ``before``: one α–β line fitted to the calibration rows (every size; calibrate's own fit
  holds every 3rd size out, so this differs slightly), copies free, rank 0's median
  compute — the simulator as it was;
- ``+copies``: plus the wrapper's gradient copies (link.copy_gbps, scale_gbps as measured) —
  what ``realrun validate`` predicts by default (up to that held-out detail);
- ``+jitter``: plus the slowest-rank compute (profile × the measured rank_max_factor), as
  ``--rank-max`` would;
- ``+piecewise``: copies with the link's two-line fit, as ``--piecewise`` would — only for
  cells calibrated that way;
- ``diag:oracle``: NOT a prediction — the compute total set to this run's own measured
  compute-only median, so what remains is the communication/overlap model's error alone.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from realrun.validate import ValidateSettings, predict  # noqa: E402
from simddp.compare import compare_results  # noqa: E402
from simddp.io import load_link, load_profile, load_results  # noqa: E402

VARIANTS = (("before", False, False, False, False), ("+copies", False, True, False, False),
            ("+jitter", False, True, True, False), ("+piecewise", True, True, False, False),
            ("diag:oracle", False, True, False, True))


def _scaled(profile, k: float):
    return profile.scaled(forward_s=profile.forward_s * k, backward_s=profile.backward_s * k,
                          optimizer_s=profile.optimizer_s * k)


def summary(out_dir: str, piecewise: bool, copies: bool, jitter: bool, oracle: bool) -> dict:
    path = os.path.join(out_dir, "profile.json")
    profile = load_profile(path)
    link = load_link(os.path.join(out_dir, "link.json"))
    measured = load_results(os.path.join(out_dir, "measured.json"))
    cal = json.load(open(os.path.join(out_dir, "validate.json")))["validate"]["link"]
    cal = cal.get("calibrated_here") or {}
    info = json.load(open(path)).get("measured") or {}
    k = info.get("rank_max_factor")
    applied = info.get("rank_max_applied", k is not None)  # runs before 03:10 applied it
    if k and applied and not jitter:  # undo the slowest-rank scaling: rank 0's medians
        profile = _scaled(profile, 1 / k)
    elif k and jitter and not applied:
        profile = _scaled(profile, k)
    if piecewise and not link.pieces:
        return None  # this cell was calibrated with one line
    if not piecewise and cal.get("rows") and link.pieces:
        from calibrate.fit import fit_alpha_beta
        rows = cal["rows"]
        fit = fit_alpha_beta([r["size_bytes"] for r in rows],
                             [r["time_us"] / 1e6 for r in rows], measured[0].world_size)
        link = dataclasses.replace(link, alpha_s=fit.alpha_s, busbw_gbps=fit.busbw_gbps,
                                   pieces=())
    if not copies:
        link = dataclasses.replace(link, copy_gbps=None, scale_gbps=None)
    if oracle:
        m = next(r for r in measured if r.strategy == "compute-only").step_s
        profile = _scaled(profile, m / (profile.forward_s + profile.backward_s
                                        + profile.optimizer_s))
    strategies = tuple(sorted({r.strategy for r in measured} - {"compute-only"}))
    mbs = tuple(sorted({r.bucket_mb for r in measured if r.bucket_mb is not None}))
    s = ValidateSettings(strategies=strategies, bucket_mbs=mbs, world_size=measured[0].world_size)
    return compare_results(predict(profile, link, s), measured).summary.to_json()


def main(dirs: list[str]) -> None:
    print(f"{'cell':<16}{'simulator':<13}{'median APE':>11}{'max APE':>9}{'rho':>7}"
          f"{'pred best':>10}{'meas best':>10}{'regret %':>9}")
    for d in dirs:
        for name, *flags in VARIANTS:
            s = summary(d, *flags)
            if s is None:
                continue
            rho = "-" if s["spearman"] is None else f"{s['spearman']:.3f}"
            print(f"{os.path.basename(d.rstrip('/')):<16}{name:<13}"
                  f"{s['median_ape']:>11.1f}{s['max_ape']:>9.1f}{rho:>7}"
                  f"{s['predicted_best_bucket_mb']!s:>10}{s['measured_best_bucket_mb']!s:>10}"
                  f"{s['regret']:>9.1f}")


if __name__ == "__main__":
    main(sys.argv[1:] or [os.path.join("out/grid", c) for c in sorted(os.listdir("out/grid"))])
