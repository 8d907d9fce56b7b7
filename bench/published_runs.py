"""Published GPU DDP runs, predicted from each write-up's own inputs: how far off, and why.

    python bench/published_runs.py                      # every tests/data/published-runs/*.json
    python bench/published_runs.py --data tests/data/published-runs/damek-cs336-2gpu-xl.json

Each dataset (tests/data/published-runs/, format simddp.published-run/1, its source in the
file) is predicted the same way, with no per-dataset knob:

- the link: α–β fitted to the write-up's own all-reduce benchmark (least squares on relative
  error, as simddp.cost.fitted fits curves), or, where it printed none, the link preset it
  names (``link_preset``);
- compute per setting: the write-up's naive step less its own all-reduce wait, or its
  single-GPU step scaled to a rank's micro-batches; split into forward, backward and
  optimizer in the model preset's proportions (``--device``, default a100, as
  ``simddp sweep`` would);
- each row predicted by ``simddp.sweep`` with its prediction ranges, as ``simddp sweep
  --device a100`` predicts it: no contention is measured, the compute runs on a GPU, so the
  point takes the published GPU contention (compute x1.189, comm x2.22) and the range runs
  from none to compute x1.40, comm x2.22 (simddp.inputs.contention.default_contention); no
  contention is passed in. Beside it, for reference, the same sweep with no device named,
  which keeps no contention (what a GPU sweep predicted before the default).

Prints per row measured, the default's prediction and error, its range and whether the
measured step lies in it, and the no-device prediction; then the median and max APE of
both. Rows the dataset marks ``"checked": false`` and outliers named in ``OUTLIERS`` (with
the reason) are shown apart.
"""
from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from simddp import Link, build_profile, get_link, parse_model, resolve
from simddp.inputs.contention import PUBLISHED_GPU_SOURCE
from simddp.cost.fitted import relative_line
from simddp.predict.scenarios import range_sources
from simddp.predict.sweep import sweep

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "published-runs"
# (dataset, strategy, local batch, seq): why the row is reported apart.
OUTLIERS = {
    ("damek-cs336-2gpu-xl", "flat", 4, 512):
        "1962.8 ms against 915-1143 ms for every other row of its setting (naive 1143.4): "
        "its all-reduce wait (402.9 ms) is like its neighbours', so ~800 ms went elsewhere "
        "in that one run (the other 41 rows are counted without it)",
}


def fit_alpha_beta(points: list[dict]) -> tuple[float, float]:
    """(α seconds, busbw GB/s) of a 2-rank all-reduce from (MB, seconds) points: least
    squares on relative error (α + n/busbw − t)/t, the sizes in 10^6 bytes as the write-up
    labels them; at 2 ranks busbw = algbw::

        >>> a, bw = fit_alpha_beta([{"mb": 1, "seconds": 1.1e-4}, {"mb": 10, "seconds": 5.1e-4}])
        >>> round(a * 1e6, 1), round(bw, 2)
        (65.6, 22.5)
    """
    alpha_s, beta = relative_line([p["mb"] * 1e6 for p in points], [p["seconds"] for p in points])
    return alpha_s, 1 / beta / 1e9


def dataset_link(d: dict) -> tuple[Link, str]:
    """The link a check uses and one line saying where it comes from."""
    bench = d.get("allreduce_benchmark")
    if bench:
        pts = bench[f"world_size_{d['world_size']}"]
        alpha_s, busbw = fit_alpha_beta(pts)
        worst = max(abs((alpha_s + p["mb"] * 1e6 / (busbw * 1e9)) / p["seconds"] - 1)
                    for p in pts)
        return (Link(d["name"], alpha_s, busbw, backend="nccl"),
                f"α {alpha_s * 1e6:.1f} µs, busbw {busbw:.2f} GB/s: fitted to its own "
                f"all-reduce benchmark ({len(pts)} sizes, worst {worst:.1%} off the line)")
    link = get_link(d["link_preset"])
    return link, (f"{link.name} preset (α {link.alpha_s * 1e6:g} µs, busbw "
                  f"{link.busbw_gbps:g} GB/s): the write-up prints no all-reduce benchmark")


def compute_s(d: dict, local_batch: int, seq: int) -> float:
    """A rank's compute-only step: naive less its own all-reduce wait, else the single-GPU
    step scaled to a rank's micro-batches."""
    rows = [r for r in d["rows"] if (r["local_batch"], r["seq"]) == (local_batch, seq)]
    naive = next((r for r in rows if r["strategy"] == "naive"), None)
    if naive is not None:
        return (naive["step_ms"] - naive["grad_allreduce_ms"]) / 1e3
    single = next(r for r in rows if r["strategy"] == "single_gpu")
    ddp = next(r for r in rows if r.get("micro_batches") and r["strategy"] != "single_gpu")
    return single["step_ms"] / 1e3 * ddp["micro_batches"] / single["micro_batches"]


