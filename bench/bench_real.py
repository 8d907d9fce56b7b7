"""Our bucketed DDP against torch's DistributedDataParallel at the same bucket cap, measured.

    python bench/bench_real.py                                  # loopback, then emulated 1 Gbit/s
    python bench/bench_real.py --links loopback --steps 60      # no root needed
    python bench/bench_real.py --model mlp-8x1024 --bucket-mb 1,10,100 --out out/bench_real

For each link this runs ``python -m realrun bench`` once (all configurations interleaved in
one world: compute-only, naive, flat, overlap, bucketed and ddp at every cap), reads its
bench.json and prints, per configuration, the median step over the steps (each step the max
over ranks), the p5–p95 spread and n, and:

- ``vs ddp``: median / median of torch ddp at the same cap (bucketed and ddp rows);
- ``95% CI``: a bootstrap interval of that ratio (resampling each configuration's steps);
- ``vs best ddp``: median / the fastest torch ddp cap (every row, incl. naive/flat/overlap).

The emulated link puts each rank in its own network namespace behind a 1 Gbit/s tbf-shaped
veth (``--emulate-hosts 2 --link-gbit 1``), which needs root; without it that link is skipped.
Output is Markdown, ready for docs/BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINKS = {"loopback": [], "emulated-1Gbit": ["--emulate-hosts", "2", "--link-gbit", "1"]}
BOOTSTRAP_DRAWS = 2000


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--links", default=",".join(LINKS), help="comma list of %(default)s")
    p.add_argument("--model", default="mlp-8x1024")
    p.add_argument("--batch", default="2")
    p.add_argument("--seq", default="8")
    p.add_argument("--bucket-mb", default="1,10,100")
    p.add_argument("--steps", default="60", help="timed steps per configuration")
    p.add_argument("--warmup", default="5")
    p.add_argument("--timeout-s", default="120")
    p.add_argument("--out", default=os.path.join(ROOT, "out", "bench_real"))
    args, extra = p.parse_known_args()   # anything else goes to `realrun bench` as is
    for link in args.links.split(","):
        if link not in LINKS:
            p.error(f"--links: unknown {link!r}; choose from {', '.join(LINKS)}")
        if link != "loopback" and os.geteuid() != 0:
            print(f"## {link}: skipped (network namespaces need root)\n")
            continue
        out = os.path.join(args.out, link)
        cmd = ["python", "-m", "realrun", "bench", "--model", args.model, "--batch", args.batch,
               "--seq", args.seq, "--bucket-mb", args.bucket_mb, "--steps", args.steps,
               "--warmup", args.warmup, "--timeout-s", args.timeout_s, *LINKS[link], *extra,
               "--format", "json", "--out", out]
        print(f"## {link}\n\n    {' '.join(cmd[:-2])} --out {os.path.relpath(out, ROOT)}\n",
              flush=True)
        done = subprocess.run([sys.executable, *cmd[1:]], cwd=ROOT, stdout=subprocess.DEVNULL)
        if done.returncode != 0:
            print(f"`realrun bench` failed with exit code {done.returncode}; see stderr above")
            return done.returncode
        with open(os.path.join(out, "bench.json"), encoding="utf-8") as f:
            print(report(json.load(f)) + "\n", flush=True)
    return 0


def report(data: dict) -> str:
    """Markdown table of one bench.json: medians, spread, n and the ratios to torch ddp."""
    rng = np.random.default_rng(0)
    steps = {label: np.asarray(s) for label, s in data["steps_s"].items()}
    rows = data["results"]
    labels = [_label(r) for r in rows]
    ddp = {r["bucket_mb"]: lab for r, lab in zip(rows, labels) if r["strategy"] == "ddp"}
    best_ddp = min(ddp.values(), key=lambda lab: np.median(steps[lab])) if ddp else None
    meta = data["bench"]
    lines = [f"{meta['model']}, batch {meta['batch']} x seq {meta['seq']} per rank, "
             f"{meta['world_size']} ranks, {meta['backend']}, {meta['link']}, "
             f"{meta['steps']} steps per config after {meta['warmup']} warm-up "
             f"(interleaved in chunks of {meta['chunk']}); best torch ddp: {best_ddp}", "",
             "| config | all-reduces | median ms | p5–p95 ms | n | vs ddp same cap | 95% CI "
             "| vs best ddp |", "|---|---:|---:|---:|---:|---:|---|---:|"]
    for r, lab in zip(rows, labels):
        s = steps[lab]
        same = ddp.get(r["bucket_mb"]) if r["strategy"] in ("bucketed", "ddp") else None
        ratio = ci = "–"
        if same is not None:
            ratio = f"{np.median(s) / np.median(steps[same]):.3f}"
            lo, hi = _bootstrap_ratio(rng, s, steps[same])
            ci = f"{lo:.3f}–{hi:.3f}" if same != lab else "–"
        vs_best = f"{np.median(s) / np.median(steps[best_ddp]):.3f}" if best_ddp else "–"
        lines.append(f"| {lab} | {r['collectives']} | {np.median(s) * 1e3:.1f} | "
                     f"{np.percentile(s, 5) * 1e3:.1f}–{np.percentile(s, 95) * 1e3:.1f} | "
                     f"{s.size} | {ratio} | {ci} | {vs_best} |")
    return "\n".join(lines)


def _bootstrap_ratio(rng, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """2.5th and 97.5th percentiles of median(a*)/median(b*) over resamples a*, b*."""
    ia = rng.integers(0, a.size, size=(BOOTSTRAP_DRAWS, a.size))
    ib = rng.integers(0, b.size, size=(BOOTSTRAP_DRAWS, b.size))
    ratios = np.median(a[ia], axis=1) / np.median(b[ib], axis=1)
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def _label(result: dict) -> str:
    mb = result["bucket_mb"]
    return result["strategy"] if mb is None else f"{result['strategy']}-{mb:g}MB"


if __name__ == "__main__":
    raise SystemExit(main())