def predict(d: dict, device: str) -> list[dict]:
    """Every checked row's measured step, the sweep's prediction on ``device`` (``default``,
    with its range ``range_ms``) and with no device named (``none``), in ms."""
    link, _ = dataset_link(d)
    spec = parse_model(d["model"]["preset"])
    out = []
    settings = sorted({(r["local_batch"], r["seq"]) for r in d["rows"]})
    for b, s in settings:
        p = build_profile(spec, device, b, s)
        f = compute_s(d, b, s) / (p.forward_s + p.backward_s + p.optimizer_s)
        rows = [r for r in d["rows"] if (r["local_batch"], r["seq"]) == (b, s)
                and r["strategy"] != "single_gpu" and r.get("checked", True)]
        accum = max([r.get("micro_batches") or 1 for r in rows])
        if accum > 1:   # the compute above is a whole step of `accum` micro-batches
            f /= accum
        p = p.scaled(p.forward_s * f, p.backward_s * f, p.optimizer_s * f * accum)
        names = sorted({r["strategy"] for r in rows})
        mbs = sorted({r["bucket_mb"] for r in rows if r["bucket_mb"] is not None})
        steps, ranges = {}, {}
        # "none": the same profile with no device named, so no contention is assumed
        for key, prof in (("default", p), ("none", replace(p, device=None))):
            for res in sweep(prof, link, d["world_size"], names, mbs, accum_steps=accum,
                             ranges=True):
                steps[(key, res.strategy, res.bucket_mb)] = res.step_s * 1e3
                if key == "default":
                    ranges[(res.strategy, res.bucket_mb)] = tuple(
                        v * 1e3 for v in res.step_range_s)
        for r in rows:
            bucket = float(r["bucket_mb"]) if r["bucket_mb"] is not None else None
            pred = {k: steps[(k, r["strategy"], bucket)] for k in ("default", "none")}
            out.append({**r, "predicted_ms": pred, "range_ms": ranges[(r["strategy"], bucket)],
                        "dataset": d["name"],
                        "outlier": OUTLIERS.get((d["name"], r["strategy"], b, s))})
    return out


def ranges_line(d: dict, device: str) -> str:
    """What the sweep says its ranges are made of, for this dataset on ``device``."""
    link, _ = dataset_link(d)
    p = build_profile(parse_model(d["model"]["preset"]), device)
    return range_sources(resolve(p, link, d["world_size"]))


def ape(row: dict, key: str) -> float:
    return abs(row["predicted_ms"][key] / row["step_ms"] - 1)


def in_range(row: dict) -> bool:
    lo, hi = row["range_ms"]
    return lo <= row["step_ms"] <= hi


def overlapped(rows: list[dict]) -> list[dict]:
    """The rows whose plans overlap compute with communication (all but naive and flat),
    the ones contention moves."""
    return [r for r in rows if r["strategy"] not in ("naive", "flat")]


def report(d: dict, rows: list[dict], device: str, out=sys.stdout) -> dict:
    """Print one dataset's rows and summary; return the summary."""
    _, link_line = dataset_link(d)
    print(f"\n{d['name']}: {d['world_size']} ranks, model {d['model']['preset']}; link {link_line}",
          file=out)
    print(f"prediction ranges (simddp sweep --device {device}): {ranges_line(d, device)}",
          file=out)
    print(f"{'strategy':9} {'MB':>5} {'b':>2} {'seq':>5} {'measured':>9} {'default':>8} "
          f"{'err':>7} {'range':>19} in  {'no device':>9} {'err':>7}", file=out)
    for r in rows:
        p = r["predicted_ms"]
        lo, hi = r["range_ms"]
        mark = "yes" if in_range(r) else "no "
        print(f"{r['strategy']:9} {r['bucket_mb'] or '-':>5} {r['local_batch']:>2} {r['seq']:>5} "
              f"{r['step_ms']:9.1f} {p['default']:8.1f} {p['default'] / r['step_ms'] - 1:+7.1%} "
              f"{lo:9.1f}–{hi:<9.1f} {mark} {p['none']:9.1f} {p['none'] / r['step_ms'] - 1:+7.1%}"
              f"{'  (outlier)' if r['outlier'] else ''}", file=out)
    kept = [r for r in rows if not r["outlier"]]
    summary = {"dataset": d["name"], "rows": len(kept)}
    for key, what in (("default", f"sweep default on {device}"), ("none", "no device named")):
        errs = [ape(r, key) for r in kept]
        summary[key] = (statistics.median(errs), max(errs))
        print(f"  {what:24}: median APE {summary[key][0]:.1%}, max {summary[key][1]:.1%} "
              f"over {len(kept)} rows", file=out)
    inside = sum(in_range(r) for r in overlapped(kept))
    summary["overlapped_in_range"] = (inside, len(overlapped(kept)))
    print(f"  overlapped rows inside the default's range: {inside} of {len(overlapped(kept))}",
          file=out)
    for r in rows:
        if r["outlier"]:
            print(f"  apart: {r['strategy']} b{r['local_batch']} seq {r['seq']}: {r['outlier']}",
                  file=out)
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="*", default=None,
                    help="published-run files (default: every tests/data/published-runs/*.json)")
    ap.add_argument("--device", default="a100",
                    help="device whose roofline splits compute into forward, backward and "
                         "optimizer (default %(default)s, as simddp sweep)")
    args = ap.parse_args(argv)
    paths = args.data or sorted(glob.glob(str(DATA / "*.json")))
    print(f"published GPU contention: {PUBLISHED_GPU_SOURCE}")
    for path in paths:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        report(d, predict(d, args.device), args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
